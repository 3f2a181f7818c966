//! Silence where none was asked for. TS-08 and DX-04: a stream cancelled with
//! `notifications/cancelled` gets no further event and no answer, and its task runs on to its
//! normal end. NT-03: a task nobody streams sends no event at all.

use std::time::Instant;

use super::{scenario, watch_live_task, Ctx, Shape};
use crate::catalog::Id;
use crate::config::Era;
use crate::evidence::Evidence;
use crate::session::Session;

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "cancel", &[Id::Ts08, Id::Dx04], ev, |s, ev| {
        cancel_stream(ctx, s, ev)
    });
}

pub(crate) fn run_unwatched(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "unwatched", &[Id::Nt03], ev, |s, ev| {
        unwatched(ctx, s, ev)
    });
}

fn cancel_stream(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let (task, stream) = watch_live_task(ctx, s, Shape::Cancel)?;
    s.cancel(stream).map_err(|b| b.to_string())?;

    match s.wait_terminal(&task, ctx.task_deadline(Shape::Cancel)) {
        Ok(status) => {
            // emit without fail_at completes; an unknown tool may fail, but is never cancelled
            // by its stream's cancellation.
            let ok = if ctx.cfg.profile.is_builtin_emit() {
                status == "completed"
            } else {
                status != "cancelled"
            };
            ev.judge(
                Id::Ts08,
                (!ok).then(|| {
                    format!("after only its stream was cancelled, tasks/get says the task is {status:?}")
                }),
            );
        }
        Err(why) => ev.skip(Id::Ts08, why),
    }
    s.listen(Instant::now() + ctx.cfg.quiet);
    // Anything seen after the cancellation fails DX-04 in `Session::finish`.
    if s.is_http() && s.era() == Era::Modern {
        // The client's cancellation is closing the response: nothing can follow on it.
        ev.skip(
            Id::Dx04,
            "over 2026-07-28 Streamable HTTP a stream is cancelled by closing its response, on \
             which nothing can follow; that the task runs on is TS-08",
        );
    } else if s.after_cancel().is_empty() {
        ev.pass(Id::Dx04);
    }
    Ok(())
}

fn unwatched(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let task = s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Unwatched))?;
    s.wait_terminal(&task, ctx.task_deadline(Shape::Unwatched))?;
    s.listen(Instant::now() + ctx.cfg.quiet);
    // Anything unsolicited fails NT-03 in `Session::finish`.
    if s.unsolicited().is_empty() {
        ev.pass(Id::Nt03);
    }
    Ok(())
}
