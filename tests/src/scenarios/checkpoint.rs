//! taskstream's checkpoints, on the server started so that it retains from each task's latest
//! checkpoint (`--checkpoint-cmd`; taskstream: `serve --retain-from-checkpoint`). Judged only
//! when that server advertises `capabilities.experimental["dev.taskstream/checkpoints"]`; the
//! rules are taskstream's (CP-* of docs/specification/requirements.md), not SEP-2694's, and
//! they add nothing to the wire: a checkpoint is an ordinary event, and a cursor before it is
//! answered exactly as the SEP answers a cursor before the retained range.
//!
//! One terminal task, `emit {count: 10, checkpoint_every: 4}` (two checkpoints), then:
//! - CP-03: a stream without `after` starts with a `dev.taskstream.checkpoint`, and no later
//!   checkpoint follows it (it is the latest one);
//! - CP-01: every checkpoint delivered has `coversThrough` = its seq − 1 and an object `state`;
//! - CP-04: with the checkpoint at seq `c`, `after = 0` and `after = c − 2` (whose next events
//!   are before the checkpoint) get `events_gone`, never a result that skips to the checkpoint
//!   (RS-07 too), `after = c − 1` delivers exactly what the stream without `after` did, and
//!   `tasks/get`'s `_meta["dev.taskstream/events"].earliestSeq`, where the server gives it, is
//!   `c`. The error's shape and `earliestSeq` (= `c`, the oldest retained) are EG-01's, judged
//!   as everywhere else: `events_gone` is unchanged for clients that ask for history.
//!
//! When nothing of the task is retained (other retention limits apply on top), the checks are
//! skipped with the reason, never passed.

use serde_json::{json, Value};

use super::gone::{is_events_gone, shape_failure};
use super::{probe, Ctx, Shape};
use crate::catalog::Id;
use crate::event::Event;
use crate::evidence::Evidence;
use crate::session::{After, ConnectError, Reply, Session};

/// The IDs this scenario speaks to.
pub(crate) const IDS: &[Id] = &[Id::Cp01, Id::Cp03, Id::Cp04];

/// The capability key, under `capabilities.experimental`.
pub(crate) const CAPABILITY: &str = "dev.taskstream/checkpoints";

/// The checkpoint event type.
const CHECKPOINT: &str = "dev.taskstream.checkpoint";

/// Where taskstream's `tasks/get` says which events are retained.
const EVENTS_META: &str = "dev.taskstream/events";

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    let Some(command) = &ctx.cfg.checkpoint_command else {
        ev.skip_all(
            IDS,
            "needs a server that retains from checkpoints: give --checkpoint-cmd or \
             --checkpoint-url (taskstream: serve --retain-from-checkpoint)",
        );
        return;
    };
    if !ctx.cfg.profile.is_builtin_emit() {
        ev.skip_all(
            IDS,
            "the checkpoint checks make their task with emit {count, checkpoint_every}; a \
             --tool or --args profile cannot",
        );
        return;
    }
    let (mut s, handshake) = match ctx.connect_to(command, "checkpoint") {
        Ok(connected) => connected,
        Err(ConnectError::NotSpoken(why) | ConnectError::Failed(why)) => {
            ev.skip_all(IDS, &format!("the checkpoint server: {why}"));
            return;
        }
    };
    let advertised = handshake
        .get("capabilities")
        .and_then(|c| c.get("experimental"))
        .and_then(|e| e.get(CAPABILITY));
    if !advertised.is_some_and(Value::is_object) {
        ev.skip_all(
            IDS,
            &format!(
                "the checkpoint server does not advertise \
                 capabilities.experimental[\"{CAPABILITY}\"] in this era"
            ),
        );
    } else if let Err(why) = retained_from_checkpoint(ctx, &mut s, ev) {
        ev.skip_all(IDS, &format!("the checkpoint server: {why}"));
    }
    s.finish(ev);
}

/// Whether `event` is a checkpoint.
fn is_checkpoint(event: &Event) -> bool {
    event.kind.as_deref() == Some(CHECKPOINT)
}

/// CP-01 on every checkpoint among `events`.
fn judge_shapes(events: &[Event], ev: &mut Evidence) {
    for event in events.iter().filter(|e| is_checkpoint(e)) {
        let Some(seq) = event.seq else {
            continue;
        };
        let payload = event.payload.as_ref();
        let covers = payload.and_then(|p| p.get("coversThrough"));
        let state = payload.and_then(|p| p.get("state"));
        let failure = if covers.and_then(Value::as_u64) != seq.checked_sub(1) {
            Some(format!(
                "the checkpoint at seq {seq} has coversThrough {}, not {} (the seq just before it)",
                covers.unwrap_or(&Value::Null),
                seq.saturating_sub(1)
            ))
        } else if !state.is_some_and(Value::is_object) {
            Some(format!(
                "the checkpoint at seq {seq} has state {}, not an object",
                state.unwrap_or(&Value::Null)
            ))
        } else {
            None
        };
        ev.judge(Id::Cp01, failure);
    }
}

fn retained_from_checkpoint(
    ctx: &Ctx<'_>,
    s: &mut Session,
    ev: &mut Evidence,
) -> Result<(), String> {
    let shape = Shape::Short;
    let task = s.create_task(
        &ctx.cfg.profile,
        &json!({"count": 10, "checkpoint_every": 4}),
    )?;
    s.wait_terminal(&task, ctx.task_deadline(shape))?;

    let all = probe(s, &task, After::Omitted, Id::Cp03, ev)?;
    let rec = s.stream(all);
    match &rec.reply {
        Some(Reply::Result(_)) => {}
        Some(Reply::Error(error)) => {
            return Err(format!(
                "tasks/stream without after on the terminal task answered {error}"
            ))
        }
        None => return Err(format!("tasks/stream without after: {}", rec.describe())),
    }
    let retained = rec.seqs();
    judge_shapes(&rec.events, ev);
    let Some(first) = rec.events.first() else {
        return Err(
            "nothing of the task is retained (another retention limit dropped it all)".to_owned(),
        );
    };
    if !is_checkpoint(first) {
        let checkpoints: Vec<u64> = rec
            .events
            .iter()
            .filter(|e| is_checkpoint(e))
            .filter_map(|e| e.seq)
            .collect();
        ev.fail(
            Id::Cp03,
            format!(
                "emit {{count: 10, checkpoint_every: 4}} ended; a stream without after started \
                 with {} instead of a checkpoint (checkpoints delivered at seqs {checkpoints:?})",
                first.describe()
            ),
        );
        return Err("the earliest retained event is no checkpoint (see CP-03)".to_owned());
    }
    let Some(c) = first.seq else {
        return Err("the first checkpoint has no integer seq (see EV-03)".to_owned());
    };
    let later: Vec<u64> = rec.events[1..]
        .iter()
        .filter(|e| is_checkpoint(e))
        .filter_map(|e| e.seq)
        .collect();
    ev.judge(
        Id::Cp03,
        (!later.is_empty()).then(|| {
            format!(
                "a stream without after started with the checkpoint at seq {c}, but later \
                 checkpoints (seqs {later:?}) were retained with it: it is not the latest"
            )
        }),
    );
    if c < 2 {
        return Err(format!(
            "the latest checkpoint is seq {c}: fewer than two events before it to resume from"
        ));
    }

    earliest_by_tasks_get(s, &task, c, ev)?;

    let earliest_why = format!("the oldest retained event is the checkpoint at seq {c}");
    let mut cursors = vec![0, c - 2];
    cursors.dedup();
    for after in cursors {
        let stream = probe(s, &task, After::Seq(after), Id::Cp04, ev)?;
        let rec = s.stream(stream);
        judge_shapes(&rec.events, ev);
        let failure = match &rec.reply {
            Some(Reply::Error(error)) if is_events_gone(error) => {
                ev.judge(Id::Eg01, shape_failure(error, &task, c, &earliest_why));
                None
            }
            Some(Reply::Result(_)) => {
                let delivered = rec.seqs();
                let silent = delivered.first().is_some_and(|&f| f > after + 1);
                let seen = format!(
                    "after={after}, before the latest checkpoint (seq {c}): a result with seqs \
                     {delivered:?} instead of events_gone"
                );
                if silent {
                    ev.fail(Id::Rs07, format!("{seen}, a silent gap"));
                }
                Some(seen)
            }
            Some(Reply::Error(error)) => Some(format!(
                "after={after}, before the latest checkpoint (seq {c}), must get events_gone; \
                 got {error}"
            )),
            None => Some(format!(
                "after={after}, before the latest checkpoint (seq {c}), must get events_gone; \
                 got {}",
                rec.describe()
            )),
        };
        ev.judge(Id::Cp04, failure);
    }

    let after = c - 1;
    let stream = probe(s, &task, After::Seq(after), Id::Cp04, ev)?;
    let rec = s.stream(stream);
    let failure = match &rec.reply {
        Some(Reply::Result(_)) if rec.seqs() == retained => None,
        _ => Some(format!(
            "after={after} (the checkpoint's seq - 1, the recovery from events_gone) must deliver \
             the retained seqs {retained:?}; got {}",
            rec.describe()
        )),
    };
    ev.judge(Id::Cp04, failure);
    Ok(())
}

/// CP-04's `tasks/get` half: its `_meta["dev.taskstream/events"].earliestSeq` is the
/// checkpoint's seq `c`. Nothing is judged where the server does not give that field (plain
/// SEP-2694 has no earliest seq in `tasks/get`).
fn earliest_by_tasks_get(
    s: &mut Session,
    task: &str,
    c: u64,
    ev: &mut Evidence,
) -> Result<(), String> {
    let result = match s.tasks_get(task) {
        Err(broken) => return Err(broken.to_string()),
        Ok(Reply::Error(error)) => return Err(format!("tasks/get {task} answered {error}")),
        Ok(Reply::Result(result)) => result,
    };
    let task_object = result.get("task").unwrap_or(&result);
    let Some(events) = task_object.get("_meta").and_then(|m| m.get(EVENTS_META)) else {
        return Ok(());
    };
    let earliest = events.get("earliestSeq");
    ev.judge(
        Id::Cp04,
        (earliest.and_then(Value::as_u64) != Some(c)).then(|| {
            format!(
                "tasks/get's _meta[\"{EVENTS_META}\"].earliestSeq is {}, but the earliest \
                 retained event is the checkpoint at seq {c}",
                earliest.unwrap_or(&Value::Null)
            )
        }),
    );
    Ok(())
}
