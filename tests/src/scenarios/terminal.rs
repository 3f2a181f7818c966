//! Checks on one task that has already ended: its full history, resuming from inside and at the
//! end of it, the table of invalid cursors, who may stream it, and (modern era) the `_meta` a
//! request needs. This scenario runs first: it also tells whether the server speaks the era and
//! supports `tasks/stream` at all.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{is_error, probe, probe_with, Ctx, Shape};
use crate::catalog::Id;
use crate::config::Era;
use crate::event::status_of;
use crate::evidence::Evidence;
use crate::session::{After, ConnectError, Reply, Session, StreamRec, TASKS_EXTENSION};

/// What the first scenario learnt about the server in this era.
pub(crate) enum Support {
    /// Its handshake or discovery was refused: the era is not checked.
    NotSpoken(String),
    /// It speaks the era but the suite could not get as far as a stream.
    Broken(String),
    /// It answers `tasks/stream` with -32601 (TS-01).
    NoStreams(String),
    /// It supports `tasks/stream`: every other scenario runs.
    Streams,
}

/// Where taskstream advertises event streams under 2026-07-28: beside the Tasks extension,
/// whose object official clients accept only empty (its chapter, A-06).
const EVENT_STREAMS_KEY: &str = "dev.taskstream/event-streams";

/// The invalid cursors of RS-01 (not a non-negative integer) and RS-02 (not a valid seq);
/// "beyond the last seq" is added at run time.
const BAD_AFTER: [(Id, &str); 13] = [
    (Id::Rs01, "-1"),
    (Id::Rs01, "-7"),
    (Id::Rs01, "1.5"),
    (Id::Rs01, "\"3\""),
    (Id::Rs01, "null"),
    (Id::Rs01, "true"),
    (Id::Rs01, "[1]"),
    (Id::Rs01, "{}"),
    // Integers in value but not integer literals.
    (Id::Rs02, "1.0"),
    (Id::Rs02, "1e0"),
    (Id::Rs02, "1e2"),
    // Past the largest seq a JSON peer reads exactly, and past u64.
    (Id::Rs02, "9007199254740992"),
    (Id::Rs02, "18446744073709551616"),
];

pub(crate) fn run(ctx: &Ctx<'_>, ev: &mut Evidence, infos: &mut BTreeMap<Id, String>) -> Support {
    let (mut s, handshake) = match ctx.connect_to(&ctx.cfg.command, "terminal") {
        Ok(connected) => connected,
        Err(ConnectError::NotSpoken(why)) => return Support::NotSpoken(why),
        Err(ConnectError::Failed(why)) => return Support::Broken(why),
    };
    infos.insert(Id::Ts02, event_streams_capability(ctx.era, &handshake));

    let task = match s.create_task(&ctx.cfg.profile, &ctx.args(Shape::Short)) {
        Ok(task) => task,
        Err(why) => return Support::Broken(format!("could not create a task: {why}")),
    };
    let status = match s.wait_terminal(&task, ctx.task_deadline(Shape::Short)) {
        Ok(status) => status,
        Err(why) => return Support::Broken(why),
    };
    let history = match s.open_stream(&task, After::Omitted) {
        Ok(history) => history,
        Err(broken) => return Support::Broken(broken.to_string()),
    };
    if let Err(broken) = s.collect(history, s.deadline()) {
        return Support::Broken(broken.to_string());
    }
    if is_error(s.stream(history).reply.as_ref(), -32601) {
        return Support::NoStreams("tasks/stream answered -32601".to_owned());
    }

    let seqs = judge_history(ctx, s.stream(history), &status, ev);
    let steps: [(&[Id], Step); 4] = [
        (&[Id::Rs03a, Id::Rs04], resume_inside_history),
        (&[Id::Rs01, Id::Rs02], bad_cursors),
        (&[Id::Dx02, Id::Se01, Id::Se03], access),
        (&[Id::Dx03, Id::Dx05], modern_meta),
    ];
    let mut broken: Option<String> = None;
    for (ids, step) in steps {
        match &broken {
            Some(why) => ev.skip_all(ids, &format!("the connection broke earlier: {why}")),
            None => broken = step(&mut s, &task, &seqs, ev).err(),
        }
    }
    s.finish(ev);
    Support::Streams
}

type Step = fn(&mut Session, &str, &[u64], &mut Evidence) -> Result<(), String>;

/// TS-02 is a MAY: report where the server advertises `eventStreams`, judge nothing.
fn event_streams_capability(era: Era, handshake: &Value) -> String {
    let (path, capability) = match era {
        Era::Modern => {
            let extensions = handshake.pointer("/capabilities/extensions");
            let inside = extensions
                .and_then(|extensions| extensions.get(TASKS_EXTENSION))
                .and_then(|tasks| tasks.get("eventStreams"));
            let beside = extensions.and_then(|extensions| extensions.get(EVENT_STREAMS_KEY));
            match (inside, beside) {
                (None, Some(found)) => (
                    "server/discover capabilities.extensions[\"dev.taskstream/event-streams\"]",
                    Some(found),
                ),
                (inside, _) => (
                    "server/discover capabilities.extensions[\"io.modelcontextprotocol/tasks\"].eventStreams",
                    inside,
                ),
            }
        }
        Era::Legacy => (
            "initialize capabilities.tasks.eventStreams",
            handshake.pointer("/capabilities/tasks/eventStreams"),
        ),
    };
    match capability {
        Some(_) => format!("advertised in {path}"),
        None => {
            format!("not advertised in {path} (allowed: the method is the interoperable surface)")
        }
    }
}

/// The stream without `after` of a terminal task: TS-03, EV-02, EV-03, RS-06, RL-01, RT-02.
/// Answers the retained seqs, sorted.
fn judge_history(ctx: &Ctx<'_>, history: &StreamRec, status: &str, ev: &mut Evidence) -> Vec<u64> {
    let seqs = history.seq_set();
    let waited = ctx.cfg.timeout.as_millis();
    match (&history.reply, history.events.is_empty()) {
        (Some(Reply::Result(_)), false) => ev.pass(Id::Ts03),
        (Some(Reply::Result(_)), true) => {
            ev.skip(Id::Ts03, "the terminal task had no events left to stream");
            ev.pass(Id::Rs06);
        }
        (Some(Reply::Error(error)), _) => ev.fail(
            Id::Ts03,
            format!("tasks/stream without after on a terminal task answered {error}"),
        ),
        (None, true) => {
            ev.fail(
                Id::Ts03,
                format!("tasks/stream on a terminal task: no event and no result within {waited} ms"),
            );
            ev.fail(
                Id::Rs06,
                format!("nothing retained of a terminal task, yet no result within {waited} ms"),
            );
        }
        (None, false) => ev.fail(
            Id::Ts03,
            format!(
                "the stream of a terminal task delivered seqs {:?} but no result within {waited} ms",
                history.seqs()
            ),
        ),
    }

    if let Some(&first) = seqs.first() {
        ev.judge(
            Id::Ev02,
            (first != 0).then(|| format!("the lowest seq of the task's full history is {first}")),
        );
    }
    let gap = seqs.windows(2).find_map(|pair| match pair {
        [a, b] if *b != a + 1 => Some((*a, *b)),
        _ => None,
    });
    match gap {
        Some((a, b)) => ev.fail(
            Id::Ev03,
            format!("the task's full history {seqs:?} jumps from seq {a} to seq {b}"),
        ),
        None if seqs.len() >= 2 => ev.pass(Id::Ev03),
        None => {}
    }

    match history.events.iter().rev().find_map(status_of) {
        Some(last) if last == status => ev.pass(Id::Rl01),
        Some(last) => ev.fail(
            Id::Rl01,
            format!("the last status event says {last:?}, tasks/get says {status:?}"),
        ),
        None => ev.skip(Id::Rl01, "no event carries a task status in payload.status"),
    }
    if history.events.is_empty() {
        ev.fail(
            Id::Rt02,
            "tasks/get still resolves the terminal task, but no event of it is retained",
        );
    } else {
        ev.pass(Id::Rt02);
    }
    seqs
}

/// RS-03a on a terminal task (a cursor inside the history replays exactly the rest) and RS-04
/// (a cursor at its last seq answers at once, with no event).
fn resume_inside_history(
    s: &mut Session,
    task: &str,
    seqs: &[u64],
    ev: &mut Evidence,
) -> Result<(), String> {
    match seqs.get(1) {
        Some(&cursor) if seqs.len() >= 3 => {
            let want: Vec<u64> = seqs.iter().copied().filter(|seq| *seq > cursor).collect();
            let stream = probe(s, task, After::Seq(cursor), Id::Rs03a, ev)?;
            let rec = s.stream(stream);
            let failure = match &rec.reply {
                Some(Reply::Error(error)) => Some(format!(
                    "after={cursor}, a seq of the task's history, was refused: {error}"
                )),
                _ if rec.seq_set() != want => Some(format!(
                    "after={cursor} delivered seqs {:?}; the retained events above it are {want:?}",
                    rec.seqs()
                )),
                _ => None,
            };
            ev.judge(Id::Rs03a, failure);
        }
        _ => ev.skip(
            Id::Rs03a,
            "the terminal task's history has fewer than 3 events",
        ),
    }

    let Some(&last) = seqs.last() else {
        ev.skip(Id::Rs04, "the terminal task has no retained events");
        return Ok(());
    };
    let stream = probe(s, task, After::Seq(last), Id::Rs04, ev)?;
    let rec = s.stream(stream);
    let failure = match (&rec.reply, rec.events.is_empty()) {
        (Some(Reply::Result(_)), true) => None,
        (Some(Reply::Error(error)), _) => Some(format!(
            "after={last}, the last seq of a terminal task, was refused: {error}"
        )),
        (_, false) => Some(format!(
            "after={last}, the last seq of a terminal task, delivered seqs {:?}",
            rec.seqs()
        )),
        (None, true) => Some(format!(
            "after={last}, the last seq of a terminal task: no result within {} ms",
            s.timeout().as_millis()
        )),
    };
    ev.judge(Id::Rs04, failure);
    Ok(())
}

/// RS-01 and RS-02: every invalid cursor gets -32602 and no event.
fn bad_cursors(s: &mut Session, task: &str, seqs: &[u64], ev: &mut Evidence) -> Result<(), String> {
    let Some(&last) = seqs.last() else {
        let why = "the terminal task has no retained events to place a cursor against";
        ev.skip_all(&[Id::Rs01, Id::Rs02], why);
        return Ok(());
    };
    let beyond = last.saturating_add(1).to_string();
    let rows = BAD_AFTER
        .iter()
        .map(|(id, literal)| (*id, *literal))
        .chain([(Id::Rs02, beyond.as_str())]);
    for (id, literal) in rows {
        let stream = probe(s, task, After::Literal(literal), id, ev)?;
        let rec = s.stream(stream);
        if is_error(rec.reply.as_ref(), -32602) && rec.events.is_empty() {
            ev.pass(id);
        } else {
            ev.fail(id, format!("must get -32602; got {}", rec.describe()));
        }
    }
    Ok(())
}

/// DX-02 (an unknown task id gets -32602), SE-01 (tasks/stream refuses an id exactly as
/// tasks/get does) and SE-03 (no event leaks to a stream for an id tasks/get refuses). The ids
/// tried: one never issued, and the real task's id changed in case and lengthened.
fn access(s: &mut Session, task: &str, _seqs: &[u64], ev: &mut Evidence) -> Result<(), String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let unknown = format!("conformance-no-such-task-{nanos:08x}");
    let mut probes = vec![(unknown, true)];
    if task.to_uppercase() != task {
        probes.push((task.to_uppercase(), false));
    }
    probes.push((format!("{task}0"), false));

    for (id, never_issued) in probes {
        let get = s.tasks_get(&id).map_err(|broken| {
            let why = format!("tasks/get {id:?}: {broken}");
            ev.fail(Id::Se01, why.clone());
            why
        })?;
        let what = format!("tasks/stream for taskId {id:?}");
        let stream = probe_with(s, &what, Id::Se01, ev, |s| s.open_foreign_stream(&id))?;
        let rec = s.stream(stream);
        if never_issued {
            let refused = is_error(rec.reply.as_ref(), -32602) && rec.events.is_empty();
            ev.judge(
                Id::Dx02,
                (!refused).then(|| {
                    format!(
                        "tasks/stream for the unknown taskId {id:?} must get -32602; got {}",
                        rec.describe()
                    )
                }),
            );
        }
        let Reply::Error(refusal) = get else {
            // The server resolves this id: there is no refusal to compare with.
            continue;
        };
        let same = matches!(&rec.reply, Some(Reply::Error(e)) if e.code == refusal.code);
        ev.judge(
            Id::Se01,
            (!same).then(|| {
                format!(
                    "tasks/get refused taskId {id:?} with {refusal}, but tasks/stream answered {}",
                    rec.describe()
                )
            }),
        );
        ev.judge(
            Id::Se03,
            (!rec.events.is_empty()).then(|| {
                format!(
                    "tasks/stream for taskId {id:?}, which tasks/get refuses, delivered {} events of task {:?}",
                    rec.events.len(),
                    rec.events.first().and_then(|e| e.task_id.clone()).unwrap_or_default()
                )
            }),
        );
    }
    Ok(())
}

/// DX-03 (a modern request that did not declare the Tasks extension gets -32021) and DX-05 (a
/// modern request without the required `_meta` gets -32602), both on the real task, so that
/// the missing declaration is the only thing wrong with the request.
fn modern_meta(
    s: &mut Session,
    task: &str,
    _seqs: &[u64],
    ev: &mut Evidence,
) -> Result<(), String> {
    if s.era() == Era::Legacy {
        let why = "applies to the modern era only";
        ev.skip_all(&[Id::Dx03, Id::Dx05], why);
        return Ok(());
    }
    let undeclared = json!({"taskId": task, "_meta": Session::modern_meta(false)});
    let mut no_version = Session::modern_meta(true);
    if let Some(meta) = no_version.as_object_mut() {
        meta.remove("io.modelcontextprotocol/protocolVersion");
    }
    let probes = [
        (
            Id::Dx03,
            -32021,
            "clientCapabilities without the Tasks extension",
            undeclared,
        ),
        (Id::Dx05, -32602, "no _meta", json!({"taskId": task})),
        (
            Id::Dx05,
            -32602,
            "_meta without protocolVersion",
            json!({"taskId": task, "_meta": no_version}),
        ),
    ];
    for (id, code, what, params) in probes {
        let shown = format!("tasks/stream with {what}");
        let stream = probe_with(s, &shown, id, ev, |s| s.open_stream_exact(task, params))?;
        let rec = s.stream(stream);
        // Over stateless HTTP the era of a request is only in its `_meta`: one without it (or
        // without its protocolVersion) is of no era, and the server may answer it as a
        // 2025-11-25 request without a session. There it is held only to being refused unserved.
        let no_era = s.is_http() && id == Id::Dx05;
        let code_ok = if no_era {
            rec.reply.as_ref().and_then(Reply::error_code).is_some()
        } else {
            is_error(rec.reply.as_ref(), code)
        };
        let refused = code_ok && rec.events.is_empty();
        ev.judge(
            id,
            (!refused).then(|| {
                format!(
                    "a tasks/stream with {what} must get {code}; got {}",
                    rec.describe()
                )
            }),
        );
    }
    Ok(())
}
