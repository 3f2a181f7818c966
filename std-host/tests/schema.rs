//! The JSON Schema of the reference chapter (`docs/schema/tasks-stream.schema.json`) against
//! everything that claims to follow it: every ```json example in `docs/`, every message the
//! core's writers produce, and every `tasks/stream` message the real server sends in both eras.
//! So the chapter cannot drift from the code, nor the code from the chapter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::server::client;

use std::path::{Path, PathBuf};

use client::{modern, Server};
use serde_json::{json, Value};
use taskstream_core::rpc::{self, Era, EventNotification, Reason, RpcError};
use taskstream_core::{RequestId, ResumeError, Seq};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn schema() -> Value {
    let text =
        std::fs::read_to_string(root().join("docs/schema/tasks-stream.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A validator for the whole schema (`def = None`: exactly one message kind) or for one `$defs`
/// entry.
fn validator(def: Option<&str>) -> jsonschema::Validator {
    let mut s = schema();
    if let Some(def) = def {
        let obj = s.as_object_mut().unwrap();
        obj.remove("oneOf");
        obj.insert("$ref".into(), json!(format!("#/$defs/{def}")));
    }
    jsonschema::validator_for(&s).unwrap()
}

#[track_caller]
fn check(v: &jsonschema::Validator, what: &str, message: &Value) {
    let errors: Vec<String> = v
        .iter_errors(message)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match the schema: {errors:?}\n{message}"
    );
}

#[track_caller]
fn check_fails(v: &jsonschema::Validator, what: &str, message: &Value) {
    assert!(
        !v.is_valid(message),
        "{what} should not match the schema:\n{message}"
    );
}

/// Every fenced ```json block in the Markdown files under `dir`.
fn json_blocks(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_blocks(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut block: Option<(usize, String)> = None;
            for (n, line) in text.lines().enumerate() {
                match &mut block {
                    None if line.trim_start() == "```json" => block = Some((n + 1, String::new())),
                    Some((start, body)) if line.trim_start() == "```" => {
                        out.push((format!("{}:{start}", path.display()), std::mem::take(body)));
                        block = None;
                    }
                    Some((_, body)) => {
                        body.push_str(line);
                        body.push('\n');
                    }
                    None => {}
                }
            }
        }
    }
}

#[test]
fn every_json_example_in_the_docs_matches_the_schema() {
    let v = validator(None);
    let mut blocks = Vec::new();
    json_blocks(&root().join("docs"), &mut blocks);
    assert!(
        blocks.len() >= 10,
        "expected the chapter's examples, found {}",
        blocks.len()
    );
    for (place, text) in &blocks {
        let message: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{place}: {e}"));
        check(&v, place, &message);
    }
}

#[test]
fn the_schema_rejects_what_the_sep_forbids() {
    // So that the checks above and below can fail: each of these breaks one rule.
    let v = validator(Some("TaskEventNotification"));
    let good = json!({"jsonrpc": "2.0", "method": "notifications/tasks/event", "params": {
        "seq": 0, "taskId": "t", "type": "com.example.x.y", "payload": {},
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}});
    check(&v, "a good event", &good);
    let mut no_meta = good.clone();
    no_meta["params"].as_object_mut().unwrap().remove("_meta");
    check_fails(&v, "EV-01: no related-task meta", &no_meta);
    let mut unprefixed = good.clone();
    unprefixed["params"]["type"] = json!("task.status");
    check_fails(&v, "EV-06: unprefixed type", &unprefixed);
    let mut array_payload = good.clone();
    array_payload["params"]["payload"] = json!([1]);
    check_fails(&v, "EV-05: payload not an object", &array_payload);
    let mut negative = good;
    negative["params"]["seq"] = json!(-1);
    check_fails(&v, "a negative seq", &negative);
    let req = validator(Some("TaskStreamRequest"));
    check_fails(
        &req,
        "RS-01: a fractional after",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/stream", "params": {"taskId": "t", "after": 1.5}}),
    );
}

/// The `events_gone` error's shape is the SEP's, but its message is human-readable: the schema
/// pins the code and the data, never the text (clients key on `data.reason`).
#[test]
fn the_schema_pins_the_events_gone_code_and_data_but_not_its_text() {
    let v = validator(Some("EventsGoneError"));
    let gone = |code: i64, message: &str| {
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": code, "message": message,
               "data": {"reason": "events_gone", "taskId": "t", "earliestSeq": 4}}})
    };
    check(
        &v,
        "the SEP's text",
        &gone(-32010, "Task events are no longer available"),
    );
    check(
        &v,
        "another text",
        &gone(-32010, "Die Ereignisse sind nicht mehr verfügbar"),
    );
    check_fails(
        &v,
        "another code",
        &gone(-32602, "Task events are no longer available"),
    );
}

#[test]
fn every_message_the_core_writes_matches_the_schema() {
    let mut buf = vec![0u8; 4096];
    let mut write = |f: &dyn Fn(&mut [u8]) -> usize| -> Value {
        let n = f(&mut buf);
        serde_json::from_slice(&buf[..n]).unwrap()
    };
    let task = "0123456789abcdef0123456789abcdef";
    let event = write(&|b| {
        rpc::write_event(
            &EventNotification {
                task_id: task,
                seq: Seq::new(42).unwrap(),
                event_type: "dev.taskstream.tick",
                payload: br#"{"i":1,"data":"a\"b\n"}"#,
            },
            b,
        )
        .unwrap()
    });
    check(
        &validator(Some("TaskEventNotification")),
        "core event",
        &event,
    );
    for (id, era) in [
        (RequestId::Number(7), Era::Legacy),
        (RequestId::try_from_str("s-1").unwrap(), Era::Modern),
    ] {
        let result = write(&|b| rpc::write_stream_result(&id, era, b).unwrap());
        check(
            &validator(Some("TaskStreamResponse")),
            "core result",
            &result,
        );
    }
    let id = RequestId::Number(9);
    let gone = write(&|b| {
        let e = RpcError::from_resume(
            ResumeError::EventsGone {
                earliest: Seq::new(100).unwrap(),
            },
            task,
        );
        rpc::write_error(Some(&id), &e, b).unwrap()
    });
    check(
        &validator(Some("EventsGoneError")),
        "core events_gone",
        &gone,
    );
    for e in [
        RpcError::STREAM_ACTIVE,
        RpcError::STREAM_LIMIT,
        RpcError::UNKNOWN_TASK,
    ] {
        let err = write(&|b| rpc::write_error(Some(&id), &e, b).unwrap());
        check(
            &validator(Some("InvalidParamsError")),
            "core invalid params",
            &err,
        );
    }
    let ahead = write(&|b| {
        let e = RpcError::from_resume(
            ResumeError::CursorAhead {
                after: Seq::new(5).unwrap(),
                next: Seq::new(3).unwrap(),
            },
            task,
        );
        rpc::write_error(Some(&id), &e, b).unwrap()
    });
    check(
        &validator(Some("InvalidParamsError")),
        "core cursor ahead",
        &ahead,
    );
    let _ = Reason::StreamActive;
}

/// Sends `tasks/stream` and returns every message up to and including its answer.
fn stream_messages(s: &mut Server, params: Value, task: &str) -> Vec<Value> {
    let id = s.request("tasks/stream", params);
    s.stream_messages(id, task)
}

#[test]
fn every_stream_message_the_server_sends_matches_the_schema_in_both_eras() {
    let v = validator(None);
    let mut seen = 0;
    for legacy in [false, true] {
        let mut s = if legacy {
            Server::legacy(&["--max-events-per-task", "4"])
        } else {
            Server::in_memory(&["--max-events-per-task", "4"])
        };
        let wrap = |p: Value, tasks: bool| if legacy { p } else { modern(p, tasks) };
        let mut call = json!({"name": "emit", "arguments": {"count": 6, "payload_bytes": 40}});
        if legacy {
            call["task"] = json!({"ttl": 60000});
        }
        let created = s.ok("tools/call", wrap(call, true));
        let task = if legacy {
            created["task"]["taskId"].clone()
        } else {
            created["taskId"].clone()
        };
        let task = task.as_str().unwrap().to_owned();
        // Wait (bounded) until the task is terminal, so the messages below are deterministic.
        let deadline = std::time::Instant::now() + client::DEADLINE;
        while s.ok("tasks/get", wrap(json!({"taskId": task}), true))["status"] == "working" {
            assert!(std::time::Instant::now() < deadline, "the task never ended");
            let _ = s.try_recv(|_| false, std::time::Duration::from_millis(20));
        }
        let mut messages = Vec::new();
        // Replay of what is retained, then the result (TS-03).
        messages.extend(stream_messages(
            &mut s,
            wrap(json!({"taskId": task}), true),
            &task,
        ));
        // Caught up on a terminal task: the result at once (RS-04).
        messages.extend(stream_messages(
            &mut s,
            wrap(json!({"taskId": task, "after": 7}), true),
            &task,
        ));
        // events_gone (EG-01), a bad cursor and an unknown task (-32602).
        for params in [
            json!({"taskId": task, "after": 0}),
            json!({"taskId": task, "after": -1}),
            json!({"taskId": "nope"}),
        ] {
            messages.extend(stream_messages(&mut s, wrap(params, true), &task));
        }
        assert!(
            messages.iter().any(|m| m["error"]["code"] == -32010),
            "no events_gone seen"
        );
        assert!(
            messages
                .iter()
                .filter(|m| m["method"] == "notifications/tasks/event")
                .count()
                >= 4
        );
        if !legacy {
            // The Tasks extension not declared: -32021.
            messages.extend(stream_messages(
                &mut s,
                modern(json!({"taskId": task}), false),
                &task,
            ));
            assert_eq!(messages.last().unwrap()["error"]["code"], -32021);
        }
        for m in &messages {
            check(
                &v,
                if legacy {
                    "legacy server message"
                } else {
                    "modern server message"
                },
                m,
            );
        }
        seen += messages.len();
    }
    assert!(seen >= 16, "too few messages checked: {seen}");
}
