//! SE-07 (a SHOULD): concurrent streams per connection are limited, and the stream over the
//! limit is refused with -32602. The check opens one stream per running task until one is
//! refused or `--stream-probe` streams are open.

use super::{scenario, Ctx, Shape};
use crate::catalog::Id;
use crate::evidence::Evidence;
use crate::session::{After, Reply, Session};

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) {
    scenario(ctx, "limits", &[Id::Se07], ev, |s, ev| {
        stream_limit(ctx, s, ev)
    });
}

fn stream_limit(ctx: &Ctx<'_>, s: &mut Session, ev: &mut Evidence) -> Result<(), String> {
    let mut open = 0usize;
    for _ in 0..ctx.cfg.stream_probe {
        let task = s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Long))?;
        let stream = s
            .open_stream(&task, After::Omitted)
            .map_err(|b| b.to_string())?;
        // Once a later request is answered, a refusal would have come.
        s.tasks_get(&task).map_err(|b| b.to_string())?;
        match &s.stream(stream).reply {
            None => open += 1,
            Some(Reply::Result(_)) => {}
            Some(Reply::Error(error)) => {
                ev.judge(
                    Id::Se07,
                    (error.code != Some(-32602)).then(|| {
                        format!("with {open} streams open, one more was refused with {error}, not -32602")
                    }),
                );
                return Ok(());
            }
        }
    }
    ev.fail(
        Id::Se07,
        format!(
            "{open} concurrent streams were all served; no limit was reached within --stream-probe {}",
            ctx.cfg.stream_probe
        ),
    );
    Ok(())
}
