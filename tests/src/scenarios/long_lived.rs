//! The long-lived group: what only a server that outlives its connections can pass, so it runs
//! over Streamable HTTP, and over stdio only when told that every start of the command is a new
//! connection to one server (`--long-lived`; a plain stdio server's connection is its process).
//!
//! - **Drop and resume**: a client reads a running task's first events, drops its connection
//!   (no cancellation; a legacy session is ended with `DELETE`), and a new connection finds the
//!   task still running (TS-08: the end of a stream is not the end of its task) and resumes with
//!   `after` = the last seq read: it must carry exactly the next seq and every one after it to
//!   the end (RS-03a, RS-07), and the task must complete.
//! - **Two speeds, a late joiner**: one client follows the task at full speed while a second
//!   stops reading its stream until the first is done; the creator drops its connection; then a
//!   late joiner on a new connection streams without `after`. The slow and the late stream must
//!   each carry every seq from the earliest (RS-05) to the end, the same ones the fast one saw.

use super::{watch_live_task, Ctx, Shape};
use crate::catalog::Id;
use crate::evidence::Evidence;
use crate::session::{is_terminal, After, Reply, Session, StreamId};

/// The IDs the group judges.
pub(crate) const IDS: &[Id] = &[Id::Ts08, Id::Rs03a, Id::Rs05, Id::Rs07];

/// Runs the group, or answers why it cannot run.
pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence) -> Result<(), String> {
    if crate::wire::http_url(&ctx.cfg.command).is_none() && !ctx.cfg.long_lived {
        return Err(
            "the server is a stdio process, whose one connection ends with it: no task \
                    can outlive its connection there (run the suite with --url, or with \
                    --long-lived for a command that connects to a server that outlives it)"
                .to_owned(),
        );
    }
    if let Err(why) = drop_and_resume(ctx, ev) {
        ev.skip_all(IDS, &format!("long-lived group (drop and resume): {why}"));
    }
    if let Err(why) = speeds_and_late_joiner(ctx, ev) {
        ev.skip_all(
            IDS,
            &format!("long-lived group (two speeds, late joiner): {why}"),
        );
    }
    Ok(())
}

/// Waits for a stream to end with its task; answers its seqs in arrival order.
fn to_the_end(
    ctx: &Ctx<'_>,
    s: &mut Session,
    stream: StreamId,
    what: &str,
) -> Result<Vec<u64>, String> {
    s.collect(stream, ctx.task_deadline(Shape::Outlive))
        .map_err(|b| format!("{what}: {b}"))?;
    match &s.stream(stream).reply {
        Some(Reply::Result(_)) => Ok(s.stream(stream).seqs()),
        Some(Reply::Error(error)) => Err(format!("{what} answered {error}")),
        None => Err(format!("{what} did not end with its task")),
    }
}

fn drop_and_resume(ctx: &Ctx<'_>, ev: &mut Evidence) -> Result<(), String> {
    let mut first = ctx.connect("long-lived dropped")?;
    let (task, stream) = watch_live_task(ctx, &mut first, Shape::Outlive)?;
    let read = first.stream(stream).seqs();
    let Some(&cursor) = read.iter().max() else {
        return Err("the first stream read no event".to_owned());
    };
    // The connection goes away mid-task: no cancellation, the socket is closed.
    drop(first);

    let mut second = ctx.connect("long-lived resumed")?;
    let status = second.task_status(&task)?;
    let stream = second
        .open_stream(&task, After::Seq(cursor))
        .map_err(|b| b.to_string())?;
    let resumed = to_the_end(ctx, &mut second, stream, "the resumed stream");
    let end = second.wait_terminal(&task, second.deadline());
    let verdict = judge_resume(
        cursor,
        &status,
        resumed.as_deref().map_err(String::as_str),
        end.as_deref().map_err(String::as_str),
    );
    ev.judge(Id::Ts08, verdict.task);
    if let Some(seqs) = verdict.stream {
        ev.judge(Id::Rs03a, seqs.clone());
        ev.judge(Id::Rs07, seqs);
    }
    second.finish(ev);
    Ok(())
}

/// What a resume on a new connection showed.
#[derive(Debug, PartialEq)]
struct ResumeVerdict {
    /// TS-08: the task ran on after its connection closed.
    task: Option<String>,
    /// RS-03a / RS-07: the resumed stream carried `cursor + 1, cursor + 2, …`; `None` when it
    /// could not be read (already judged under TS-08).
    stream: Option<Option<String>>,
}

/// Judges a resume with `after = cursor` on a new connection: the task's status when the new
/// connection came, the seqs of the resumed stream to its end, and the task's final status.
fn judge_resume(
    cursor: u64,
    status: &str,
    resumed: Result<&[u64], &str>,
    end: Result<&str, &str>,
) -> ResumeVerdict {
    let died = |what: &str| {
        Some(format!(
            "the task ended when the connection that created it and read it closed: {what}"
        ))
    };
    let task = if is_terminal(status) && status != "completed" {
        died(&format!(
            "tasks/get on a new connection answered {status:?}"
        ))
    } else {
        match end {
            Ok("completed") => None,
            Ok(other) => died(&format!("it ended {other:?}")),
            Err(why) => Some(format!("the task's end could not be seen: {why}")),
        }
    };
    let stream = match resumed {
        Err(_) if task.is_some() => None,
        Err(why) => Some(Some(format!(
            "the stream resumed with after={cursor} on a new connection: {why}"
        ))),
        Ok(seqs) => {
            let want: Vec<u64> = (cursor + 1..).take(seqs.len()).collect();
            Some(if seqs.is_empty() && !is_terminal(status) {
                Some(format!(
                    "the stream resumed with after={cursor} on a new connection while the task \
                     ran carried no event"
                ))
            } else if seqs != want.as_slice() {
                Some(format!(
                    "the stream resumed with after={cursor} on a new connection carried {} \
                     instead of {cursor}+1, {cursor}+2, ...",
                    shown(seqs)
                ))
            } else {
                None
            })
        }
    };
    ResumeVerdict { task, stream }
}

fn speeds_and_late_joiner(ctx: &Ctx<'_>, ev: &mut Evidence) -> Result<(), String> {
    let mut creator = ctx.connect("long-lived creator")?;
    let task = creator.create_task(&ctx.cfg.profile, &ctx.args(Shape::Outlive))?;
    let mut slow = ctx.connect("long-lived slow")?;
    slow.pause_reading(true);
    let slow_stream = slow
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    let mut fast = ctx.connect("long-lived fast")?;
    let fast_stream = fast
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    let deadline = fast.deadline();
    fast.wait_until(deadline, |s| s.stream(fast_stream).seq_set().len() >= 3);
    // The creator goes away while the task runs; a late joiner comes.
    drop(creator);
    let mut late = ctx.connect("long-lived late")?;
    let late_stream = late
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    let fast_seqs = to_the_end(ctx, &mut fast, fast_stream, "the fast stream");
    let late_seqs = to_the_end(ctx, &mut late, late_stream, "the late joiner's stream");
    slow.pause_reading(false);
    let slow_seqs = to_the_end(ctx, &mut slow, slow_stream, "the slow stream");
    let status = fast.wait_terminal(&task, fast.deadline());
    ev.judge(
        Id::Ts08,
        match status.as_deref() {
            Ok("completed") => None,
            Ok(other) => Some(format!(
                "the task ended {other:?} after the connection that created it closed"
            )),
            Err(why) => Some(why.to_owned()),
        },
    );
    let fast_seqs = fast_seqs?;
    for (who, seqs, id) in [
        ("the slow stream", slow_seqs, Id::Rs07),
        ("the late joiner's stream", late_seqs, Id::Rs05),
    ] {
        let failure = match seqs {
            Err(why) if status.as_deref() == Ok("completed") => Some(why),
            Err(_) => None,
            Ok(seqs) if seqs != fast_seqs => Some(format!(
                "{who} carried {}, the stream read at full speed {}",
                shown(&seqs),
                shown(&fast_seqs)
            )),
            Ok(_) => None,
        };
        ev.judge(id, failure);
    }
    for s in [fast, slow, late] {
        s.finish(ev);
    }
    Ok(())
}

/// Seqs in a message: a range when contiguous.
fn shown(seqs: &[u64]) -> String {
    match (seqs.first(), seqs.last()) {
        (Some(a), Some(b)) if seqs.windows(2).all(|w| w[0] + 1 == w[1]) => {
            format!("seqs {a}..={b}")
        }
        (None, _) | (_, None) => "no event".to_owned(),
        _ => format!("seqs {seqs:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_that_continues_and_completes_passes() {
        let v = judge_resume(3, "working", Ok(&[4, 5, 6]), Ok("completed"));
        assert_eq!(
            v,
            ResumeVerdict {
                task: None,
                stream: Some(None)
            }
        );
    }

    #[test]
    fn a_task_killed_with_its_connection_fails_ts08() {
        let v = judge_resume(3, "failed", Ok(&[]), Ok("failed"));
        assert!(v
            .task
            .is_some_and(|t| t.contains("ended when the connection")));
        let v = judge_resume(3, "working", Err("answered -32602"), Ok("cancelled"));
        assert!(v.task.is_some());
        assert_eq!(v.stream, None);
    }

    #[test]
    fn a_gap_or_a_duplicate_on_resume_fails_the_stream() {
        for seqs in [&[3u64, 4, 5][..], &[5, 6], &[4, 6]] {
            let v = judge_resume(3, "working", Ok(seqs), Ok("completed"));
            assert!(matches!(v.stream, Some(Some(_))), "{seqs:?}");
        }
    }
}
