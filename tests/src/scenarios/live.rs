//! Joining a running task late. A first stream reads two events and is cancelled; then a second
//! stream opens while the task still runs:
//! - without `after` (RS-05, DX-07): it starts at the earliest retained event, and every event
//!   that was already retained precedes every event that came later;
//! - with `after` = the first seq seen (RS-03a): it starts right above the cursor and goes on.
//!
//! The events seen twice feed EV-08 (same content live and replayed), judged in
//! `Session::finish`.
//!
//! Following a task live to its end, then reading its history twice (without `after`, and
//! with `after = 0`) on the same connection: `Session::finish` holds every one of these streams
//! to be gap-free (RS-07, EV-03), the live one against the histories and the histories against
//! everything the live one carried, up to the last event.

use super::{refused_because_cancel_ignored, scenario, watch_live_task, Ctx, Shape};
use crate::catalog::Id;
use crate::evidence::Evidence;
use crate::session::{After, Reply, Session};

pub(crate) fn run_join(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "join", &[Id::Rs05, Id::Dx07], ev, |s, ev| {
        join(ctx, s, ev)
    });
}

pub(crate) fn run_resume(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "resume", &[Id::Rs03a], ev, |s, ev| resume(ctx, s, ev));
}

/// Creates a live task, reads two events on a first stream, cancels it. Answers the task and
/// the seqs the first stream had delivered before the cancellation, sorted.
fn first_look(ctx: &Ctx<'_>, s: &mut Session) -> Result<(String, Vec<u64>), String> {
    let (task, first) = watch_live_task(ctx, s, Shape::Live)?;
    let seen = s.stream(first).seq_set();
    s.cancel(first).map_err(|b| b.to_string())?;
    Ok((task, seen))
}

pub(crate) fn run_follow(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "follow", &[Id::Rs07, Id::Ev03], ev, |s, _| {
        follow(ctx, s)
    });
}

fn follow(ctx: &Ctx<'_>, s: &mut Session) -> Result<(), String> {
    let task = s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Live))?;
    let live = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    s.collect(live, ctx.task_deadline(Shape::Live))
        .map_err(|b| b.to_string())?;
    match &s.stream(live).reply {
        Some(Reply::Result(_)) => {}
        Some(Reply::Error(error)) => {
            return Err(format!("the stream of the running task answered {error}"));
        }
        None => return Err("the stream of the running task did not end with it".to_owned()),
    }
    s.wait_terminal(&task, s.deadline())?;
    for after in [After::Omitted, After::Seq(0)] {
        let history = s.open_stream(&task, after).map_err(|b| b.to_string())?;
        let deadline = s.deadline();
        s.collect(history, deadline).map_err(|b| b.to_string())?;
    }
    Ok(())
}

fn join(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let (task, seen) = first_look(ctx, s)?;
    let (Some(&earliest), Some(&retained_max)) = (seen.first(), seen.last()) else {
        return Err("the first stream delivered no seq".to_owned());
    };
    let second = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    s.collect(second, ctx.task_deadline(Shape::Live))
        .map_err(|b| b.to_string())?;
    if let Some(Reply::Error(error)) = &s.stream(second).reply {
        let error = error.clone();
        if let Some(why) = refused_because_cancel_ignored(s, ctx, &task, Shape::Live) {
            return Err(why);
        }
        let why = format!("a stream without after on the running task was refused: {error}");
        ev.fail(Id::Rs05, why);
        ev.skip(Id::Dx07, "the joining stream was refused");
        return Ok(());
    }
    let rec = s.stream(second);

    let rs05 = match rec.seq_set().first() {
        None => Some(format!(
            "without after, the stream of a running task with retained events delivered nothing ({})",
            rec.describe()
        )),
        Some(&min) if min != earliest => Some(format!(
            "without after, the stream began at seq {min}, though seq {earliest} is retained (an earlier stream delivered it)"
        )),
        Some(_) => None,
    };
    ev.judge(Id::Rs05, rs05);

    // Seqs up to `retained_max` were retained before the join, so they are replayed; none of
    // them may come after an event above them.
    let order = rec.seqs();
    let last_replayed = order.iter().rposition(|seq| *seq <= retained_max);
    let first_later = order.iter().position(|seq| *seq > retained_max);
    match (last_replayed, first_later) {
        (Some(replayed), Some(later)) if later < replayed => ev.fail(
            Id::Dx07,
            format!(
                "seq {} arrived before seq {}, which was retained when the stream opened: {:?}",
                order.get(later).copied().unwrap_or_default(),
                order.get(replayed).copied().unwrap_or_default(),
                order
            ),
        ),
        (Some(_), Some(_)) => ev.pass(Id::Dx07),
        _ => ev.skip(
            Id::Dx07,
            "the joining stream did not carry both replayed and later events",
        ),
    }
    Ok(())
}

fn resume(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let (task, seen) = first_look(ctx, s)?;
    let (Some(&cursor), Some(&next)) = (seen.first(), seen.get(1)) else {
        return Err("the first stream delivered fewer than two seqs".to_owned());
    };
    let second = s
        .open_stream(&task, After::Seq(cursor))
        .map_err(|b| b.to_string())?;
    s.collect(second, ctx.task_deadline(Shape::Live))
        .map_err(|b| b.to_string())?;
    if let Some(Reply::Error(error)) = &s.stream(second).reply {
        let error = error.clone();
        if let Some(why) = refused_because_cancel_ignored(s, ctx, &task, Shape::Live) {
            return Err(why);
        }
        ev.fail(
            Id::Rs03a,
            format!("after={cursor} on the running task was refused: {error}"),
        );
        return Ok(());
    }
    let rec = s.stream(second);
    let failure = match rec.seq_set().first() {
        None => Some(format!(
            "after={cursor} on the running task delivered nothing ({})",
            rec.describe()
        )),
        Some(&min) if min <= cursor => Some(format!(
            "after={cursor} delivered seq {min}, which is not above the cursor"
        )),
        Some(&min) if min != next => Some(format!(
            "after={cursor} began at seq {min}, though seq {next} is retained (an earlier stream delivered it)"
        )),
        Some(_) => None,
    };
    ev.judge(Id::Rs03a, failure);
    Ok(())
}
