//! The checks, grouped by the situation they need: each scenario starts a fresh server process,
//! brings one or more tasks into that situation, observes, and records evidence for the IDs it
//! owns. A fresh process per scenario keeps one broken rule from leaking into another's check.
//!
//! | scenario | situation | IDs |
//! | --- | --- | --- |
//! | [`terminal`] | a task that has ended | TS-03, EV-02, EV-03, RS-01..RS-04, RS-06, RT-02, RL-01, SE-01, SE-03, DX-02, DX-03, DX-05 |
//! | [`concurrency`] | two streams on one running task | TS-05, TS-06 |
//! | [`cancel`] | a stream cancelled mid-task; a task nobody streams | TS-08, DX-04, NT-03 |
//! | [`live`] | a late join and a resume while the task runs; a task followed to its end, then its history | RS-05, DX-07, RS-03a, RS-07, EV-03 |
//! | [`limits`] | many concurrent streams | SE-07 |
//! | [`gone`] | a task whose first events were dropped (small-retention server) | RS-03b, RT-04, RS-07, EG-01 |
//! | [`aged`] | terminal tasks with nothing retained (aged-retention server) | RS-06, RS-04, RS-02, RS-03b, RT-04, RS-07, EG-01 |
//! | [`checkpoint`] | a terminal task with two checkpoints (checkpoint server, if it advertises them) | CP-01, CP-03, CP-04, EG-01, RS-07 |
//! | [`long_lived`] | a task that outlives its connections (HTTP only): drop and resume, two speeds, a late joiner | TS-08, RS-03a, RS-05, RS-07 |
//!
//! The per-event rules (EV-01, EV-04, EV-05..EV-07, EV-08, NT-01, NT-02), contiguity (EV-03,
//! RS-07: every stream, live or replayed, carries exactly `after + 1, after + 2, …`) and DX-01
//! are judged on every stream of every scenario, by `Session::finish`.

mod aged;
mod cancel;
mod checkpoint;
mod concurrency;
mod gone;
mod limits;
mod live;
mod long_lived;
mod terminal;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::catalog::Id;
use crate::config::{Config, Era};
use crate::evidence::Evidence;
use crate::report::EraReport;
use crate::session::{After, Broken, ConnectError, Reply, Session, StreamId};

/// The tasks the scenarios ask for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    /// A few events at once: ends before anyone streams it.
    Short,
    /// Events every interval, long enough to join it late.
    Live,
    /// Like `Live`, a little shorter: cancelled mid-way.
    Cancel,
    /// Three slow events that nobody streams.
    Unwatched,
    /// Runs far longer than any check: it only needs to be running.
    Long,
    /// Many events at once: more than a small-retention server keeps.
    Many,
    /// Events every interval for a few seconds: outlives a dropped connection.
    Outlive,
}

impl Shape {
    /// `(count, interval_ms)` of the built-in `emit` arguments.
    fn emit(self, interval_ms: u64) -> (u64, u64) {
        match self {
            Shape::Short => (3, 0),
            Shape::Live => (8, interval_ms),
            Shape::Cancel => (6, interval_ms),
            Shape::Unwatched => (3, interval_ms),
            Shape::Long => (1000, 1000),
            Shape::Many => (30, 0),
            Shape::Outlive => (12, interval_ms),
        }
    }
}

/// What every scenario of one era shares.
pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) era: Era,
}

impl Ctx<'_> {
    /// The tool arguments for a task of `shape`.
    pub(crate) fn args(&self, shape: Shape) -> Value {
        if let Some(args) = &self.cfg.profile.args {
            return args.clone();
        }
        match shape.emit(self.cfg.interval_ms) {
            (count, 0) => json!({"count": count}),
            (count, interval_ms) => json!({"count": count, "interval_ms": interval_ms}),
        }
    }

    /// When a task of `shape` started now must have ended, at the latest.
    pub(crate) fn task_deadline(&self, shape: Shape) -> Instant {
        let runs_for = if self.cfg.profile.is_builtin_emit() {
            let (count, interval_ms) = shape.emit(self.cfg.interval_ms);
            Duration::from_millis(count.saturating_mul(interval_ms))
        } else {
            // An unknown tool: allow it a few timeouts.
            self.cfg.timeout.saturating_mul(4)
        };
        Instant::now() + runs_for + self.cfg.timeout
    }

    /// A fresh server process from `command` with a session in this era, and the handshake's
    /// result.
    pub(crate) fn connect_to(
        &self,
        command: &[String],
        label: &str,
    ) -> Result<(Session, Value), ConnectError> {
        let label = format!("{} {label}", self.era);
        Session::connect(
            command,
            self.era,
            self.cfg.timeout,
            &label,
            self.cfg.verbose,
        )
    }

    /// Runs `body` in a session with a twin server (`command`, the same server started with
    /// other retention flags, named `what` in messages), then finishes the session. If the
    /// session cannot be opened, or `body` cannot set up its situation, every one of `ids` is
    /// skipped with the reason.
    pub(crate) fn with_twin(
        &self,
        command: &[String],
        what: &str,
        ids: &[Id],
        ev: &mut Evidence,
        body: impl FnOnce(&Ctx<'_>, &mut Session, &mut Evidence) -> Result<(), String>,
    ) {
        let mut s = match self.connect_to(command, what) {
            Ok((session, _)) => session,
            Err(ConnectError::NotSpoken(why) | ConnectError::Failed(why)) => {
                ev.skip_all(ids, &format!("the {what} server: {why}"));
                return;
            }
        };
        if let Err(why) = body(self, &mut s, ev) {
            ev.skip_all(ids, &format!("the {what} server: {why}"));
        }
        s.finish(ev);
    }

    /// [`Ctx::connect_to`] the main command, with the failure as a skip reason.
    pub(crate) fn connect(&self, label: &str) -> Result<Session, String> {
        match self.connect_to(&self.cfg.command, label) {
            Ok((session, _)) => Ok(session),
            Err(ConnectError::NotSpoken(why) | ConnectError::Failed(why)) => {
                Err(format!("could not open a session: {why}"))
            }
        }
    }
}

/// Runs every scenario of one era and merges what they saw.
pub(crate) fn run_era(cfg: &Config, era: Era) -> EraReport {
    let ctx = Ctx { cfg, era };
    let mut ev = Evidence::default();
    let mut infos = BTreeMap::new();
    match terminal::run(&ctx, &mut ev, &mut infos) {
        terminal::Support::NotSpoken(why) => {
            return EraReport::unchecked(
                era,
                format!("the server does not speak this era: {why}"),
                false,
            );
        }
        terminal::Support::Broken(why) => return EraReport::unchecked(era, why, true),
        terminal::Support::NoStreams(why) => {
            ev.pass(Id::Ts01);
            let why = format!("the server does not support task event streams ({why})");
            for id in Id::ALL {
                ev.skip(id, why.clone());
            }
        }
        terminal::Support::Streams => {
            ev.skip(
                Id::Ts01,
                "the server supports tasks/stream; TS-01 applies only to one that does not",
            );
            concurrency::run(&ctx, &mut ev);
            cancel::run(&ctx, &mut ev);
            cancel::run_unwatched(&ctx, &mut ev);
            live::run_join(&ctx, &mut ev);
            live::run_resume(&ctx, &mut ev);
            live::run_follow(&ctx, &mut ev);
            limits::run(&ctx, &mut ev);
            gone::run(&ctx, &mut ev);
            aged::run(&ctx, &mut ev);
            checkpoint::run(&ctx, &mut ev);
            let group = match long_lived::run(&ctx, &mut ev) {
                Ok(()) => format!(
                    "RAN long-lived group: drop and resume on a new connection, two speeds, a \
                     late joiner (judged under {})",
                    ids_shown(long_lived::IDS)
                ),
                Err(why) => format!("SKIP long-lived group: {why}"),
            };
            ev.note(group);
        }
    }
    EraReport::from_evidence(era, &ev, &infos)
}

/// IDs as printed, comma-separated.
fn ids_shown(ids: &[Id]) -> String {
    ids.iter()
        .map(|id| id.check().id)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs a scenario body on a fresh session of the main command; a setup failure skips `ids`.
fn scenario(
    ctx: &Ctx<'_>,
    label: &str,
    ids: &[Id],
    ev: &mut Evidence,
    body: impl FnOnce(&mut Session, &mut Evidence) -> Result<(), String>,
) {
    let mut session = match ctx.connect(label) {
        Ok(session) => session,
        Err(why) => {
            ev.skip_all(ids, &why);
            return;
        }
    };
    if let Err(why) = body(&mut session, ev) {
        ev.skip_all(ids, &why);
    }
    session.finish(ev);
}

/// Opens a stream and waits for it to close (cancelling it after the timeout). A broken
/// connection fails `id`, since it broke while `id` was being checked.
fn probe(
    s: &mut Session,
    task: &str,
    after: After<'_>,
    id: Id,
    ev: &mut Evidence,
) -> Result<StreamId, String> {
    let what = format!("tasks/stream with after={}", after.shown());
    probe_with(s, &what, id, ev, |s| s.open_stream(task, after))
}

/// [`probe`] for a stream that `open` sends; `what` names it in messages.
fn probe_with(
    s: &mut Session,
    what: &str,
    id: Id,
    ev: &mut Evidence,
    open: impl FnOnce(&mut Session) -> Result<StreamId, Broken>,
) -> Result<StreamId, String> {
    let fail = |ev: &mut Evidence, broken: Broken| {
        let why = format!("{what}: {broken}");
        ev.fail(id, why.clone());
        why
    };
    let stream = open(s).map_err(|b| fail(ev, b))?;
    let deadline = s.deadline();
    s.collect(stream, deadline).map_err(|b| fail(ev, b))?;
    Ok(stream)
}

/// Creates a live task of `shape`, opens a stream without `after` and waits until it has
/// delivered two events. Answers the task and the stream.
fn watch_live_task(
    ctx: &Ctx<'_>,
    s: &mut Session,
    shape: Shape,
) -> Result<(String, StreamId), String> {
    let task = s.create_task(&ctx.cfg.profile, &ctx.args(shape))?;
    let stream = s
        .open_stream(&task, After::Omitted)
        .map_err(|b| b.to_string())?;
    let deadline = s.deadline();
    s.wait_until(deadline, |s| {
        s.stream(stream).seq_set().len() >= 2 || s.stream(stream).reply.is_some()
    });
    let rec = s.stream(stream);
    if let Some(reply) = &rec.reply {
        return Err(format!(
            "the stream of the running task closed before it had delivered two events: {reply}"
        ));
    }
    let seen = rec.seq_set().len();
    if seen < 2 {
        return Err(format!(
            "the running task's stream delivered {seen} events in {} ms; two were awaited",
            s.timeout().as_millis()
        ));
    }
    Ok((task, stream))
}

/// Whether `reply` is an error with `code`.
fn is_error(reply: Option<&Reply>, code: i64) -> bool {
    reply.and_then(Reply::error_code) == Some(code)
}

/// When a new stream was refused right after its predecessor on the same task was cancelled:
/// waits for the task to end, and answers the skip reason if the cancelled stream was still
/// being served meanwhile (a DX-04 failure, which explains the refusal), else `None`.
fn refused_because_cancel_ignored(
    s: &mut Session,
    ctx: &Ctx<'_>,
    task: &str,
    shape: Shape,
) -> Option<String> {
    let _ = s.wait_terminal(task, ctx.task_deadline(shape));
    s.listen(Instant::now() + ctx.cfg.quiet);
    (!s.after_cancel().is_empty()).then(|| {
        "the cancelled stream was still being served, so the new one was refused (see DX-04)"
            .to_owned()
    })
}
