//! TS-05 and TS-06: while one stream of a running task is active, a second `tasks/stream` for the
//! same task on the same connection is refused with -32602 and never served.

use std::collections::BTreeSet;

use super::{scenario, Ctx, Shape};
use crate::catalog::Id;
use crate::config::Era;
use crate::event::Event;
use crate::evidence::Evidence;
use crate::session::{After, Reply, Session};

const IDS: &[Id] = &[Id::Ts05, Id::Ts06];

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "concurrency", IDS, ev, |s, ev| {
        if s.is_http() && s.era() == Era::Modern {
            // Not a failure to observe: the rule has no subject there.
            return Err(
                "over 2026-07-28 Streamable HTTP every request is a connection of its \
                        own, so there is no second stream on the same connection"
                    .to_owned(),
            );
        }
        second_stream(ctx, s, ev)
    });
}

fn second_stream(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let task = s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Long))?;
    let first = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    s.unordered(first);
    // Once a later request is answered and the first stream is not, the first is active.
    s.tasks_get(&task).map_err(|b| b.to_string())?;
    if let Some(reply) = &s.stream(first).reply {
        return Err(format!(
            "the first stream of the running task did not stay open: {reply}"
        ));
    }

    let second = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    s.unordered(second);
    let deadline = s.deadline();
    // Both streams' events are routed to the first (they name the same task), so a second
    // stream being served shows as a seq delivered twice.
    s.wait_until(deadline, |s| {
        s.stream(second).reply.is_some() || duplicate(&s.stream(first).events).is_some()
    });
    let twice = duplicate(&s.stream(first).events);
    let reply = s.stream(second).reply.clone();
    let waited = s.timeout().as_millis();

    let ts06 = match (&reply, twice) {
        (Some(Reply::Error(error)), _) if error.code == Some(-32602) => None,
        (Some(Reply::Error(error)), _) => Some(format!(
            "a second tasks/stream for task {task} while the first was active got {error}, not -32602"
        )),
        (Some(Reply::Result(_)), _) => Some(format!(
            "a second tasks/stream for task {task} while the first was active was served and closed with a result"
        )),
        (None, Some(seq)) => Some(format!(
            "a second tasks/stream for task {task} while the first was active was served: seq {seq} arrived twice"
        )),
        (None, None) => Some(format!(
            "a second tasks/stream for task {task} while the first was active got no answer within {waited} ms"
        )),
    };
    ev.judge(Id::Ts06, ts06);

    match (&reply, twice) {
        (_, Some(seq)) => ev.fail(
            Id::Ts05,
            format!(
                "two streams of task {task} were active on one connection: seq {seq} arrived twice"
            ),
        ),
        (Some(Reply::Result(_)), None) => ev.fail(
            Id::Ts05,
            format!("a second stream of task {task} was served while the first was active"),
        ),
        (Some(Reply::Error(_)), None) => ev.pass(Id::Ts05),
        (None, None) => ev.skip(
            Id::Ts05,
            "the second request got no answer, so whether it became active is unknown",
        ),
    }
    Ok(())
}

/// The first seq delivered twice, if any.
fn duplicate(events: &[Event]) -> Option<u64> {
    let mut seen = BTreeSet::new();
    events
        .iter()
        .filter_map(|event| event.seq)
        .find(|seq| !seen.insert(*seq))
}
