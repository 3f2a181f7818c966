//! What a session saw, turned into evidence once its scenario is over.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{abbreviate, After, Reply, Session, StreamRec};
use crate::catalog::Id;
use crate::config::Era;
use crate::event::Owner;
use crate::evidence::Evidence;

impl Session {
    /// Turns what the session saw into evidence: the per-event rules for every event, EV-08
    /// across repeated deliveries, NT-03 for unsolicited events, DX-04 for anything after a
    /// cancellation, DX-01 for every closing result. Stops the server.
    pub(crate) fn finish(mut self, ev: &mut Evidence) {
        self.settle_orphans();
        self.read_histories_behind_holes();
        self.judge_contiguity(ev);
        for event in &self.orphans {
            event.judge(Owner::Nobody, ev);
        }
        let mut first_seen: BTreeMap<(String, u64), (Option<String>, Option<Value>)> =
            BTreeMap::new();
        let mut repeats = 0usize;
        for stream in &self.streams {
            if stream.ordered {
                judge_order(stream, ev);
            }
            let owner = if stream.foreign {
                Owner::Leak
            } else {
                Owner::Stream(&stream.task_id)
            };
            for event in &stream.events {
                event.judge(owner, ev);
                let (Some(task), Some(seq)) = (&event.task_id, event.seq) else {
                    continue;
                };
                let content = (event.kind.clone(), event.payload.clone());
                match first_seen.get(&(task.clone(), seq)) {
                    None => {
                        first_seen.insert((task.clone(), seq), content);
                    }
                    Some(first) if *first == content => repeats += 1,
                    Some(first) => ev.fail(
                        Id::Ev08,
                        format!(
                            "task {task} seq {seq} was first {} and later {}",
                            describe_content(first),
                            describe_content(&content)
                        ),
                    ),
                }
            }
            if let Some(Reply::Result(result)) = &stream.reply {
                ev.judge(Id::Dx01, result_shape_failure(self.era, result));
            }
        }
        if repeats > 0 {
            ev.pass(Id::Ev08);
        }
        for seen in &self.unsolicited {
            ev.fail(Id::Nt03, seen.clone());
        }
        for seen in &self.after_cancel {
            ev.fail(Id::Dx04, seen.clone());
        }
    }
}

/// An inclusive range of seqs a stream did not deliver.
type Hole = (u64, u64);

/// The seqs a stream should have delivered and did not, as inclusive ranges: every seq from its
/// start (`cursor + 1`, or without a cursor its lowest seq) up to the highest it delivered, and
/// up to `final_end` when it read a final history to its end.
pub(crate) fn holes(
    cursor: Option<u64>,
    delivered: &BTreeSet<u64>,
    final_end: Option<u64>,
) -> Vec<Hole> {
    let (Some(&lowest), Some(&highest)) = (delivered.first(), delivered.last()) else {
        return Vec::new();
    };
    let start = cursor.map_or(lowest, |c| c.saturating_add(1));
    let end = final_end.map_or(highest, |end| end.max(highest));
    let mut holes = Vec::new();
    let mut next = start;
    for &seq in delivered.range(start..) {
        if seq > next {
            holes.push((next, seq - 1));
        }
        next = seq.saturating_add(1);
    }
    if end >= next {
        holes.push((next, end));
    }
    holes
}

/// Whether any stream of the session carried a seq in `hole`, or the hole lies below every seq
/// seen of the task (so the cursor asked for events no longer retained). Either way the stream
/// skipped events it owed (RS-07); otherwise no stream ever carried them and the numbering
/// itself has a hole (EV-03).
fn skipped_retained(seen: Option<&BTreeSet<u64>>, hole: Hole) -> bool {
    seen.is_some_and(|seen| {
        seen.range(hole.0..=hole.1).next().is_some() || seen.first().is_some_and(|&m| hole.1 < m)
    })
}

fn shown(hole: Hole) -> String {
    if hole.0 == hole.1 {
        format!("seq {}", hole.0)
    } else {
        format!("seqs {}..={}", hole.0, hole.1)
    }
}

impl Session {
    /// The seqs of each task that the session's own streams carried.
    fn seen_by_task(&self) -> BTreeMap<String, BTreeSet<u64>> {
        let mut seen: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for stream in self.streams.iter().filter(|s| !s.foreign) {
            seen.entry(stream.task_id.clone())
                .or_default()
                .extend(stream.seqs());
        }
        seen
    }

    /// A stream's holes: where it read a final history to its end (opened on a terminal task,
    /// closed with a result, something delivered), every seq of the task seen anywhere counts.
    fn stream_holes(stream: &StreamRec, seen: &BTreeMap<String, BTreeSet<u64>>) -> Vec<Hole> {
        let read_to_end = stream.on_terminal && matches!(stream.reply, Some(Reply::Result(_)));
        let final_end = read_to_end
            .then(|| seen.get(&stream.task_id).and_then(|s| s.last().copied()))
            .flatten();
        holes(
            stream.cursor,
            &stream.seqs().into_iter().collect(),
            final_end,
        )
    }

    /// Where a stream has a hole no other stream explains, reads the task's history (a stream
    /// without `after`, for one timeout) to tell a skipped event (RS-07) from a seq never
    /// assigned (EV-03).
    fn read_histories_behind_holes(&mut self) {
        if self.exited {
            return;
        }
        let seen = self.seen_by_task();
        let mut tasks = BTreeSet::new();
        for stream in self.streams.iter().filter(|s| !s.foreign) {
            let unexplained = Session::stream_holes(stream, &seen)
                .into_iter()
                .any(|hole| !skipped_retained(seen.get(&stream.task_id), hole));
            if unexplained {
                tasks.insert(stream.task_id.clone());
            }
        }
        for task in tasks {
            let busy = self
                .streams
                .iter()
                .any(|s| s.is_active() && s.task_id == task);
            if busy {
                continue;
            }
            let Ok(history) = self.open_stream(&task, After::Omitted) else {
                return;
            };
            let deadline = self.deadline();
            if self.collect(history, deadline).is_err() {
                return;
            }
        }
    }

    /// EV-03 and RS-07 on every stream: it carries exactly `after + 1, after + 2, …` (or, without
    /// `after`, every seq from its first on), and a final history read to its end ends at the
    /// task's highest seq.
    fn judge_contiguity(&self, ev: &mut Evidence) {
        let seen = self.seen_by_task();
        for stream in self.streams.iter().filter(|s| !s.foreign) {
            let delivered = stream.seq_set();
            if delivered.is_empty() {
                continue;
            }
            let holes = Session::stream_holes(stream, &seen);
            for &hole in &holes {
                let task = &stream.task_id;
                if skipped_retained(seen.get(task), hole) {
                    ev.fail(
                        Id::Rs07,
                        format!(
                            "the stream of task {task} (after={}) silently skipped {}, which the \
                             server carried on another stream or owed after the cursor: {}",
                            stream.after,
                            shown(hole),
                            stream.describe()
                        ),
                    );
                } else {
                    ev.fail(
                        Id::Ev03,
                        format!(
                            "the stream of task {task} (after={}) lacks {}, and no stream of the \
                             task ever carried it, its history included: {}",
                            stream.after,
                            shown(hole),
                            stream.describe()
                        ),
                    );
                }
            }
            if holes.is_empty() {
                ev.pass(Id::Rs07);
                if delivered.len() >= 2 {
                    ev.pass(Id::Ev03);
                }
            }
        }
    }
}

/// EV-04: a stream delivers strictly increasing seqs.
fn judge_order(stream: &StreamRec, ev: &mut Evidence) {
    let seqs = stream.seqs();
    let backwards = seqs.windows(2).find_map(|pair| match pair {
        [before, after] if after <= before => Some((*before, *after)),
        _ => None,
    });
    match backwards {
        Some((before, after)) => ev.fail(
            Id::Ev04,
            format!(
                "the stream of task {} (after={}) delivered seq {after} after seq {before}",
                stream.task_id, stream.after
            ),
        ),
        None if seqs.len() >= 2 => ev.pass(Id::Ev04),
        None => {}
    }
}

/// DX-01: a modern stream closes with `{"resultType": "complete"}`, a legacy one with an empty
/// result (any object: extra members such as `_meta` are allowed).
pub(crate) fn result_shape_failure(era: Era, result: &Value) -> Option<String> {
    let Some(object) = result.as_object() else {
        return Some(format!(
            "the closing result is not an object: {}",
            abbreviate(result)
        ));
    };
    match era {
        Era::Legacy => None,
        Era::Modern => match object.get("resultType") {
            Some(Value::String(kind)) if kind == "complete" => None,
            Some(other) => Some(format!("the closing result has resultType {other}")),
            None => Some(format!(
                "the closing result has no resultType: {}",
                abbreviate(result)
            )),
        },
    }
}

fn describe_content(content: &(Option<String>, Option<Value>)) -> String {
    let kind = content.0.as_deref().unwrap_or("(no type)");
    let payload = content
        .1
        .as_ref()
        .map(abbreviate)
        .unwrap_or_else(|| "(no payload)".to_owned());
    format!("{kind} {payload}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(seqs: &[u64]) -> BTreeSet<u64> {
        seqs.iter().copied().collect()
    }

    #[test]
    fn holes_inside_after_the_cursor_and_at_the_end_of_a_final_history() {
        assert_eq!(holes(None, &set(&[]), Some(9)), vec![]);
        assert_eq!(holes(None, &set(&[4, 5, 6]), None), vec![]);
        assert_eq!(
            holes(None, &set(&[0, 1, 3, 4, 7]), None),
            vec![(2, 2), (5, 6)]
        );
        assert_eq!(holes(Some(3), &set(&[4, 5]), None), vec![]);
        assert_eq!(holes(Some(0), &set(&[10, 11]), None), vec![(1, 9)]);
        // Seqs at or below the cursor are RS-03a's business, not a hole.
        assert_eq!(holes(Some(3), &set(&[3, 4]), None), vec![]);
        assert_eq!(holes(None, &set(&[0, 1, 2]), Some(4)), vec![(3, 4)]);
        assert_eq!(holes(None, &set(&[0, 1, 2]), Some(2)), vec![]);
        assert_eq!(holes(Some(u64::MAX), &set(&[5]), None), vec![]);
    }

    #[test]
    fn a_hole_another_stream_explains_or_below_the_retained_range_is_a_skip() {
        let seen = set(&[5, 6, 7, 8]);
        assert!(skipped_retained(Some(&seen), (6, 6)));
        assert!(skipped_retained(Some(&seen), (1, 4)));
        assert!(!skipped_retained(Some(&seen), (9, 9)));
        let with_gap = set(&[0, 1, 3]);
        assert!(!skipped_retained(Some(&with_gap), (2, 2)));
        assert!(!skipped_retained(None, (2, 2)));
    }

    #[test]
    fn modern_results_need_result_type_complete() {
        assert_eq!(
            result_shape_failure(Era::Modern, &json!({"resultType": "complete"})),
            None
        );
        assert!(result_shape_failure(Era::Modern, &json!({})).is_some());
        assert!(result_shape_failure(Era::Modern, &json!({"resultType": "task"})).is_some());
        assert!(result_shape_failure(Era::Modern, &json!(null)).is_some());
    }

    #[test]
    fn legacy_results_are_any_object() {
        assert_eq!(result_shape_failure(Era::Legacy, &json!({})), None);
        assert_eq!(
            result_shape_failure(Era::Legacy, &json!({"_meta": {}})),
            None
        );
        assert!(result_shape_failure(Era::Legacy, &json!([])).is_some());
    }
}
