//! What a session saw, turned into evidence once its scenario is over.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{abbreviate, Reply, Session, StreamRec};
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
