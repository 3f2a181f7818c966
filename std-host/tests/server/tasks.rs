//! Tasks in both eras: SEP-1686 in a legacy session, SEP-2663 in modern requests
//! (MCP-DIGEST b.1-b.3), one store underneath.

use serde_json::{json, Value};

use super::client::{modern, Server};

fn legacy_task(s: &mut Server, args: Value) -> String {
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": args, "task": {"ttl": 60000}}),
    );
    assert_eq!(r["task"]["status"], "working", "{r}");
    r["task"]["taskId"].as_str().expect("taskId").to_owned()
}

fn modern_task(s: &mut Server, args: Value) -> String {
    let r = s.ok(
        "tools/call",
        modern(json!({"name": "emit", "arguments": args}), true),
    );
    assert_eq!(r["resultType"], "task", "{r}");
    r["taskId"].as_str().expect("taskId").to_owned()
}

/// Waits until a modern task is terminal: its stream closes once it is caught up.
fn wait_terminal(s: &mut Server, task: &str) {
    let id = s.request("tasks/stream", modern(json!({"taskId": task}), true));
    let (_, end) = s.collect_stream(id, task);
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
}

#[test]
fn legacy_task_get_result_and_status_notification() {
    let mut s = Server::legacy(&[]);
    let task = legacy_task(&mut s, json!({"count": 3, "interval_ms": 100}));
    assert_eq!(task.len(), 32);
    assert!(task.bytes().all(|b| b.is_ascii_hexdigit()));
    // tasks/result blocks until terminal, without blocking other requests.
    let rid = s.request("tasks/result", json!({"taskId": task}));
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(g["taskId"], task.as_str());
    assert!(g["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(g["ttl"], 60000);
    assert!(g["pollInterval"].is_u64());
    assert_eq!(s.ok("ping", json!({})), json!({}));
    let r = s.response(rid);
    assert_eq!(r["result"]["content"][0]["text"], "emitted 3 events");
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
    let n = s.recv("status notification", |v| {
        v["method"] == "notifications/tasks/status" && v["params"]["taskId"] == task.as_str()
    });
    assert_eq!(n["params"]["status"], "completed");
    // Status without replay: the retained range (n + 2 events, seq 0..=4).
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(g["status"], "completed");
    assert_eq!(
        g["_meta"]["dev.taskstream/events"],
        json!({"earliestSeq": 0, "latestSeq": 4, "nextSeq": 5})
    );
    // Unknown task (DX-02); unknown fields in params are ignored (the TS SDK sends task.ttl).
    assert_eq!(
        s.error_code("tasks/get", json!({"taskId": "0".repeat(32)})),
        -32602
    );
    assert_eq!(s.error_code("tasks/get", json!({"taskId": "nope"})), -32602);
    s.ok("tasks/get", json!({"taskId": task, "task": {"ttl": 1}}));
}

#[test]
fn legacy_failed_task_returns_its_tool_error() {
    let mut s = Server::legacy(&[]);
    let task = legacy_task(&mut s, json!({"count": 5, "fail_at": 1}));
    let r = s.call("tasks/result", json!({"taskId": task}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(g["status"], "failed");
    assert!(g["statusMessage"].is_string());
    // working, i=0, i=1, failed
    assert_eq!(g["_meta"]["dev.taskstream/events"]["nextSeq"], 4);
}

#[test]
fn legacy_cancel_running_then_terminal() {
    let mut s = Server::legacy(&[]);
    let task = legacy_task(&mut s, json!({"count": 1000, "interval_ms": 50}));
    let c = s.ok("tasks/cancel", json!({"taskId": task}));
    assert_eq!(c["status"], "cancelled");
    assert_eq!(c["taskId"], task.as_str());
    // Cancelling a terminal task is -32602 (SEP-1686).
    assert_eq!(
        s.error_code("tasks/cancel", json!({"taskId": task})),
        -32602
    );
    let n = s.recv("status notification", |v| {
        v["method"] == "notifications/tasks/status" && v["params"]["taskId"] == task.as_str()
    });
    assert_eq!(n["params"]["status"], "cancelled");
    // tasks/result of a cancelled task is an error, at once.
    let r = s.call("tasks/result", json!({"taskId": task}));
    assert!(r["error"]["code"].is_i64(), "{r}");
}

#[test]
fn legacy_list_is_paginated_with_an_opaque_cursor() {
    let mut s = Server::legacy(&[]);
    let mut made = Vec::new();
    for _ in 0..53 {
        made.push(legacy_task(&mut s, json!({"count": 0})));
    }
    let first = s.ok("tasks/list", json!({}));
    let page1 = first["tasks"].as_array().expect("tasks").clone();
    assert_eq!(page1.len(), 50);
    let cursor = first["nextCursor"].as_str().expect("nextCursor").to_owned();
    let second = s.ok("tasks/list", json!({"cursor": cursor}));
    let page2 = second["tasks"].as_array().expect("tasks").clone();
    assert_eq!(page2.len(), 3);
    assert!(second.get("nextCursor").is_none());
    let mut listed: Vec<String> = page1
        .iter()
        .chain(&page2)
        .map(|t| t["taskId"].as_str().expect("id").to_owned())
        .collect();
    listed.sort();
    made.sort();
    assert_eq!(listed, made);
    assert_eq!(
        s.error_code("tasks/list", json!({"cursor": "garbage"})),
        -32602
    );
}

#[test]
fn modern_task_lifecycle_with_inline_result() {
    let mut s = Server::in_memory(&[]);
    let r = s.ok(
        "tools/call",
        modern(json!({"name": "emit", "arguments": {"count": 2}}), true),
    );
    // Flat CreateTaskResult (SEP-2663).
    for k in [
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    ] {
        assert!(r.get(k).is_some(), "{k} missing in {r}");
    }
    let task = r["taskId"].as_str().expect("id").to_owned();
    // It resolves at once (the result is only sent once tasks/get would resolve).
    let g = s.ok("tasks/get", modern(json!({"taskId": task}), true));
    assert_eq!(g["resultType"], "complete");
    wait_terminal(&mut s, &task);
    let done = s.ok("tasks/get", modern(json!({"taskId": task}), true));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["content"][0]["text"], "emitted 2 events");
    assert_eq!(done["_meta"]["dev.taskstream/events"]["nextSeq"], 4);
    assert!(done["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    // update and cancel are acks; result and list are not methods here.
    assert_eq!(
        s.ok(
            "tasks/update",
            modern(json!({"taskId": task, "inputResponses": {}}), true)
        )["resultType"],
        "complete"
    );
    assert_eq!(
        s.ok("tasks/cancel", modern(json!({"taskId": task}), true))["resultType"],
        "complete"
    );
    assert_eq!(
        s.error_code("tasks/result", modern(json!({"taskId": task}), true)),
        -32601
    );
    assert_eq!(s.error_code("tasks/list", modern(json!({}), true)), -32601);
    assert_eq!(
        s.error_code("tasks/get", modern(json!({"taskId": "f".repeat(32)}), true)),
        -32602
    );
}

#[test]
fn modern_tool_error_completes_with_an_error_result() {
    // SEP-2663 (MCP-DIGEST b.3): a tool-level error is a `completed` task whose inline result
    // has `isError: true`; `failed` is for protocol errors. The status event agrees (RL-01).
    let mut s = Server::in_memory(&[]);
    let task = modern_task(&mut s, json!({"count": 3, "fail_at": 0}));
    wait_terminal(&mut s, &task);
    let g = s.ok("tasks/get", modern(json!({"taskId": task}), true));
    assert_eq!(g["status"], "completed", "{g}");
    assert_eq!(g["result"]["isError"], true, "{g}");
    assert_eq!(g["result"]["resultType"], "complete", "{g}");
    assert!(g.get("error").is_none(), "{g}");
    let id = s.request("tasks/stream", modern(json!({"taskId": task}), true));
    let (events, _) = s.collect_stream(id, &task);
    let last = events.last().expect("a terminal status event");
    assert_eq!(last["type"], "dev.taskstream.task.status");
    assert_eq!(last["payload"]["status"], "completed", "{last}");
}

#[test]
fn legacy_tool_error_fails_the_task() {
    // SEP-1686: a tool result with `isError: true` makes the task `failed`.
    let mut s = Server::legacy(&[]);
    let created = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 3, "fail_at": 0}, "task": {"ttl": 60000}}),
    );
    let task = created["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let result = s.ok("tasks/result", json!({"taskId": task}));
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": task}))["status"],
        "failed"
    );
}

#[test]
fn modern_cancel_stops_a_running_task() {
    let mut s = Server::in_memory(&[]);
    let task = modern_task(&mut s, json!({"count": 1000, "interval_ms": 50}));
    s.ok("tasks/cancel", modern(json!({"taskId": task}), true));
    let g = s.ok("tasks/get", modern(json!({"taskId": task}), true));
    assert_eq!(g["status"], "cancelled");
}

#[test]
fn modern_without_the_extension() {
    let mut s = Server::in_memory(&[]);
    let task = modern_task(&mut s, json!({"count": 1}));
    // DX-03: -32021 naming the extension.
    for method in ["tasks/get", "tasks/cancel", "tasks/update", "tasks/stream"] {
        let r = s.call(method, modern(json!({"taskId": task}), false));
        assert_eq!(r["error"]["code"], -32021, "{method}: {r}");
        assert_eq!(
            r["error"]["data"]["requiredCapabilities"]["extensions"]
                ["io.modelcontextprotocol/tasks"],
            json!({})
        );
    }
    // A tools/call without the extension runs plainly (params.task is ignored in modern).
    let r = s.ok(
        "tools/call",
        modern(
            json!({"name": "emit", "arguments": {"count": 1}, "task": {}}),
            false,
        ),
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["content"][0]["text"], "emitted 1 events");
}

/// The chapter's retention section: a requested `ttl` is echoed capped at
/// `--terminal-retention`, and it is a lower bound counted from creation: the task (and its
/// events) stay retrievable until `--terminal-retention` after the task ends, which is never
/// earlier than `ttl` after its creation. So a task whose `ttl` ran out while it was still
/// working is kept, with its whole history, once it ends.
#[test]
fn ttl_is_echoed_capped_and_kept_at_least_from_creation() {
    let mut s = Server::legacy(&["--terminal-retention", "10"]);
    let capped = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 1}, "task": {"ttl": 60000}}),
    );
    assert_eq!(capped["task"]["ttl"], 10_000, "{capped}");
    // A ttl of 5 ms, for a task that runs at least 3 × 20 ms: it has run out by the end.
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 3, "interval_ms": 20}, "task": {"ttl": 5}}),
    );
    assert_eq!(r["task"]["ttl"], 5, "{r}");
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    let done = s.call("tasks/result", json!({"taskId": task}));
    assert_eq!(done["result"]["content"][0]["text"], "emitted 3 events");
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(g["status"], "completed", "{g}");
    assert_eq!(g["ttl"], 5);
    let id = s.request("tasks/stream", json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"], json!({}), "{end}");
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
}

/// The chapter shows the status payloads and the `tasks/get` `_meta` the server sends: the
/// `cancelled` payload with its `message`, and `dev.taskstream/events` with its three fields.
#[test]
fn the_chapter_shows_the_status_payload_and_events_meta_the_server_sends() {
    let chapter = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/specification/tasks-stream.md"
    ))
    .expect("the chapter");
    let mut s = Server::legacy(&[]);
    let task = legacy_task(&mut s, json!({"count": 100, "interval_ms": 50}));
    s.ok("tasks/cancel", json!({"taskId": task}));
    let id = s.request("tasks/stream", json!({"taskId": task}));
    let (events, _) = s.collect_stream(id, &task);
    let last = events.last().expect("a terminal status event");
    assert_eq!(last["type"], "dev.taskstream.task.status");
    let payload = &last["payload"];
    assert_eq!(payload["status"], "cancelled", "{payload}");
    let shown = format!(
        "`{{\"status\": \"cancelled\", \"message\": {}}}`",
        payload["message"]
    );
    assert!(
        chapter.contains(&shown),
        "the chapter does not show {shown}"
    );
    let g = s.ok("tasks/get", json!({"taskId": task}));
    let meta = g["_meta"]["dev.taskstream/events"]
        .as_object()
        .expect("the events meta");
    assert!(chapter.contains("`_meta[\"dev.taskstream/events\"]`"));
    for key in meta.keys() {
        assert!(
            chapter.contains(&format!("\"{key}\": ")),
            "the chapter does not document {key}"
        );
    }
    assert_eq!(meta.len(), 3, "{g}");
}
