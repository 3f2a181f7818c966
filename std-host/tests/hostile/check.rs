//! What every hostile test checks afterwards: the server still answers `ping`, its resident
//! memory is under [`RSS_BOUND_KIB`], and every task it ran has its events intact (streamed
//! from the start: seq 0, 1, 2, … with no gap, each with the content `emit` promises).

use serde_json::{json, Value};

use super::client::{Server, RSS_BOUND_KIB};

/// A legacy `emit` task whose events can be checked.
#[derive(Clone, Debug)]
pub(crate) struct Emit {
    pub(crate) task: String,
    pub(crate) count: u64,
    pub(crate) payload_bytes: u64,
}

/// Starts `emit {count, interval_ms, payload_bytes}` as a task in a legacy session.
#[track_caller]
pub(crate) fn start_emit(s: &mut Server, count: u64, interval_ms: u64, payload_bytes: u64) -> Emit {
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "task": {},
               "arguments": {"count": count, "interval_ms": interval_ms,
                             "payload_bytes": payload_bytes}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    Emit {
        task,
        count,
        payload_bytes,
    }
}

/// Streams a task from its earliest retained event (or `after`) to the end; returns the
/// events and the final response line. Events of the task from earlier streams are dropped
/// first.
#[track_caller]
pub(crate) fn stream_all(s: &mut Server, params: Value) -> (Vec<Value>, Value) {
    let task = params["taskId"].clone();
    s.discard_until_now(|v| {
        v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == task
    });
    let id = s.request("tasks/stream", params);
    let mut events = Vec::new();
    loop {
        let l = s.recv_line(&format!("stream {id}"), |v| {
            (v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == task)
                || (v["id"] == json!(id) && v.get("method").is_none())
        });
        if l.v.get("method").is_some() {
            events.push(l.v["params"].clone());
        } else {
            return (events, l.v);
        }
    }
}

/// The events `emit` must have produced, as `(type, payload)` by seq.
pub(crate) fn expected_events(e: &Emit) -> Vec<(String, Value)> {
    let data = "x".repeat(usize::try_from(e.payload_bytes).expect("small"));
    let mut out = vec![(
        "dev.taskstream.task.status".to_owned(),
        json!({"status": "working"}),
    )];
    for i in 0..e.count {
        out.push((
            "dev.taskstream.tick".to_owned(),
            json!({"i": i, "data": data}),
        ));
    }
    out.push((
        "dev.taskstream.task.status".to_owned(),
        json!({"status": "completed"}),
    ));
    out
}

/// Streams the whole task and compares every event with what `emit` promises.
#[track_caller]
pub(crate) fn assert_intact(s: &mut Server, e: &Emit) {
    let (events, end) = stream_all(s, json!({"taskId": e.task}));
    assert_eq!(
        end["result"],
        json!({}),
        "stream of {} ended with {end}",
        e.task
    );
    let got: Vec<(u64, String, Value)> = events
        .iter()
        .map(|ev| {
            assert_eq!(ev["taskId"], json!(e.task));
            assert_eq!(
                ev["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                json!(e.task)
            );
            (
                ev["seq"].as_u64().expect("seq"),
                ev["type"].as_str().expect("type").to_owned(),
                ev["payload"].clone(),
            )
        })
        .collect();
    let want: Vec<(u64, String, Value)> = expected_events(e)
        .into_iter()
        .zip(0u64..)
        .map(|((t, p), seq)| (seq, t, p))
        .collect();
    assert_eq!(got.len(), want.len(), "event count of {}", e.task);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "event of {}", e.task);
    }
}

/// Waits (bounded) until the task is terminal.
#[track_caller]
pub(crate) fn wait_terminal(s: &mut Server, task: &str) -> Value {
    let id = s.request("tasks/result", json!({"taskId": task}));
    s.response_line(id).v
}

/// The post-condition of every hostile test.
#[track_caller]
pub(crate) fn assert_healthy(s: &mut Server, tasks: &[Emit]) {
    assert_eq!(s.ok("ping", json!({})), json!({}), "ping after the attack");
    let rss = s.rss_kib();
    // Shown with --nocapture; docs/security.md records these numbers.
    eprintln!(
        "VmRSS after {}: {rss} KiB",
        std::thread::current().name().unwrap_or("?")
    );
    assert!(
        rss < RSS_BOUND_KIB,
        "resident memory {rss} KiB is over the bound of {RSS_BOUND_KIB} KiB"
    );
    for e in tasks {
        wait_terminal(s, &e.task);
        assert_intact(s, e);
    }
    assert_eq!(s.ok("ping", json!({})), json!({}), "ping at the end");
}

/// Waits until every line the server logged before now has been read from its stderr: starts
/// an empty task and waits for its "created" line (logged at `info`, after everything before).
#[track_caller]
pub(crate) fn log_barrier(s: &mut Server) {
    let e = start_emit(s, 0, 0, 0);
    s.wait_stderr(&format!("task {} created", e.task));
}
