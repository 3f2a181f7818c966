//! `events_gone`, on the server started with a small per-task retention: a task of 32 events
//! ends, its first events are dropped, and the suite resumes from before, just before, and at
//! the edge of what is retained.
//!
//! - RS-03b: `after = 0`, far before the retained range, gets `events_gone`, not events;
//! - RT-04: `after = earliest - 2`, whose next event is the last one dropped, gets it too;
//! - RS-07: no answer skips events silently, and `after = earliest - 1` is gap-free;
//! - EG-01: the error is -32010 with `{reason: "events_gone", taskId, earliestSeq}`, where
//!   `earliestSeq` is the first seq the stream without `after` delivers.
//!
//! The earliest retained seq is learnt from a stream without `after` (RS-05's rule), not from
//! the error, so that a wrong `earliestSeq` fails EG-01 alone.

use serde_json::Value;

use super::{probe, Ctx, Shape};
use crate::catalog::Id;
use crate::evidence::Evidence;
use crate::session::{After, ReceivedError, Reply, Session};

const IDS: &[Id] = &[Id::Rs03b, Id::Rt04, Id::Rs07, Id::Eg01];

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    let Some(command) = &ctx.cfg.small_retention_command else {
        let why =
            "needs --small-retention-cmd (the server started with a small per-task retention)";
        ev.skip_all(IDS, why);
        return;
    };
    ctx.with_twin(command, "small-retention", IDS, ev, dropped_history);
}

fn dropped_history(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let task = s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Many))?;
    s.wait_terminal(&task, ctx.task_deadline(Shape::Many))?;
    let all = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    let deadline = s.deadline();
    s.collect(all, deadline).map_err(|b| b.to_string())?;
    let rec = s.stream(all);
    let retained = rec.seq_set();
    if let Some(Reply::Error(error)) = &rec.reply {
        return Err(format!(
            "tasks/stream without after on the terminal task answered {error}"
        ));
    }
    let Some(&earliest) = retained.first() else {
        // Nothing retained of a terminal task: RS-06's situation.
        let failure = rec.reply.is_none().then(|| {
            format!(
                "nothing retained of a terminal task, yet no result within {} ms",
                s.timeout().as_millis()
            )
        });
        ev.judge(Id::Rs06, failure);
        return Err("no event of the task is retained".to_owned());
    };
    if earliest < 2 {
        return Err(format!(
            "it dropped fewer than two of the task's events (the earliest retained is seq {earliest})"
        ));
    }

    for (id, after) in [(Id::Rs03b, 0), (Id::Rt04, earliest - 2)] {
        let stream = probe(s, &task, After::Seq(after), id, ev)?;
        let rec = s.stream(stream);
        let failure = match &rec.reply {
            Some(Reply::Error(error)) if is_events_gone(error) => {
                let oldest = format!("the oldest retained event is seq {earliest}");
                ev.judge(Id::Eg01, shape_failure(error, &task, earliest, &oldest));
                None
            }
            Some(Reply::Error(error)) => Some(format!(
                "after={after} (seqs {}..={} are dropped) must get events_gone; got {error}",
                after + 1,
                earliest - 1
            )),
            _ => Some(format!(
                "after={after} (seqs {}..={} are dropped) must get events_gone; got {}",
                after + 1,
                earliest - 1,
                rec.describe()
            )),
        };
        ev.judge(id, failure);
        if let Some(&first) = rec.seq_set().first() {
            if first > after + 1 {
                ev.fail(
                    Id::Rs07,
                    format!(
                        "after={after} silently skipped seqs {}..={}, delivering from seq {first}",
                        after + 1,
                        first - 1
                    ),
                );
            }
        }
    }

    let after = earliest - 1;
    let stream = probe(s, &task, After::Seq(after), Id::Rs07, ev)?;
    let rec = s.stream(stream);
    let failure = match &rec.reply {
        Some(Reply::Error(error)) => Some(format!(
            "after={after} (earliestSeq - 1) was refused: {error}"
        )),
        _ if rec.seq_set() != retained => Some(format!(
            "after={after} (earliestSeq - 1) delivered seqs {:?}; retained are {retained:?}",
            rec.seqs()
        )),
        _ => None,
    };
    ev.judge(Id::Rs07, failure);
    Ok(())
}

/// An `events_gone` answer, recognised as the chapter tells clients to recognise it: by
/// `data.reason`, not by the code. The receiver's side (the code -32010 and the whole shape the
/// SEP gives) is EG-01's, judged by [`shape_failure`], so one wrong code fails EG-01 alone.
pub(super) fn is_events_gone(error: &ReceivedError) -> bool {
    error
        .data
        .as_ref()
        .and_then(|data| data.get("reason"))
        .and_then(Value::as_str)
        == Some("events_gone")
}

/// EG-01: code -32010, data `{reason: "events_gone", taskId, earliestSeq}`, earliestSeq equal
/// to `earliest`; `why` says why that is the right value, for the failure message.
pub(super) fn shape_failure(
    error: &ReceivedError,
    task: &str,
    earliest: u64,
    why: &str,
) -> Option<String> {
    if error.code != Some(-32010) {
        return Some(format!("events_gone came as {error}, not -32010"));
    }
    let Some(data) = error.data.as_ref().and_then(Value::as_object) else {
        return Some("events_gone has no data object".to_owned());
    };
    if data.get("reason").and_then(Value::as_str) != Some("events_gone") {
        return Some(format!(
            "events_gone data.reason is {}",
            data.get("reason").unwrap_or(&Value::Null)
        ));
    }
    if data.get("taskId").and_then(Value::as_str) != Some(task) {
        return Some(format!(
            "events_gone data.taskId is {}, not {task:?}",
            data.get("taskId").unwrap_or(&Value::Null)
        ));
    }
    match data.get("earliestSeq").and_then(Value::as_u64) {
        Some(seq) if seq == earliest => None,
        Some(seq) => Some(format!("events_gone data.earliestSeq is {seq}, but {why}")),
        None => Some(format!(
            "events_gone data.earliestSeq is {}, not a seq",
            data.get("earliestSeq").unwrap_or(&Value::Null)
        )),
    }
}
