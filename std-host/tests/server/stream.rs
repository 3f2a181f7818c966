//! `tasks/stream`: every rule of SEP-2694 the server must keep, by the IDs of `docs/specification/requirements.md`.

use std::time::Duration;

use serde_json::{json, Value};

use super::client::{modern, seqs, Server};

fn start(s: &mut Server, args: Value) -> String {
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": args, "task": {}}),
    );
    r["task"]["taskId"].as_str().expect("taskId").to_owned()
}

/// Waits (via tasks/result) until a legacy task is terminal.
fn finish(s: &mut Server, task: &str) {
    s.call("tasks/result", json!({"taskId": task}));
}

fn stream(s: &mut Server, params: Value) -> i64 {
    s.request("tasks/stream", params)
}

/// EV-01, EV-02, EV-03, EV-04, EV-05, NT-01, NT-02 on a collected stream of `task`.
#[track_caller]
fn check_envelopes(events: &[Value], task: &str) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["taskId"], task, "NT-02");
        assert_eq!(
            e["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
            "EV-01 / NT-01"
        );
        assert!(e["payload"].is_object(), "EV-05");
        let ty = e["type"].as_str().expect("type");
        assert!(ty.starts_with("dev.taskstream."), "EV-07: {ty}");
        if i > 0 {
            assert_eq!(
                e["seq"].as_u64(),
                events[i - 1]["seq"].as_u64().map(|s| s + 1),
                "EV-03 / EV-04"
            );
        }
    }
}

#[test]
fn ts03_legacy_full_stream_then_empty_result() {
    // TS-03, RS-05, EV-02, DX-01 (legacy {}); status events first and last (RL-01).
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 3, "payload_bytes": 4}));
    finish(&mut s, &task);
    let id = stream(&mut s, json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"], json!({}), "DX-01");
    assert_eq!(seqs(&events), [0, 1, 2, 3, 4], "EV-02, EV-03");
    check_envelopes(&events, &task);
    assert_eq!(events[0]["type"], "dev.taskstream.task.status");
    assert_eq!(events[0]["payload"], json!({"status": "working"}));
    assert_eq!(events[1]["type"], "dev.taskstream.tick");
    assert_eq!(events[1]["payload"], json!({"i": 0, "data": "xxxx"}));
    assert_eq!(events[3]["payload"]["i"], 2);
    assert_eq!(events[4]["payload"]["status"], "completed");
}

#[test]
fn ts03_modern_task_streamed_live_then_complete() {
    // Modern era end to end: CreateTaskResult, live stream, {"resultType":"complete"} (DX-01).
    let mut s = Server::in_memory(&[]);
    let r = s.ok(
        "tools/call",
        modern(
            json!({"name": "emit", "arguments": {"count": 4, "interval_ms": 20}}),
            true,
        ),
    );
    let task = r["taskId"].as_str().expect("id").to_owned();
    let id = stream(&mut s, modern(json!({"taskId": task}), true));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(seqs(&events), [0, 1, 2, 3, 4, 5]);
    check_envelopes(&events, &task);
    let g = s.ok("tasks/get", modern(json!({"taskId": task}), true));
    assert_eq!(
        g["status"], "completed",
        "RL-01: consistent with the last status event"
    );
}

#[test]
fn run_trace_task_streams_every_trace_event() {
    let mut s = Server::legacy(&[]);
    let l = s.ok("tools/list", json!({}));
    let name = l["tools"][1]["inputSchema"]["properties"]["name"]["enum"][0]
        .as_str()
        .expect("trace")
        .to_owned();
    let r = s.ok(
        "tools/call",
        json!({"name": "run_trace", "arguments": {"name": name, "speed": 100000}, "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("id").to_owned();
    let id = stream(&mut s, json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"], json!({}));
    assert!(events.len() > 2);
    check_envelopes(&events, &task);
    assert_eq!(events[0]["seq"], 0);
    let last = &events[events.len() - 1];
    assert_eq!(last["type"], "dev.taskstream.task.status");
    assert!(matches!(
        last["payload"]["status"].as_str(),
        Some("completed" | "failed")
    ));
}

#[test]
fn dx07_replay_precedes_live_events_without_gaps() {
    // RS-05 then live; DX-07: no interleaving; EV-04.
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 20, "interval_ms": 10}));
    // Let some events be retained before the stream opens.
    let g = loop {
        let g = s.ok("tasks/get", json!({"taskId": task}));
        if g["_meta"]["dev.taskstream/events"]["nextSeq"].as_u64() >= Some(3) {
            break g;
        }
    };
    assert_eq!(g["status"], "working");
    let id = stream(&mut s, json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"], json!({}));
    assert_eq!(seqs(&events), (0..22).collect::<Vec<u64>>());
}

#[test]
fn rs03_after_resumes_exclusively() {
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 5}));
    finish(&mut s, &task);
    let id = stream(&mut s, json!({"taskId": task, "after": 3}));
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(seqs(&events), [4, 5, 6]);
    assert_eq!(end["result"], json!({}));
    // after = 0 is valid and replays from seq 1.
    let id = stream(&mut s, json!({"taskId": task, "after": 0}));
    let (events, _) = s.collect_stream(id, &task);
    assert_eq!(events.first().map(|e| e["seq"].clone()), Some(json!(1)));
}

#[test]
fn rs04_caught_up_terminal_task_completes_at_once() {
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 2}));
    finish(&mut s, &task);
    // Last seq is 3: nothing after it and the task is terminal.
    let id = stream(&mut s, json!({"taskId": task, "after": 3}));
    let (events, end) = s.collect_stream(id, &task);
    assert!(events.is_empty(), "RS-04: no notifications");
    assert_eq!(end["result"], json!({}));
}

#[test]
fn rs04_live_after_the_last_event_of_a_running_task() {
    // after = last seq of a running task: no replay, live events follow (RS-03a).
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 3, "interval_ms": 100}));
    let id = stream(&mut s, json!({"taskId": task, "after": 0}));
    let (events, _) = s.collect_stream(id, &task);
    assert_eq!(seqs(&events), [1, 2, 3, 4]);
}

#[test]
fn rs01_rs02_invalid_after_is_invalid_params() {
    // RS-01, RS-02, A-01, A-02.
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 1}));
    finish(&mut s, &task);
    for (n, after) in [
        "-1",
        "1.5",
        "1.0",
        "1e2",
        "\"1\"",
        "null",
        "true",
        "9007199254740992",
        "-0",
        "3",
        "99999999999999999999",
    ]
    .into_iter()
    .enumerate()
    {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"a{n}","method":"tasks/stream","params":{{"taskId":"{task}","after":{after}}}}}"#
        );
        s.send_raw(&line);
        let r = s.recv("answer", |v| v["id"] == format!("a{n}").as_str());
        assert_eq!(r["error"]["code"], -32602, "after = {after}: {r}");
    }
    // 2 is the last assigned seq: valid.
    let id = stream(&mut s, json!({"taskId": task, "after": 2}));
    assert_eq!(s.response(id)["result"], json!({}));
}

#[test]
fn dx02_unknown_task_is_invalid_params() {
    let mut s = Server::legacy(&[]);
    for task in ["f".repeat(32), "nope".to_owned(), String::new()] {
        let r = s.call("tasks/stream", json!({"taskId": task}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    assert_eq!(s.error_code("tasks/stream", json!({})), -32602);
    assert_eq!(s.error_code("tasks/stream", json!({"taskId": 7})), -32602);
}

#[test]
fn eg01_events_gone_under_a_small_retention() {
    // RS-03b, RT-04, EG-01, EG-02.
    let mut s = Server::legacy(&["--max-events-per-task", "5"]);
    let task = start(&mut s, json!({"count": 20}));
    finish(&mut s, &task);
    // 22 events (seq 0..=21); the last 5 are retained: earliest 17.
    let r = s.call("tasks/stream", json!({"taskId": task, "after": 3}));
    assert_eq!(
        r["error"],
        json!({"code": -32010, "message": "Task events are no longer available",
               "data": {"reason": "events_gone", "taskId": task, "earliestSeq": 17}})
    );
    // EG-02: after = earliestSeq - 1 is gap-free.
    let id = stream(&mut s, json!({"taskId": task, "after": 16}));
    let (events, _) = s.collect_stream(id, &task);
    assert_eq!(seqs(&events), [17, 18, 19, 20, 21]);
    // RS-05: without after, from the earliest retained event.
    let id = stream(&mut s, json!({"taskId": task}));
    let (events, _) = s.collect_stream(id, &task);
    assert_eq!(seqs(&events), [17, 18, 19, 20, 21]);
}

#[test]
fn rs06_nothing_retained_and_terminal_completes_at_once() {
    // Events older than --max-event-age are swept; the task itself stays retrievable.
    let mut s = Server::legacy(&["--max-event-age", "1"]);
    let task = start(&mut s, json!({"count": 1}));
    finish(&mut s, &task);
    // The sweep runs once a second; poll tasks/get until it has run (30 s at most).
    let deadline = std::time::Instant::now() + super::client::DEADLINE;
    let summary = loop {
        let g = s.ok("tasks/get", json!({"taskId": task}));
        let e = g["_meta"]["dev.taskstream/events"].clone();
        if e["earliestSeq"] == e["nextSeq"] {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "events never swept: {e}"
        );
        s.try_recv(|_| false, Duration::from_millis(100));
    };
    // A-03: nothing retained, earliestSeq is the next seq.
    assert_eq!(
        summary,
        json!({"earliestSeq": 3, "latestSeq": 2, "nextSeq": 3})
    );
    let id = stream(&mut s, json!({"taskId": task}));
    let (events, end) = s.collect_stream(id, &task);
    assert!(events.is_empty());
    assert_eq!(end["result"], json!({}));
    // A resume from before the range is events_gone (RT-04).
    let r = s.call("tasks/stream", json!({"taskId": task, "after": 0}));
    assert_eq!(r["error"]["data"]["earliestSeq"], 3);
}

#[test]
fn ts05_ts06_second_stream_for_a_task_is_refused() {
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 1000, "interval_ms": 20}));
    let first = stream(&mut s, json!({"taskId": task}));
    // Seq 1 exists, so that `after: 1` below is a valid cursor (not `cursor_ahead`).
    s.recv("event 1", |v| {
        v["params"]["taskId"] == task.as_str() && v["params"]["seq"] == 1
    });
    // Refused as stream_active even with a cursor that would be events_gone or ahead.
    for params in [json!({"taskId": task}), json!({"taskId": task, "after": 0})] {
        let r = s.call("tasks/stream", params);
        assert_eq!(r["error"]["code"], -32602);
        assert_eq!(r["error"]["data"]["reason"], "stream_active");
    }
    s.cancel(first);
    // TS-07: after cancelling, a new stream with another cursor is admitted.
    let second = stream(&mut s, json!({"taskId": task, "after": 1}));
    let e = s.recv("event of the second stream", |v| {
        v["method"] == "notifications/tasks/event" && v["params"]["seq"] == 2
    });
    assert_eq!(e["params"]["taskId"], task.as_str());
    s.cancel(second);
    s.ok("tasks/cancel", json!({"taskId": task}));
}

#[test]
fn se07_stream_limit() {
    let mut s = Server::legacy(&["--max-streams", "1"]);
    let a = start(&mut s, json!({"count": 1000, "interval_ms": 20}));
    let b = start(&mut s, json!({"count": 1000, "interval_ms": 20}));
    let first = stream(&mut s, json!({"taskId": a}));
    let r = s.call("tasks/stream", json!({"taskId": b}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["data"]["reason"], "stream_limit");
    s.cancel(first);
    s.ok("ping", json!({}));
    let second = stream(&mut s, json!({"taskId": b}));
    s.recv("event of b", |v| v["params"]["taskId"] == b.as_str());
    s.cancel(second);
}

#[test]
fn ts08_dx04_cancel_stops_delivery_but_not_the_task() {
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 10, "interval_ms": 30}));
    let id = stream(&mut s, json!({"taskId": task}));
    s.recv("first event", |v| v["params"]["taskId"] == task.as_str());
    s.cancel(id);
    // The ping is read after the cancellation: nothing of the stream may follow its answer.
    let ping = s.request("ping", json!({}));
    loop {
        let v = s.recv("ping answer", |v| {
            v["id"] == json!(ping) || v["params"]["taskId"] == task.as_str() || v["id"] == json!(id)
        });
        assert_ne!(
            v["id"],
            json!(id),
            "DX-04: no response to a cancelled stream"
        );
        if v["id"] == json!(ping) {
            break;
        }
    }
    // TS-08: the task runs on to completion.
    let r = s.call("tasks/result", json!({"taskId": task}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    s.ok("ping", json!({}));
    assert!(
        s.try_recv(
            |v| v["method"] == "notifications/tasks/event" || v["id"] == json!(id),
            Duration::ZERO
        )
        .is_none(),
        "DX-04: no event after the cancellation was read"
    );
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": task}))["status"],
        "completed"
    );
}

#[test]
fn a_stream_reopened_the_moment_its_result_arrives_is_admitted() {
    let mut s = Server::legacy(&[]);
    let task = start(&mut s, json!({"count": 3, "interval_ms": 5}));
    let id = stream(&mut s, json!({"taskId": task}));
    let (_, end) = s.collect_stream(id, &task);
    assert_eq!(end["result"], json!({}));
    let r = s.call("tasks/stream", json!({"taskId": task, "after": 4}));
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn rs07_a_slow_reader_gets_events_gone_never_a_gap() {
    // RS-07: the reader stops reading; retention overtakes its cursor; it must be told.
    let mut s = Server::legacy(&["--max-events-per-task", "10"]);
    let task = start(&mut s, json!({"count": 1, "interval_ms": 0}));
    finish(&mut s, &task);
    let big = start(
        &mut s,
        json!({"count": 3000, "interval_ms": 1, "payload_bytes": 200}),
    );
    let id = stream(&mut s, json!({"taskId": big}));
    s.pause_reading();
    // The task is never held back by the blocked stream (its thread only appends).
    s.wait_stderr(&format!("task {big} completed"));
    s.resume_reading();
    let (events, end) = s.collect_stream(id, &big);
    let got = seqs(&events);
    assert_eq!(got.first().copied(), Some(0));
    assert!(
        got.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap in what was sent"
    );
    // ~700 kB of events cannot fit a pipe: the stream must have fallen behind retention.
    let e = &end["error"];
    assert_eq!(e["code"], -32010, "{end}");
    assert_eq!(e["data"]["reason"], "events_gone");
    let earliest = e["data"]["earliestSeq"].as_u64().expect("earliestSeq");
    assert!(earliest > got.last().copied().unwrap_or(0) + 1, "{e}");
}

#[test]
fn dx03_modern_stream_needs_the_extension_and_ignores_unknown_params() {
    let mut s = Server::in_memory(&[]);
    let r = s.ok(
        "tools/call",
        modern(json!({"name": "emit", "arguments": {"count": 1}}), true),
    );
    let task = r["taskId"].as_str().expect("id").to_owned();
    let r = s.call("tasks/stream", modern(json!({"taskId": task}), false));
    assert_eq!(r["error"]["code"], -32021);
    let id = stream(
        &mut s,
        modern(json!({"taskId": task, "unknown": [1, 2]}), true),
    );
    let (events, end) = s.collect_stream(id, &task);
    assert_eq!(seqs(&events), [0, 1, 2]);
    assert_eq!(end["result"]["resultType"], "complete");
}
