//! Restart recovery and principal binding on a data dir (docs/interface.md "Durability promise").
//! These need the durable store: with the in-memory placeholder, a restart forgets everything.

use serde_json::{json, Value};

use super::client::{seqs, Server};

fn durable(dir: &std::path::Path, principal: &str) -> Server {
    let dir = dir.to_str().expect("utf-8 path");
    let mut s = Server::spawn(&[
        "--data-dir",
        dir,
        "--durability",
        "event",
        "--principal",
        principal,
    ]);
    s.initialize("2025-11-25");
    s
}

#[test]
fn a_killed_server_restarts_with_its_tasks_and_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = durable(dir.path(), "local");
    let done = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 3}, "task": {}}),
    )["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    s.call("tasks/result", json!({"taskId": done}));
    let running = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 100000, "interval_ms": 5}, "task": {}}),
    )["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    let id = s.request("tasks/stream", json!({"taskId": running}));
    let mut received: Vec<Value> = Vec::new();
    while received.len() < 10 {
        let v = s.recv("event", |v| v["params"]["taskId"] == running.as_str());
        received.push(v["params"].clone());
    }
    let _ = id;
    s.kill();

    let mut s = durable(dir.path(), "local");
    let g = s.ok("tasks/get", json!({"taskId": done}));
    assert_eq!(g["status"], "completed");
    let g = s.ok("tasks/get", json!({"taskId": running}));
    assert_eq!(
        g["status"], "failed",
        "a task running at the crash ends failed"
    );
    let id = s.request("tasks/stream", json!({"taskId": running}));
    let (events, end) = s.collect_stream(id, &running);
    assert_eq!(end["result"], json!({}));
    let got = seqs(&events);
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>(), "gap-free");
    // Every event a client received is still there, same seq and content.
    for r in &received {
        let seq = r["seq"].as_u64().expect("seq") as usize;
        assert_eq!(events[seq]["payload"], r["payload"]);
        assert_eq!(events[seq]["type"], r["type"]);
    }
    let last = &events[events.len() - 1];
    assert_eq!(last["type"], "dev.taskstream.task.status");
    assert_eq!(last["payload"]["status"], "failed");
}

#[test]
fn se03_another_principal_sees_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut alice = durable(dir.path(), "alice");
    let task = alice.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 1}, "task": {}}),
    )["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    alice.call("tasks/result", json!({"taskId": task}));
    alice.close_stdin();
    alice.wait_exit();

    let mut bob = durable(dir.path(), "bob");
    let unknown = bob.call("tasks/get", json!({"taskId": "0".repeat(32)}));
    for method in ["tasks/get", "tasks/result", "tasks/cancel", "tasks/stream"] {
        let r = bob.call(method, json!({"taskId": task}));
        assert_eq!(
            r["error"], unknown["error"],
            "{method}: exactly as unknown (SE-03)"
        );
    }
    assert_eq!(bob.ok("tasks/list", json!({}))["tasks"], json!([]));
    bob.close_stdin();
    bob.wait_exit();

    let mut alice = durable(dir.path(), "alice");
    assert_eq!(
        alice.ok("tasks/get", json!({"taskId": task}))["status"],
        "completed"
    );
}
