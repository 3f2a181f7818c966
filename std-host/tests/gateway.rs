//! `taskstream gateway -- CMD`: the real binary in front of real stdio MCP servers.
//!
//! The fault tests put it in front of `tests/interop/gateway/faulty_server.py` (Python standard
//! library only), which misbehaves in one way per mode: each gives a clear error or a failed
//! task with a reason, the gateway serves on, and nothing already recorded is lost.
//!
//! The tests marked `#[ignore]` need the servers `scripts/gateway` installs (the official
//! Python SDK's FastMCP in `tests/interop/.venv`, `@modelcontextprotocol/server-everything`
//! under `tests/interop/gateway`); `scripts/gateway` runs them with `--ignored`.

use crate::server::client;

use std::path::PathBuf;

use client::{modern, Server};
use serde_json::{json, Value};

fn interop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop")
}

fn faulty(mode: &str) -> Vec<String> {
    let script = interop().join("gateway/faulty_server.py");
    vec!["python3".into(), script.display().to_string(), mode.into()]
}

/// `taskstream gateway OPTIONS -- CMD`, initialized as a 2025-11-25 client.
fn gateway(options: &[&str], cmd: &[String]) -> Server {
    let mut s = start(options, cmd);
    let init = s.initialize("2025-11-25");
    assert!(init.get("result").is_some(), "initialize: {init}");
    s
}

fn start(options: &[&str], cmd: &[String]) -> Server {
    let mut args: Vec<&str> = options.to_vec();
    if !options.contains(&"--data-dir") {
        args.extend(["--in-memory", "--durability", "none"]);
    }
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    Server::spawn_command("gateway", &args, &[])
}

/// Calls `tool` as a task; its id.
fn task(s: &mut Server, tool: &str, args: Value) -> String {
    let r = s.ok(
        "tools/call",
        json!({"name": tool, "arguments": args, "task": {"ttl": 60000}}),
    );
    r["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task in {r}"))
        .to_owned()
}

/// The task's whole stream from the start (it must end): its events' params.
fn events(s: &mut Server, task: &str) -> Vec<Value> {
    let id = s.request("tasks/stream", json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, task);
    assert!(end.get("result").is_some(), "stream ended with {end}");
    let seqs = client::seqs(&events);
    assert!(
        seqs.iter().enumerate().all(|(i, s)| *s == i as u64),
        "seqs from 0, gap-free: {seqs:?}"
    );
    events
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect()
}

fn status_message(s: &mut Server, task: &str) -> String {
    let t = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(t["status"], "failed", "{t}");
    t["statusMessage"].as_str().unwrap_or_default().to_owned()
}

const STATUS: &str = "dev.taskstream.task.status";
const PROGRESS: &str = "dev.taskstream.progress";
const LOG: &str = "dev.taskstream.log";

#[test]
fn a_call_as_a_task_records_progress_and_log_then_the_result() {
    let mut s = gateway(&[], &faulty("ok"));
    let list = s.ok("tools/list", json!({}));
    assert_eq!(list["tools"][0]["name"], "work");
    assert_eq!(list["tools"][0]["execution"]["taskSupport"], "optional");
    let t = task(&mut s, "work", json!({}));
    let ev = events(&mut s, &t);
    assert_eq!(types(&ev), [STATUS, PROGRESS, LOG, STATUS]);
    assert_eq!(ev[0]["payload"], json!({"status": "working"}));
    assert_eq!(ev[1]["payload"], json!({"progress": 1.0, "total": 1.0}));
    assert_eq!(
        ev[2]["payload"],
        json!({"level": "info", "logger": "work", "data": "working"})
    );
    assert_eq!(ev[3]["payload"]["status"], "completed");
    let r = s.ok("tasks/result", json!({"taskId": t}));
    assert_eq!(r["content"][0]["text"], "done");
    // A plain call with the client's own progress token: CMD's progress reaches the client.
    let id = s.request(
        "tools/call",
        json!({"name": "work", "arguments": {}, "_meta": {"progressToken": "mine"}}),
    );
    let p = s.recv("progress", |v| v["method"] == "notifications/progress");
    assert_eq!(p["params"]["progressToken"], "mine");
    assert_eq!(p["params"]["progress"], 1.0);
    assert_eq!(s.response(id)["result"]["content"][0]["text"], "done");
    // A 2026-07-28 client is served too: a task through the Tasks extension, results dressed
    // for its era.
    let mut m = start(&[], &faulty("ok"));
    let list = m.ok("tools/list", modern(json!({}), true));
    assert_eq!(list["resultType"], "complete");
    let created = m.ok(
        "tools/call",
        modern(json!({"name": "work", "arguments": {}}), true),
    );
    assert_eq!(created["resultType"], "task", "{created}");
    let t = created["taskId"].as_str().expect("taskId").to_owned();
    let id = m.request("tasks/stream", modern(json!({"taskId": t}), true));
    let (ev, end) = m.collect_stream(id, &t);
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(types(&ev), [STATUS, PROGRESS, LOG, STATUS]);
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(got["result"]["content"][0]["text"], "done");
}

#[test]
fn a_request_cmd_makes_of_its_client_is_relayed_to_the_connected_client() {
    let mut s = gateway(&[], &faulty("ask"));
    let t = task(&mut s, "work", json!({}));
    let ask = s.recv("the relayed request", |v| {
        v["method"] == "sampling/createMessage"
    });
    assert_eq!(ask["params"]["messages"][0]["content"]["text"], "hello?");
    s.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}));
    let r = s.ok("tasks/result", json!({"taskId": t}));
    assert_eq!(r["content"][0]["text"], "client said: hi");
    // The client's error answer goes back to CMD as it is.
    let id = s.request("tools/call", json!({"name": "work", "arguments": {}}));
    let ask = s.recv("the relayed request", |v| {
        v["method"] == "sampling/createMessage"
    });
    s.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32601, "message": "no sampling here"}}));
    assert_eq!(
        s.response(id)["result"]["content"][0]["text"],
        "client refused: no sampling here"
    );
}

#[test]
fn a_request_cmd_makes_with_no_client_to_ask_gets_a_clear_error() {
    // A 2026-07-28 plain call has no session to ask on: the request is refused, saying why.
    let mut m = start(&[], &faulty("ask"));
    let r = m.ok(
        "tools/call",
        modern(json!({"name": "work", "arguments": {}}), false),
    );
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("client refused: the client of this call cannot be asked"),
        "{text}"
    );
}

/// A 2026-07-28 task through the Tasks extension: created, its id.
fn modern_task(m: &mut Server) -> String {
    let created = m.ok(
        "tools/call",
        modern(json!({"name": "work", "arguments": {}}), true),
    );
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().expect("taskId").to_owned()
}

/// Waits on a `tasks/stream` of `task` for the status event saying `status`; its params.
fn wait_status(m: &mut Server, task: &str, status: &str) -> Value {
    m.recv(&format!("the {status} status event"), |v| {
        v["method"] == "notifications/tasks/event"
            && v["params"]["taskId"] == task
            && v["params"]["type"] == STATUS
            && v["params"]["payload"]["status"] == status
    })["params"]
        .clone()
}

/// The statuses on `task`'s stream `id` (to its end), with the events `seen` already taken
/// from it; the stream is checked gap-free from seq 0.
fn statuses(m: &mut Server, id: i64, task: &str, seen: Vec<Value>) -> Vec<String> {
    let (mut ev, end) = m.collect_stream(id, task);
    assert!(end.get("result").is_some(), "{end}");
    ev.extend(seen);
    ev.sort_by_key(|e| e["seq"].as_u64());
    let seqs = client::seqs(&ev);
    assert_eq!(seqs, (0..ev.len() as u64).collect::<Vec<_>>(), "gap-free");
    ev.iter()
        .filter(|e| e["type"] == STATUS)
        .map(|e| {
            e["payload"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_request_cmd_makes_in_a_modern_task_makes_it_input_required_until_tasks_update() {
    // SEP-2663 has no server-to-client requests: the task waits for input, `tasks/get` shows
    // the request under `inputRequests`, and `tasks/update` answers it.
    let mut m = start(&[], &faulty("ask"));
    let t = modern_task(&mut m);
    let stream = m.request("tasks/stream", modern(json!({"taskId": t}), true));
    let asked = wait_status(&mut m, &t, "input_required");
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(got["status"], "input_required", "{got}");
    let requests = got["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{got}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "hello?"
    );
    // A key of no waiting request is ignored; a response that is not an object is refused.
    let unknown = json!({"taskId": t, "inputResponses": {"input-none": {"x": 1}}});
    assert_eq!(
        m.ok("tasks/update", modern(unknown, true))["resultType"],
        "complete"
    );
    let bad = json!({"taskId": t, "inputResponses": {key.clone(): 5}});
    assert_eq!(m.error_code("tasks/update", modern(bad, true)), -32602);
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(got["status"], "input_required", "still waiting: {got}");
    let answer = json!({"taskId": t, "inputResponses": {key.clone(): {
        "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}});
    m.ok("tasks/update", modern(answer, true));
    assert_eq!(
        statuses(&mut m, stream, &t, vec![asked]),
        ["working", "input_required", "working", "completed"]
    );
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(got["status"], "completed", "{got}");
    assert!(got.get("inputRequests").is_none(), "{got}");
    assert_eq!(got["result"]["content"][0]["text"], "client said: hi");
}

#[test]
fn a_modern_task_waiting_for_input_can_be_cancelled_or_time_out() {
    let mut m = start(&["--input-timeout", "1"], &faulty("ask"));
    // Unanswered within --input-timeout: CMD is told so, and the task goes on.
    let t = modern_task(&mut m);
    let stream = m.request("tasks/stream", modern(json!({"taskId": t}), true));
    assert_eq!(
        statuses(&mut m, stream, &t, Vec::new()),
        ["working", "input_required", "working", "completed"]
    );
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(
        got["result"]["content"][0]["text"],
        "client refused: the client did not answer sampling/createMessage within 1 s"
    );
    // Cancelled while waiting: the task ends cancelled and its request is gone.
    let mut m = start(&[], &faulty("ask"));
    let t = modern_task(&mut m);
    m.request("tasks/stream", modern(json!({"taskId": t}), true));
    wait_status(&mut m, &t, "input_required");
    m.ok("tasks/cancel", modern(json!({"taskId": t}), true));
    wait_status(&mut m, &t, "cancelled");
    let got = m.ok("tasks/get", modern(json!({"taskId": t}), true));
    assert_eq!(got["status"], "cancelled", "{got}");
    assert!(got.get("inputRequests").is_none(), "{got}");
    // The gateway serves on: a second task asks again.
    let t2 = modern_task(&mut m);
    m.request("tasks/stream", modern(json!({"taskId": t2}), true));
    wait_status(&mut m, &t2, "input_required");
}

#[test]
fn garbage_on_stdout_is_dropped_and_the_call_completes() {
    let mut s = gateway(&[], &faulty("garbage"));
    let t = task(&mut s, "work", json!({}));
    assert_eq!(types(&events(&mut s, &t)), [STATUS, PROGRESS, LOG, STATUS]);
    s.wait_stderr("not JSON-RPC messages");
    s.ok("ping", json!({}));
}

#[test]
fn a_cmd_that_never_answers_initialize_is_a_clear_error_at_start() {
    let mut s = start(&["--inner-timeout", "1"], &faulty("silent"));
    let line = s.wait_stderr("did not initialize");
    assert!(line.contains("within 1 s"), "{line}");
    assert!(!s.wait_exit().success());
}

#[test]
fn a_cmd_that_exits_at_start_is_a_clear_error() {
    let mut s = start(&[], &faulty("exit"));
    let line = s.wait_stderr("did not initialize");
    assert!(
        line.contains("exited before answering initialize"),
        "{line}"
    );
    assert!(line.contains("exit status: 5"), "{line}");
    assert!(!s.wait_exit().success());
}

#[test]
fn a_call_cmd_never_answers_is_cancelled_through_to_cmd() {
    let mut s = gateway(&[], &faulty("hang"));
    let t = task(&mut s, "work", json!({}));
    let id = s.request("tasks/stream", json!({"taskId": t}));
    s.recv("the progress event", |v| v["params"]["type"] == PROGRESS);
    let c = s.ok("tasks/cancel", json!({"taskId": t}));
    assert_eq!(c["status"], "cancelled");
    let end = s.response(id);
    assert!(end.get("result").is_some(), "{end}");
    s.ok("ping", json!({}));
    // The gateway serves the next call while CMD still holds the cancelled one.
    let t2 = task(&mut s, "work", json!({}));
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": t2}))["status"],
        "working"
    );
}

#[test]
fn a_passed_on_request_cmd_never_answers_is_an_error_after_the_inner_timeout() {
    let mut s = gateway(&["--inner-timeout", "1"], &faulty("hang"));
    let r = s.call("resources/list", json!({}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let m = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("did not answer resources/list within 1 s"),
        "{m}"
    );
    s.ok("ping", json!({}));
}

#[test]
fn a_second_answer_is_dropped() {
    let mut s = gateway(&[], &faulty("twice"));
    for _ in 0..2 {
        let t = task(&mut s, "work", json!({}));
        assert_eq!(types(&events(&mut s, &t)), [STATUS, PROGRESS, LOG, STATUS]);
        let r = s.ok("tasks/result", json!({"taskId": t}));
        assert_eq!(r["content"][0]["text"], "done");
    }
    s.wait_stderr("a second answer");
}

#[test]
fn notifications_and_answers_for_calls_that_do_not_exist_are_dropped() {
    let mut s = gateway(&[], &faulty("stray"));
    let t = task(&mut s, "work", json!({}));
    let ev = events(&mut s, &t);
    assert_eq!(types(&ev), [STATUS, PROGRESS, LOG, STATUS]);
    assert_eq!(
        ev[1]["payload"]["progress"], 1.0,
        "only the call's own progress"
    );
    s.wait_stderr("which is not waiting");
}

#[test]
fn a_flood_of_notifications_is_recorded_in_full_and_the_gateway_serves_on() {
    let mut s = gateway(&["--max-events-per-task", "30000"], &faulty("flood"));
    let t = task(&mut s, "work", json!({}));
    s.ok("ping", json!({}));
    let ev = events(&mut s, &t);
    assert_eq!(
        ev.len(),
        20_000 + 4,
        "status, 20000 + 1 progress, log, status"
    );
    let progress: Vec<f64> = ev
        .iter()
        .filter(|e| e["type"] == PROGRESS)
        .filter_map(|e| e["payload"]["progress"].as_f64())
        .collect();
    assert_eq!(progress.len(), 20_001);
    assert!(progress[..20_000]
        .iter()
        .enumerate()
        .all(|(i, p)| *p == (i + 1) as f64));
}

#[test]
fn a_result_that_is_not_a_call_tool_result_fails_the_task_with_the_reason() {
    let mut s = gateway(&[], &faulty("bad-result"));
    let t = task(&mut s, "work", json!({}));
    let ev = events(&mut s, &t);
    assert_eq!(
        ev.last().map(|e| e["payload"]["status"].clone()),
        Some(json!("failed"))
    );
    let m = status_message(&mut s, &t);
    assert!(m.contains("not a valid CallToolResult"), "{m}");
    s.ok("ping", json!({}));
}

#[test]
fn cmd_dying_mid_call_fails_the_task_and_the_next_call_restarts_it() {
    let mut s = gateway(&[], &faulty("die"));
    let t = task(&mut s, "work", json!({"die": true}));
    let ev = events(&mut s, &t);
    assert_eq!(
        types(&ev),
        [STATUS, PROGRESS, STATUS],
        "the progress before it died is kept"
    );
    assert_eq!(ev[2]["payload"]["status"], "failed");
    let m = status_message(&mut s, &t);
    assert!(m.contains("exited during the call"), "{m}");
    assert!(m.contains("exit status: 3"), "{m}");
    let t2 = task(&mut s, "work", json!({}));
    assert_eq!(types(&events(&mut s, &t2)), [STATUS, PROGRESS, LOG, STATUS]);
    assert_eq!(
        s.ok("tasks/result", json!({"taskId": t2}))["content"][0]["text"],
        "done"
    );
    // A plain call that dies answers a tool error naming the reason.
    let r = s.ok(
        "tools/call",
        json!({"name": "work", "arguments": {"die": true}}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("exited during the call")));
}

#[test]
fn a_cmd_that_cannot_be_started_again_fails_the_call_and_the_gateway_serves_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("secret-marker-path");
    let mut cmd = faulty("die-once");
    cmd.push(marker.display().to_string());
    let mut s = gateway(&[], &cmd);
    let t = task(&mut s, "work", json!({"die": true}));
    events(&mut s, &t);
    let t2 = task(&mut s, "work", json!({}));
    assert_eq!(types(&events(&mut s, &t2)), [STATUS, STATUS]);
    let m = status_message(&mut s, &t2);
    assert!(m.contains("could not be started again"), "{m}");
    assert!(
        !m.contains("secret") && !m.contains("python"),
        "nothing of the host: {m}"
    );
    s.wait_stderr("did not initialize");
    let r = s.call("resources/list", json!({}));
    assert!(r["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("could not be started again")));
    s.ok("ping", json!({}));
}

#[test]
fn a_gateway_killed_mid_call_loses_no_received_event_and_the_task_ends_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    let mut s = gateway(&["--data-dir", data], &faulty("hang"));
    let t = task(&mut s, "work", json!({}));
    let id = s.request("tasks/stream", json!({"taskId": t}));
    let received: Vec<Value> = (0..2)
        .map(|_| {
            s.recv("an event", |v| v["method"] == "notifications/tasks/event")["params"].clone()
        })
        .collect();
    let _ = id;
    s.kill();
    let mut s = gateway(&["--data-dir", data], &faulty("hang"));
    let ev = events(&mut s, &t);
    assert_eq!(
        &ev[..2],
        &received[..],
        "every event the client received is still there"
    );
    assert_eq!(types(&ev), [STATUS, PROGRESS, STATUS]);
    assert_eq!(ev[2]["payload"]["status"], "failed");
    assert_eq!(s.ok("tasks/get", json!({"taskId": t}))["status"], "failed");
}

// --- servers we did not write (installed by scripts/gateway) -------------------------------

fn fastmcp() -> Vec<String> {
    vec![
        interop().join(".venv/bin/python").display().to_string(),
        interop()
            .join("gateway/fastmcp_server.py")
            .display()
            .to_string(),
    ]
}

fn everything() -> Vec<String> {
    vec![
        "node".into(),
        interop()
            .join("gateway/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display()
            .to_string(),
        "stdio".into(),
    ]
}

#[test]
#[ignore = "needs the Python SDK that scripts/gateway installs"]
fn fastmcp_progress_and_logs_become_a_resumable_stream() {
    let mut s = gateway(&[], &fastmcp());
    let t = task(&mut s, "count", json!({"n": 5, "delay_ms": 20}));
    // Follow part of it, cut, resume with `after`.
    let id = s.request("tasks/stream", json!({"taskId": t}));
    let first: Vec<Value> = (0..3)
        .map(|_| {
            s.recv("an event", |v| {
                v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == t
            })["params"]
                .clone()
        })
        .collect();
    s.cancel(id);
    let last = first[2]["seq"].as_u64().expect("seq");
    let rid = s.request("tasks/stream", json!({"taskId": t, "after": last}));
    let (rest, end) = s.collect_stream(rid, &t);
    assert!(end.get("result").is_some(), "{end}");
    assert_eq!(rest.first().and_then(|e| e["seq"].as_u64()), Some(last + 1));
    let all: Vec<Value> = first.into_iter().chain(rest).collect();
    let ty = types(&all);
    assert_eq!(ty.iter().filter(|t| **t == PROGRESS).count(), 5, "{ty:?}");
    assert_eq!(ty.iter().filter(|t| **t == LOG).count(), 5, "{ty:?}");
    let p5 = all
        .iter()
        .rfind(|e| e["type"] == PROGRESS)
        .expect("progress");
    assert_eq!(
        p5["payload"],
        json!({"progress": 5.0, "total": 5.0, "message": "step 5 of 5"})
    );
    let l1 = all.iter().find(|e| e["type"] == LOG).expect("log");
    assert_eq!(l1["payload"]["level"], "info");
    assert_eq!(l1["payload"]["data"], "step 1");
    let r = s.ok("tasks/result", json!({"taskId": t}));
    assert_eq!(r["content"][0]["text"], "counted to 5");
    // Other requests are passed on, in both eras.
    let note = s.ok("resources/read", json!({"uri": "note://hello"}));
    assert_eq!(note["contents"][0]["text"], "hello from the inner server");
    let p = s.ok(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert!(p["messages"][0]["content"]["text"]
        .as_str()
        .is_some_and(|t| t.contains("Ada")));
    let mut modern_client = start(&[], &fastmcp());
    let m = modern_client.ok("resources/list", modern(json!({}), false));
    assert_eq!(m["resultType"], "complete");
    assert_eq!(m["resources"][0]["uri"], "note://hello");
    // A tool that raises: a tool error, so the legacy task fails.
    let f = task(&mut s, "fail", json!({}));
    let ev = events(&mut s, &f);
    assert_eq!(
        ev.last().map(|e| e["payload"]["status"].clone()),
        Some(json!("failed"))
    );
}

#[test]
#[ignore = "needs the Python SDK that scripts/gateway installs"]
fn fastmcp_cancel_reaches_the_inner_call() {
    let mut s = gateway(&[], &fastmcp());
    let t = task(&mut s, "wait", json!({}));
    let id = s.request("tasks/stream", json!({"taskId": t}));
    s.recv("the waiting progress", |v| v["params"]["type"] == PROGRESS);
    assert_eq!(
        s.ok("tasks/cancel", json!({"taskId": t}))["status"],
        "cancelled"
    );
    assert!(s.response(id).get("result").is_some());
    let t2 = task(&mut s, "count", json!({"n": 1}));
    assert_eq!(types(&events(&mut s, &t2)), [STATUS, LOG, PROGRESS, STATUS]);
}

#[test]
#[ignore = "needs server-everything, which scripts/gateway installs"]
fn server_everything_long_running_operation_gets_a_resumable_stream() {
    let mut s = gateway(&[], &everything());
    let tools = s.ok("tools/list", json!({}));
    assert!(tools["tools"].as_array().is_some_and(|t| t
        .iter()
        .any(|t| t["name"] == "trigger-long-running-operation")));
    let t = task(
        &mut s,
        "trigger-long-running-operation",
        json!({"duration": 1, "steps": 4}),
    );
    let id = s.request("tasks/stream", json!({"taskId": t}));
    let first = s.recv("the first progress", |v| v["params"]["type"] == PROGRESS)["params"].clone();
    s.cancel(id);
    let after = first["seq"].as_u64().expect("seq");
    let rid = s.request("tasks/stream", json!({"taskId": t, "after": after}));
    let (rest, end) = s.collect_stream(rid, &t);
    assert!(end.get("result").is_some(), "{end}");
    let progress: Vec<&Value> = std::iter::once(&first)
        .chain(rest.iter())
        .filter(|e| e["type"] == PROGRESS)
        .map(|e| &e["payload"])
        .collect();
    assert_eq!(
        progress,
        (1..=4)
            .map(|i| json!({"progress": f64::from(i), "total": 4.0}))
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
    let r = s.ok("tasks/result", json!({"taskId": t}));
    assert!(r["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("Long running operation completed")));
    let prompts = s.ok("prompts/list", json!({}));
    assert!(prompts["prompts"].as_array().is_some_and(|p| !p.is_empty()));
}
