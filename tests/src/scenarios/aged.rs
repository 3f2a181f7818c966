//! A terminal task with nothing retained, on the server started with a short maximum event age
//! (`--aged-retention-cmd`): two short tasks end, the suite waits, polling, until their events
//! have aged out, and checks what the SEP requires of a task whose whole history is gone.
//!
//! - RS-06: a stream without `after` gets its result at once. The suite polls such streams on
//!   the first task until one closes with a result and no event; then a second stream without
//!   `after`, opened right after that result, must be admitted and answered the same way (no
//!   event, a result within the answer bound). A refusal means the first stream was left open;
//!   events mean the server sent events it no longer retains.
//! - On the second task, whose last seq `last` a stream learnt before its events aged out, the
//!   cursor rules at the edge of an empty retained range (whose earliest seq is `last + 1`):
//!   - RT-04: `after = last - 1`, whose next event is the last one dropped, gets `events_gone`
//!     (polled until seq `last` is no longer delivered);
//!   - RS-03b: `after = 0`, far before, gets `events_gone` too;
//!   - RS-07: no answer to those two is a result that skips the dropped events silently;
//!   - EG-01: the error's `earliestSeq` is `last + 1`, the only value from which the SEP's
//!     recovery (`after = earliestSeq - 1`) resumes; a lower one names a dropped event as
//!     retained (the SEP leaves the value open when nothing is retained: A-03);
//!   - RS-04: `after = last` gets the result at once with no event: nothing above the cursor
//!     was ever assigned, so nothing is missing, even with nothing retained;
//!   - RS-02: `after = last + 1` still gets -32602: the last seq is known without any event.
//!
//! Two tasks, so that a stream of the first one wrongly left open cannot disturb the checks on
//! the second. The suite waits at most `--aged-wait-ms`; a server that still retains the events
//! then leaves these checks skipped, since a short maximum age is its configuration to give.

use std::time::{Duration, Instant};

use super::gone::{is_events_gone, shape_failure};
use super::{is_error, probe, Ctx, Shape};
use crate::catalog::Id;
use crate::evidence::Evidence;
use crate::session::{After, Reply, Session, StreamRec};

/// The IDs this scenario speaks to.
const IDS: &[Id] = &[
    Id::Rs06,
    Id::Rt04,
    Id::Rs03b,
    Id::Rs07,
    Id::Eg01,
    Id::Rs04,
    Id::Rs02,
];

/// The IDs judged on the second task, by its cursors.
const CURSOR_IDS: &[Id] = &[Id::Rt04, Id::Rs03b, Id::Rs07, Id::Eg01, Id::Rs04, Id::Rs02];

/// Pause between two polls, spent listening to the connection.
const POLL_EVERY: Duration = Duration::from_millis(200);

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    let Some(command) = &ctx.cfg.aged_retention_command else {
        ev.skip(
            Id::Rs06,
            "needs a terminal task with nothing retained: give --aged-retention-cmd (the server \
             started with a short maximum event age)",
        );
        return;
    };
    ctx.with_twin(command, "aged-retention", IDS, ev, nothing_retained);
}

fn nothing_retained(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let shape = Shape::Short;
    let polled = s.create_task(&ctx.cfg.profile, &ctx.args(shape))?;
    let cursored = s.create_task(&ctx.cfg.profile, &ctx.args(shape))?;
    s.wait_terminal(&polled, ctx.task_deadline(shape))?;
    s.wait_terminal(&cursored, ctx.task_deadline(shape))?;
    // Learnt at once, before the events age out; the log of a terminal task is frozen, so the
    // highest seq delivered is the last one assigned.
    let last = learn_last_seq(s, &cursored, ev)?;
    let deadline = Instant::now() + ctx.cfg.aged_wait;

    if poll_until_empty(ctx, s, &polled, deadline, ev)? {
        second_stream_admitted(ctx, s, &polled, ev)?;
    }
    match last {
        Some(last) if last >= 1 => cursors(ctx, s, &cursored, last, deadline, ev),
        Some(_) => {
            ev.skip_all(
                CURSOR_IDS,
                "the task made one event; the cursor checks need two",
            );
            Ok(())
        }
        None => {
            let why =
                "no event of the task was seen before they aged out, so its last seq is unknown";
            ev.skip_all(CURSOR_IDS, why);
            Ok(())
        }
    }
}

/// The last seq of a terminal task, from a stream without `after`; `None` if it delivered none.
fn learn_last_seq(s: &mut Session, task: &str, ev: &mut Evidence) -> Result<Option<u64>, String> {
    let stream = probe(s, task, After::Omitted, Id::Rs06, ev)?;
    let rec = s.stream(stream);
    if rec.reply.is_none() && !rec.events.is_empty() {
        ev.fail(Id::Ts03, unclosed(s, rec));
    }
    if let Some(Reply::Error(error)) = &rec.reply {
        return Err(format!(
            "tasks/stream without after on a terminal task answered {error}"
        ));
    }
    Ok(rec.seq_set().last().copied())
}

/// TS-03's failure for a stream of a terminal task that delivered events and never closed.
fn unclosed(s: &Session, rec: &StreamRec) -> String {
    format!(
        "the stream of a terminal task delivered seqs {:?} but no result within {} ms",
        rec.seqs(),
        s.timeout().as_millis()
    )
}

/// Streams `task` without `after` until a stream closes with a result and no event (true).
/// Answers false when RS-06 was failed (an error, or no result for a stream that delivered
/// nothing) or skipped (events still retained at `deadline`).
fn poll_until_empty(
    ctx: &Ctx<'_>,
    s: &mut Session,
    task: &str,
    deadline: Instant,
    ev: &mut Evidence,
) -> Result<bool, String> {
    let waited = s.timeout().as_millis();
    loop {
        let stream = probe(s, task, After::Omitted, Id::Rs06, ev)?;
        let rec = s.stream(stream);
        let seen = rec.seqs();
        match (&rec.reply, seen.is_empty()) {
            (Some(Reply::Result(_)), true) => return Ok(true),
            // Still retained: poll again.
            (Some(Reply::Result(_)), false) => {}
            (Some(Reply::Error(error)), _) => {
                ev.fail(
                    Id::Rs06,
                    format!("tasks/stream without after on a terminal task answered {error}"),
                );
                return Ok(false);
            }
            (None, true) => {
                ev.fail(
                    Id::Rs06,
                    format!(
                        "nothing retained of a terminal task, yet no result within {waited} ms"
                    ),
                );
                return Ok(false);
            }
            (None, false) => ev.fail(Id::Ts03, unclosed(s, rec)),
        }
        let now = Instant::now();
        if now >= deadline {
            ev.skip(
                Id::Rs06,
                format!(
                    "the aged-retention server still retained seqs {seen:?} of a terminal task \
                     {} ms after it ended (give it a maximum event age of a few seconds at most)",
                    ctx.cfg.aged_wait.as_millis()
                ),
            );
            return Ok(false);
        }
        s.listen((now + POLL_EVERY).min(deadline));
    }
}

/// RS-06, the rest of "at once": a stream without `after` has just closed with a result and no
/// event; a second one right after must be admitted and closed the same way, and nothing may
/// follow it.
fn second_stream_admitted(
    ctx: &Ctx<'_>,
    s: &mut Session,
    task: &str,
    ev: &mut Evidence,
) -> Result<(), String> {
    let stream = probe(s, task, After::Omitted, Id::Rs06, ev)?;
    let rec = s.stream(stream);
    let situation = "nothing retained of a terminal task: a stream without after closed with \
                     its result and no event";
    let failure = match (&rec.reply, rec.events.is_empty()) {
        (Some(Reply::Result(_)), true) => None,
        (Some(Reply::Error(error)), _) => Some(format!(
            "{situation}, but a second one right after was refused ({error}): the first was \
             left open"
        )),
        (Some(Reply::Result(_)), false) => Some(format!(
            "{situation}, but a second one right after delivered seqs {:?}, which were no \
             longer retained",
            rec.seqs()
        )),
        (None, _) => Some(format!(
            "{situation}, but a second one right after: {} and no result within {} ms",
            if rec.events.is_empty() {
                "no event".to_owned()
            } else {
                format!("seqs {:?}", rec.seqs())
            },
            s.timeout().as_millis()
        )),
    };
    ev.judge(Id::Rs06, failure);
    // Anything sent for the task from now on has no stream to go to (NT-03 then judges it).
    s.listen(Instant::now() + ctx.cfg.quiet);
    Ok(())
}

/// RT-04, RS-03b, RS-07, EG-01, RS-04 and RS-02 on a terminal task whose last seq is `last`,
/// once nothing of it is retained.
fn cursors(
    ctx: &Ctx<'_>,
    s: &mut Session,
    task: &str,
    last: u64,
    deadline: Instant,
    ev: &mut Evidence,
) -> Result<(), String> {
    let next = last + 1;
    let earliest_why = format!(
        "nothing is retained of a task whose last seq is {last}: only {next}, the next seq, lets \
         the recovery after = earliestSeq - 1 resume, and a lower one names a dropped event as \
         retained"
    );
    let before = last - 1;
    // Polled: until seq `last` has aged out, the right answer is that event and a result.
    loop {
        let stream = probe(s, task, After::Seq(before), Id::Rt04, ev)?;
        let rec = s.stream(stream);
        match &rec.reply {
            Some(Reply::Error(error)) if is_events_gone(error) => {
                ev.judge(Id::Eg01, shape_failure(error, task, next, &earliest_why));
                // The stream cannot be gap-free, and events_gone says so (RS-07).
                ev.pass(Id::Rt04);
                ev.pass(Id::Rs07);
                break;
            }
            Some(Reply::Result(_)) if rec.events.is_empty() => {
                let seen = format!(
                    "after={before} on a terminal task whose last seq is {last}: a result with no \
                     event, which skips seq {last} silently (it must be delivered, or events_gone \
                     answered)"
                );
                ev.fail(Id::Rt04, seen.clone());
                ev.fail(Id::Rs07, seen);
                break;
            }
            Some(Reply::Result(_)) => {}
            Some(Reply::Error(error)) => {
                ev.fail(
                    Id::Rt04,
                    format!(
                        "after={before} on a terminal task whose last seq is {last} must deliver \
                         seq {last} or get events_gone; got {error}"
                    ),
                );
                return Ok(());
            }
            None => {
                ev.fail(
                    Id::Rt04,
                    format!(
                        "after={before} on a terminal task whose last seq is {last}: {}",
                        rec.describe()
                    ),
                );
                return Ok(());
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let why = format!(
                "the aged-retention server still retained seq {last} of a terminal task {} ms \
                 after it ended",
                ctx.cfg.aged_wait.as_millis()
            );
            ev.skip_all(CURSOR_IDS, &why);
            return Ok(());
        }
        s.listen((now + POLL_EVERY).min(deadline));
    }

    // Seq `last` is no longer delivered, and events age out oldest first: nothing is retained.
    if before > 0 {
        let stream = probe(s, task, After::Seq(0), Id::Rs03b, ev)?;
        let rec = s.stream(stream);
        let failure = match &rec.reply {
            Some(Reply::Error(error)) if is_events_gone(error) => {
                ev.judge(Id::Eg01, shape_failure(error, task, next, &earliest_why));
                ev.pass(Id::Rs07);
                None
            }
            _ => Some(format!(
                "after=0 on a terminal task with nothing retained (seqs 1..={last} are dropped) \
                 must get events_gone; got {}",
                rec.describe()
            )),
        };
        ev.judge(Id::Rs03b, failure);
        if let Some(Reply::Result(_)) = &rec.reply {
            let first = rec.seq_set().first().copied().unwrap_or(next);
            if first > 1 {
                ev.fail(
                    Id::Rs07,
                    format!(
                        "after=0 on a terminal task whose seqs 1..={last} are dropped: a result \
                         that silently skipped seqs 1..={}",
                        first - 1
                    ),
                );
            }
        }
    }

    let stream = probe(s, task, After::Seq(last), Id::Rs04, ev)?;
    let rec = s.stream(stream);
    let failure = match (&rec.reply, rec.events.is_empty()) {
        (Some(Reply::Result(_)), true) => None,
        _ => Some(format!(
            "after={last}, the last seq of a terminal task with nothing retained, must get the \
             result at once with no event (nothing above it was ever assigned); got {}",
            rec.describe()
        )),
    };
    ev.judge(Id::Rs04, failure);

    let beyond = next.to_string();
    let stream = probe(s, task, After::Literal(&beyond), Id::Rs02, ev)?;
    let rec = s.stream(stream);
    let refused = is_error(rec.reply.as_ref(), -32602) && rec.events.is_empty();
    ev.judge(
        Id::Rs02,
        (!refused).then(|| {
            format!(
                "after={next}, beyond the last seq {last} of a terminal task with nothing \
                 retained, must get -32602; got {}",
                rec.describe()
            )
        }),
    );
    Ok(())
}
