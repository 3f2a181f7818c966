//! Checkpoints (docs/interface.md "Checkpoints"; CP-01..CP-06 of
//! `docs/specification/requirements.md`): `emit`'s `checkpoint_every`, and
//! `serve --retain-from-checkpoint` answering as if every event before a task's latest
//! checkpoint were dropped, in memory and on a data dir across a restart. The PostgreSQL
//! store runs the same checks in `postgres::`.

use serde_json::{json, Value};

use super::client::{seqs, Server};

/// The type of a checkpoint event.
pub(crate) const CHECKPOINT: &str = "dev.taskstream.checkpoint";

/// The `emit` call every check here makes: 25 ticks, a checkpoint after every 10th. Its log is
/// seq 0 (working), ticks 1..=10, checkpoint 11 (covers 10, 10 ticks), ticks 12..=21,
/// checkpoint 22 (covers 21, 20 ticks), ticks 23..=27, seq 28 (completed).
pub(crate) fn args() -> Value {
    json!({"count": 25, "checkpoint_every": 10})
}

/// The seq of the latest checkpoint of [`args`]'s task.
pub(crate) const LATEST: u64 = 22;

/// The task's state, `emit`'s `{"ticks": n}`, rebuilt from `events` as a client does: a
/// checkpoint sets it, a tick adds one. Fails on a gap (CP-05: no silent hole).
#[track_caller]
pub(crate) fn rebuild(events: &[Value]) -> u64 {
    let mut ticks = 0;
    let mut prev: Option<u64> = None;
    for e in events {
        let seq = e["seq"].as_u64().expect("seq");
        if let Some(p) = prev {
            assert_eq!(seq, p + 1, "a gap before seq {seq}");
        }
        prev = Some(seq);
        match e["type"].as_str() {
            Some(CHECKPOINT) => {
                let p = &e["payload"];
                assert_eq!(
                    p["coversThrough"].as_u64(),
                    Some(seq - 1),
                    "CP-01: a checkpoint covers the event just before it: {e}"
                );
                ticks = p["state"]["ticks"].as_u64().expect("state.ticks");
            }
            Some("dev.taskstream.tick") => ticks += 1,
            _ => {}
        }
    }
    ticks
}

/// The whole retained log of `task`, streamed without `after`, and the stream's response.
pub(crate) fn replay(s: &mut Server, task: &str) -> Vec<Value> {
    let id = s.request("tasks/stream", json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, task);
    assert!(end.get("error").is_none(), "{end}");
    events
}

/// Starts [`args`]'s task and waits for its end (tasks/result).
pub(crate) fn run_task(s: &mut Server) -> String {
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": args(), "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    s.call("tasks/result", json!({"taskId": task}));
    task
}

/// Everything a server under `--retain-from-checkpoint` must answer for [`args`]'s ended
/// task: CP-03 (a stream without `after` starts with the latest checkpoint), CP-04 (a cursor
/// before it is `events_gone` with `earliestSeq` = its seq; `tasks/get` says the same), CP-05
/// (the state rebuilt from it equals a full replay's: 25 ticks).
#[track_caller]
pub(crate) fn check_retained_from_checkpoint(s: &mut Server, task: &str) {
    let events = replay(s, task);
    assert_eq!(events[0]["type"], CHECKPOINT, "CP-03: {}", events[0]);
    assert_eq!(seqs(&events), (LATEST..=28).collect::<Vec<_>>(), "CP-03");
    assert_eq!(rebuild(&events), 25, "CP-05");
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(
        g["_meta"]["dev.taskstream/events"],
        json!({"earliestSeq": LATEST, "latestSeq": 28, "nextSeq": 29}),
        "CP-04"
    );
    for after in [0, 11, LATEST - 2] {
        let r = s.call("tasks/stream", json!({"taskId": task, "after": after}));
        assert_eq!(
            r["error"],
            json!({"code": -32010, "message": "Task events are no longer available",
                   "data": {"reason": "events_gone", "taskId": task, "earliestSeq": LATEST}}),
            "CP-04, after {after}"
        );
    }
    // A resume from just before the checkpoint is gap-free and starts with it.
    let id = s.request("tasks/stream", json!({"taskId": task, "after": LATEST - 1}));
    let (events, _) = s.collect_stream(id, task);
    assert_eq!(events[0]["seq"], LATEST);
    assert_eq!(rebuild(&events), 25, "CP-05");
}

#[test]
fn cp02_cp05_without_the_option_checkpoints_are_ordinary_events() {
    let mut s = Server::legacy(&[]);
    let task = run_task(&mut s);
    let events = replay(&mut s, &task);
    // CP-02: emit's checkpoints, where they belong and with the ticks so far.
    assert_eq!(seqs(&events), (0..=28).collect::<Vec<_>>());
    let at: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == CHECKPOINT)
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(at, [11, LATEST]);
    assert_eq!(
        events[11]["payload"],
        json!({"coversThrough": 10, "state": {"ticks": 10}})
    );
    // The full replay's state, and the state from the latest checkpoint on, agree (CP-05).
    let ticks = events
        .iter()
        .filter(|e| e["type"] == "dev.taskstream.tick")
        .count();
    assert_eq!(ticks, 25);
    assert_eq!(rebuild(&events), 25);
    assert_eq!(rebuild(&events[LATEST as usize..]), 25);
    // Nothing is gone: an old cursor still resumes.
    let id = s.request("tasks/stream", json!({"taskId": task, "after": 3}));
    let (events, _) = s.collect_stream(id, &task);
    assert_eq!(events[0]["seq"], 4);
}

#[test]
fn cp03_cp04_cp05_in_memory() {
    let mut s = Server::legacy(&["--retain-from-checkpoint"]);
    let task = run_task(&mut s);
    check_retained_from_checkpoint(&mut s, &task);
}

#[test]
fn cp03_cp06_a_live_late_joiner_starts_at_the_latest_checkpoint() {
    // While the task runs: a late joiner's first event is a checkpoint, and it follows the
    // task live from there to the same state as a full replay.
    let mut s = Server::legacy(&["--retain-from-checkpoint"]);
    let r = s.ok(
        "tools/call",
        json!({"name": "emit",
               "arguments": {"count": 40, "interval_ms": 20, "checkpoint_every": 5},
               "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    // Wait (bounded) until a second checkpoint is in the log, then join late.
    let deadline = std::time::Instant::now() + super::client::DEADLINE;
    loop {
        let g = s.ok("tasks/get", json!({"taskId": task}));
        if g["_meta"]["dev.taskstream/events"]["earliestSeq"].as_u64() > Some(6) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no second checkpoint: {g}"
        );
        s.try_recv(|_| false, std::time::Duration::from_millis(20));
    }
    // A follower that falls behind a checkpoint's append gets events_gone (CP-04, no
    // silent gap) and, as the client rule says (CP-06), resumes from just before the
    // checkpoint: the checkpoint resets its state, and it follows on.
    let mut after: Option<u64> = None;
    let ticks = loop {
        let params = match after {
            None => json!({"taskId": task}),
            Some(a) => json!({"taskId": task, "after": a}),
        };
        let id = s.request("tasks/stream", params);
        let (events, end) = s.collect_stream(id, &task);
        assert_eq!(events[0]["type"], CHECKPOINT, "CP-03: {}", events[0]);
        let ticks = rebuild(&events);
        match end["error"]["data"]["earliestSeq"].as_u64() {
            Some(earliest) => after = Some(earliest - 1),
            None => break ticks,
        }
    };
    assert_eq!(ticks, 40, "CP-05");
}

#[test]
fn cp03_cp04_cp05_on_a_data_dir_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::on_dir(dir.path(), "alice", &["--retain-from-checkpoint"]);
    s.initialize("2025-11-25");
    let task = run_task(&mut s);
    check_retained_from_checkpoint(&mut s, &task);
    assert!(s.shutdown().success());
    // The floor is in the log and the index: the restarted server answers the same.
    let mut s = Server::on_dir(dir.path(), "alice", &["--retain-from-checkpoint"]);
    s.initialize("2025-11-25");
    check_retained_from_checkpoint(&mut s, &task);
    assert!(s.shutdown().success());
}

#[test]
fn cp04_the_other_limits_still_apply_on_top() {
    // A count limit below the distance between checkpoints drops the checkpoint too: the
    // earliest event is then whatever the count limit keeps (docs/interface.md).
    let mut s = Server::legacy(&["--retain-from-checkpoint", "--max-events-per-task", "3"]);
    let task = run_task(&mut s);
    let events = replay(&mut s, &task);
    assert_eq!(seqs(&events), [26, 27, 28]);
}

#[test]
fn cp01_cp05_run_trace_checkpoints_a_state_its_events_add_up_to() {
    // run_trace's checkpoint state counts the trace events by type; from the latest one plus
    // the events after it, a late joiner gets the counts of a full replay.
    let mut full = Server::legacy(&[]);
    let mut kept = Server::legacy(&["--retain-from-checkpoint"]);
    let args = json!({"name": "code-review", "speed": 100_000, "checkpoint_every": 100});
    let mut counts = Vec::new();
    for s in [&mut full, &mut kept] {
        let r = s.ok(
            "tools/call",
            json!({"name": "run_trace", "arguments": args, "task": {}}),
        );
        let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
        s.call("tasks/result", json!({"taskId": task}));
        let events = replay(s, &task);
        let mut types = serde_json::Map::new();
        let mut n = 0u64;
        for e in &events {
            match e["type"].as_str() {
                Some(CHECKPOINT) => {
                    let state = &e["payload"]["state"];
                    n = state["events"].as_u64().expect("events");
                    types = state["types"].as_object().expect("types").clone();
                }
                Some("dev.taskstream.task.status") | None => {}
                Some(t) => {
                    n += 1;
                    let c = types
                        .get(t)
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0);
                    types.insert(t.to_owned(), json!(c + 1));
                }
            }
        }
        counts.push((events[0]["type"].clone(), n, types));
    }
    assert_eq!(
        counts[0].0, "dev.taskstream.task.status",
        "a full replay from seq 0"
    );
    assert_eq!(counts[1].0, CHECKPOINT, "CP-03");
    assert_eq!(
        (counts[0].1, &counts[0].2),
        (counts[1].1, &counts[1].2),
        "CP-05"
    );
    assert!(counts[0].1 > 100);
}

#[test]
fn the_option_is_advertised_in_both_eras_and_only_with_it() {
    let key = "dev.taskstream/checkpoints";
    let mut s = Server::in_memory(&["--retain-from-checkpoint"]);
    let r = s.initialize("2025-11-25");
    let advertised = &r["result"]["capabilities"]["experimental"][key];
    assert_eq!(advertised["eventType"], CHECKPOINT, "{r}");
    assert_eq!(advertised["retainFromCheckpoint"], true, "{r}");

    let mut s = Server::in_memory(&["--retain-from-checkpoint"]);
    let r = s.ok("server/discover", super::client::modern(json!({}), false));
    assert_eq!(
        r["capabilities"]["experimental"][key]["eventType"], CHECKPOINT,
        "{r}"
    );

    let mut s = Server::in_memory(&[]);
    let r = s.initialize("2025-11-25");
    assert!(
        r["result"]["capabilities"].get("experimental").is_none(),
        "{r}"
    );
}
