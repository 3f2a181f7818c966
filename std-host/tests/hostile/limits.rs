//! The limits of SEP-2694 "Security Implications" (SE-07), each enforced through the real
//! binary: concurrent streams per client, payload size, retention duration (event age and
//! terminal retention), events retained per task, resume attempts (failed lookups), and the
//! work a connection may run at once.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::check::{
    assert_healthy, assert_intact, log_barrier, start_emit, stream_all, wait_terminal,
};
use super::client::{modern, Server, DEADLINE};

/// Polls `probe` (a request whose answer is checked by `done`) until `done` holds, with a
/// deadline. Each poll is a request, so this waits on the server's own answers.
#[track_caller]
fn poll_until(
    s: &mut Server,
    what: &str,
    mut probe: impl FnMut(&mut Server) -> Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + DEADLINE;
    loop {
        let v = probe(s);
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < end, "{what}: still {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn se07_concurrent_streams_per_connection() {
    let mut s = Server::legacy(&["--max-streams", "2"]);
    let tasks: Vec<_> = (0..3).map(|_| start_emit(&mut s, 20, 50, 0)).collect();
    let first = s.request("tasks/stream", json!({"taskId": tasks[0].task}));
    let second = s.request("tasks/stream", json!({"taskId": tasks[1].task}));
    let e = s.err("tasks/stream", json!({"taskId": tasks[2].task}));
    assert_eq!(e["code"], json!(-32602));
    assert_eq!(e["data"]["reason"], json!("stream_limit"));
    // Cancelling one frees its slot.
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": first}}),
    );
    let (events, end) = stream_all(&mut s, json!({"taskId": tasks[2].task}));
    assert_eq!(end["result"], json!({}), "{end}");
    assert_eq!(events.len(), 22);
    // The second stream ran to its end meanwhile (its events are in the backlog).
    let mut n = 0;
    loop {
        let l = s.recv_line("the second stream", |v| {
            v["params"]["taskId"] == json!(tasks[1].task) || v["id"] == json!(second)
        });
        if l.v["id"] == json!(second) {
            break;
        }
        n += usize::from(l.v["method"] == "notifications/tasks/event");
    }
    assert_eq!(n, 22);
    assert_healthy(&mut s, &tasks);
}

/// RS-04 / RS-06 at the stream limit: a request that needs no stream needs no slot, in both
/// eras; one that needs a stream is still refused.
#[test]
fn at_the_stream_limit_a_finished_task_at_its_last_seq_gets_the_empty_result() {
    let mut s = Server::in_memory(&["--max-streams", "1"]);
    for era in ["modern", "legacy"] {
        let p = |params: Value| {
            if era == "modern" {
                modern(params, true)
            } else {
                params
            }
        };
        if era == "legacy" {
            s.initialize("2025-11-25");
        }
        let created = |s: &mut Server, count: u64, interval: u64| -> String {
            let mut params =
                json!({"name": "emit", "arguments": {"count": count, "interval_ms": interval}});
            if era == "legacy" {
                params["task"] = json!({});
            }
            let r = s.ok("tools/call", p(params));
            r["taskId"]
                .as_str()
                .or_else(|| r["task"]["taskId"].as_str())
                .expect("taskId")
                .to_owned()
        };
        let done = created(&mut s, 2, 0);
        let long = created(&mut s, 1000, 50);
        poll_until(
            &mut s,
            "the short task to end",
            |s| s.ok("tasks/get", p(json!({"taskId": done}))),
            |r| r["status"] == json!("completed"),
        );
        let open = s.request("tasks/stream", p(json!({"taskId": long})));
        // The only slot is taken. The finished task's last seq is 3 (working, 2 events,
        // completed): nothing to send, so the result comes at once, with no event.
        let id = s.request("tasks/stream", p(json!({"taskId": done, "after": 3})));
        let l = s.recv_line("the empty result", |v| v["id"] == json!(id));
        let want = if era == "modern" {
            json!({"resultType": "complete"})
        } else {
            json!({})
        };
        assert_eq!(l.v["result"], want, "{era}: {}", l.raw);
        // A stream that would deliver something still needs the slot.
        let e = s.err("tasks/stream", p(json!({"taskId": done, "after": 0})));
        assert_eq!(e["data"]["reason"], json!("stream_limit"), "{era}: {e}");
        s.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": open}}),
        );
        s.ok("tasks/cancel", p(json!({"taskId": long})));
    }
}

#[test]
fn se07_payload_size() {
    let mut s = Server::legacy(&["--max-payload-bytes", "200"]);
    // {"i":0,"data":"…"} is 17 bytes plus the data: 183 bytes of data is exactly the limit.
    let fits = start_emit(&mut s, 3, 0, 183);
    wait_terminal(&mut s, &fits.task);
    let (events, _) = stream_all(&mut s, json!({"taskId": fits.task}));
    let largest = events
        .iter()
        .map(|e| e["payload"].to_string().len())
        .max()
        .expect("events");
    assert_eq!(largest, 200);
    assert_intact(&mut s, &fits);
    // One byte more is refused before anything runs, plainly and as a task.
    for task in [json!({}), Value::Null] {
        let mut params = json!({"name": "emit", "arguments": {"count": 3, "payload_bytes": 184}});
        if task.is_object() {
            params["task"] = task;
        }
        let r = s.ok("tools/call", params);
        assert_eq!(r["isError"], json!(true), "{r}");
        let text = r["content"][0]["text"].as_str().expect("text");
        assert!(text.contains("--max-payload-bytes"), "{text}");
    }
    // A workload whose events are larger (a trace) fails at the first one: nothing over the
    // limit is stored or sent.
    let mut s = Server::legacy(&["--max-payload-bytes", "64"]);
    let r = s.ok(
        "tools/call",
        json!({"name": "run_trace", "arguments": {"name": "code-review", "speed": 100000}, "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    let result = wait_terminal(&mut s, &task);
    assert_eq!(result["result"]["isError"], json!(true), "{result}");
    // The limit is on workload events; the server's own status events (here the final one,
    // whose message says which event was refused) are not subject to it.
    let (events, _) = stream_all(&mut s, json!({"taskId": task}));
    assert!(events.len() >= 2);
    for e in &events {
        if e["type"] != json!("dev.taskstream.task.status") {
            assert!(e["payload"].to_string().len() <= 64, "{e}");
        }
    }
    let last = events.last().expect("events");
    assert_eq!(last["type"], json!("dev.taskstream.task.status"));
    assert_eq!(last["payload"]["status"], json!("failed"));
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": task}))["status"],
        json!("failed")
    );
}

#[test]
fn se07_retention_duration_event_age() {
    let mut s = Server::legacy(&["--max-event-age", "1"]);
    let e = start_emit(&mut s, 5, 0, 0);
    wait_terminal(&mut s, &e.task);
    // Once a second the sweep drops events older than a second: all seven go.
    let got = poll_until(
        &mut s,
        "events past --max-event-age dropped",
        |s| s.ok("tasks/get", json!({"taskId": e.task}))["_meta"]["dev.taskstream/events"].clone(),
        |r| r["earliestSeq"] == json!(7),
    );
    // latestSeq is the last seq assigned, retained or not.
    assert_eq!(got, json!({"earliestSeq": 7, "latestSeq": 6, "nextSeq": 7}));
    let err = s.err("tasks/stream", json!({"taskId": e.task, "after": 0}));
    assert_eq!(
        err,
        json!({"code": -32010, "message": "Task events are no longer available",
               "data": {"reason": "events_gone", "taskId": e.task, "earliestSeq": 7}})
    );
    // RS-06: nothing retained, terminal: the empty result at once.
    let (events, end) = stream_all(&mut s, json!({"taskId": e.task}));
    assert_eq!((events.len(), end["result"].clone()), (0, json!({})));
}

#[test]
fn se07_retention_duration_terminal_retention() {
    let mut s = Server::legacy(&["--terminal-retention", "1"]);
    let e = start_emit(&mut s, 5, 0, 0);
    wait_terminal(&mut s, &e.task);
    // Retrievable right after the end, then removed with its events.
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": e.task}))["status"],
        json!("completed")
    );
    let gone = poll_until(
        &mut s,
        "task past --terminal-retention removed",
        |s| s.call_line("tasks/get", json!({"taskId": e.task})).v,
        |r| r.get("error").is_some(),
    );
    assert_eq!(
        gone["error"]["data"]["reason"],
        json!("unknown_task"),
        "{gone}"
    );
    let e2 = s.err("tasks/stream", json!({"taskId": e.task}));
    assert_eq!(e2["data"]["reason"], json!("unknown_task"));
    assert_eq!(s.ok("tasks/list", json!({}))["tasks"], json!([]));
}

#[test]
fn se07_events_retained_per_task() {
    let mut s = Server::legacy(&["--max-events-per-task", "5"]);
    let e = start_emit(&mut s, 20, 0, 0);
    wait_terminal(&mut s, &e.task);
    // 22 events, seq 0..=21; the newest five are kept.
    let meta =
        s.ok("tasks/get", json!({"taskId": e.task}))["_meta"]["dev.taskstream/events"].clone();
    assert_eq!(
        meta,
        json!({"earliestSeq": 17, "latestSeq": 21, "nextSeq": 22})
    );
    let err = s.err("tasks/stream", json!({"taskId": e.task, "after": 3}));
    assert_eq!(err["code"], json!(-32010));
    assert_eq!(err["data"]["earliestSeq"], json!(17));
    let (events, _) = stream_all(&mut s, json!({"taskId": e.task}));
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, [17, 18, 19, 20, 21]);
    // EG-02: resuming from earliestSeq - 1 replays exactly what is retained.
    let (events, _) = stream_all(&mut s, json!({"taskId": e.task, "after": 16}));
    assert_eq!(events.len(), 5);
}

#[test]
fn se07_message_size() {
    // (No initialize: its line is longer than 100 bytes; ping needs none.)
    let mut s = Server::in_memory(&["--max-message-bytes", "100"]);
    let pad = |n: usize| {
        let head = r#"{"jsonrpc":"2.0","id":"m","method":"ping","params":{"p":""#;
        let tail = r#""}}"#;
        format!("{head}{}{tail}", "z".repeat(n - head.len() - tail.len()))
    };
    s.send_raw(pad(101).as_bytes());
    assert_eq!(
        s.null_id_error()["data"]["reason"],
        json!("message_too_long")
    );
    s.send_raw(pad(100).as_bytes());
    assert_eq!(s.response_to(&json!("m")).v["result"], json!({}));
}

/// Sends one request that misses in each way that counts (SE-07, resume attempts); returns how
/// many were sent.
fn one_miss_of_each_kind(s: &mut Server, real_task: &str) -> usize {
    let unknown = "0123456789abcdef0123456789abcdef";
    let misses = [
        ("tasks/get", json!({"taskId": unknown})),
        ("tasks/cancel", json!({"taskId": unknown})),
        ("tasks/result", json!({"taskId": unknown})),
        ("tasks/stream", json!({"taskId": unknown})),
        ("tasks/stream", json!({"taskId": real_task, "after": -1})),
        (
            "tasks/stream",
            json!({"taskId": real_task, "after": 1_000_000}),
        ),
        ("tasks/list", json!({"cursor": "not-a-cursor"})),
    ];
    for (method, params) in &misses {
        let e = s.err(method, params.clone());
        assert_eq!(e["code"], json!(-32602), "{method}: {e}");
        assert_ne!(
            e["data"]["reason"],
            json!("too_many_failures"),
            "{method}: {e}"
        );
    }
    misses.len()
}

#[test]
fn se07_failed_lookups_are_refused_after_the_limit_but_never_the_principals_own_tasks() {
    let mut s = Server::legacy(&["--max-failed-lookups-per-minute", "7"]);
    let done = start_emit(&mut s, 3, 0, 0);
    wait_terminal(&mut s, &done.task);
    let running = start_emit(&mut s, 400, 25, 8);
    let open = s.request("tasks/stream", json!({"taskId": running.task}));
    assert_eq!(one_miss_of_each_kind(&mut s, &done.task), 7);
    // The allowance is spent: every further miss is refused, whatever kind it is.
    let misses = [
        (
            "tasks/get",
            json!({"taskId": "0123456789abcdef0123456789abcdef"}),
        ),
        ("tasks/stream", json!({"taskId": done.task, "after": 99})),
        ("tasks/list", json!({"cursor": "not-a-cursor"})),
        ("tasks/cancel", json!({"taskId": "nope"})),
    ];
    for (method, params) in &misses {
        let e = s.err(method, params.clone());
        assert_eq!(e["code"], json!(-32602), "{method}: {e}");
        assert_eq!(
            e["data"]["reason"],
            json!("too_many_failures"),
            "{method}: {e}"
        );
        let wait = e["data"]["retryAfterMs"].as_u64().expect("retryAfterMs");
        assert!((1..=60_000).contains(&wait), "{wait}");
    }
    s.wait_stderr("failed task lookups");
    // The principal's own tasks are served as ever: get, a stream, list, result, and the
    // cancellation of the running one.
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": done.task}))["status"],
        json!("completed")
    );
    let replay = s.request("tasks/stream", json!({"taskId": done.task, "after": 0}));
    let mut replayed = Vec::new();
    loop {
        let l = s.recv_line("the replay", |v| {
            v["params"]["taskId"] == json!(done.task) || v["id"] == json!(replay)
        });
        if l.v["id"] == json!(replay) {
            assert!(l.v.get("result").is_some(), "{}", l.raw);
            break;
        }
        if let Some(seq) = l.v["params"]["seq"].as_u64() {
            replayed.push(seq);
        }
    }
    assert_eq!(replayed, vec![1, 2, 3, 4]);
    let listed = s.ok("tasks/list", json!({}));
    assert!(listed["tasks"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["taskId"] == json!(running.task))));
    assert!(s
        .ok("tasks/result", json!({"taskId": done.task}))
        .is_object());
    let cancelled = s.ok("tasks/cancel", json!({"taskId": running.task}));
    assert_eq!(cancelled["taskId"], json!(running.task), "{cancelled}");
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": running.task}))["status"],
        json!("cancelled")
    );
    // Everything else works, and the stream opened before goes on to the end.
    assert_eq!(s.ok("ping", json!({})), json!({}));
    assert!(s.ok("tools/list", json!({}))["tools"].is_array());
    let mut seqs = Vec::new();
    loop {
        let l = s.recv_line("the open stream", |v| {
            v["params"]["taskId"] == json!(running.task) || v["id"] == json!(open)
        });
        match l.v["params"]["seq"].as_u64() {
            Some(seq) if l.v["method"] == "notifications/tasks/event" => seqs.push(seq),
            _ if l.v["id"] == json!(open) => break,
            _ => {}
        }
    }
    let n = seqs.len() as u64;
    assert_eq!(seqs, (0..n).collect::<Vec<u64>>());
    // Serving them spent nothing: the next miss is still refused.
    assert_eq!(
        s.err("tasks/get", json!({"taskId": "nope"}))["data"]["reason"],
        json!("too_many_failures")
    );
}

#[test]
fn se07_failed_lookups_refill_at_the_limit_rate() {
    // 600 a minute: one miss costs 100 ms.
    let mut s = Server::legacy(&["--max-failed-lookups-per-minute", "600"]);
    let e = start_emit(&mut s, 2, 0, 0);
    wait_terminal(&mut s, &e.task);
    let started = Instant::now();
    let mut misses = 0u64;
    let refused = loop {
        let err = s.err("tasks/get", json!({"taskId": "ffff"}));
        if err["data"]["reason"] == json!("too_many_failures") {
            break err;
        }
        assert_eq!(err["data"]["reason"], json!("unknown_task"));
        misses += 1;
    };
    let refill = started.elapsed().as_millis() as u64 / 100;
    assert!(
        (600..=600 + refill + 1).contains(&misses),
        "{misses} misses admitted in {:?}",
        started.elapsed()
    );
    assert!(refused["data"]["retryAfterMs"]
        .as_u64()
        .is_some_and(|w| w <= 100));
    // The principal's own task is served while misses are refused.
    let own = s.call_line("tasks/get", json!({"taskId": e.task})).v;
    assert_eq!(own["result"]["taskId"], json!(e.task), "{own}");
    // Refusals cost nothing: polling with misses until one is its own error again takes
    // about one miss's cost.
    let polled = Instant::now();
    let got = poll_until(
        &mut s,
        "a miss admitted again",
        |s| s.call_line("tasks/get", json!({"taskId": "ffff"})).v,
        |r| r["error"]["data"]["reason"] == json!("unknown_task"),
    );
    assert_eq!(got["error"]["code"], json!(-32602));
    assert!(
        polled.elapsed() < Duration::from_secs(5),
        "{:?}",
        polled.elapsed()
    );
}

#[test]
fn se07_honest_use_never_meets_the_failed_lookup_limit() {
    let mut s = Server::legacy(&["--max-events-per-task", "3"]);
    let tasks: Vec<_> = (0..20).map(|_| start_emit(&mut s, 10, 0, 0)).collect();
    for t in &tasks {
        wait_terminal(&mut s, &t.task);
    }
    // Hundreds of successful lookups and streams, and events_gone answers (an honest client
    // that fell behind), none of which is a miss.
    for round in 0..20 {
        for t in &tasks {
            assert_eq!(
                s.ok("tasks/get", json!({"taskId": t.task}))["status"],
                json!("completed")
            );
            let err = s.err("tasks/stream", json!({"taskId": t.task, "after": 0}));
            assert_eq!(err["data"]["reason"], json!("events_gone"), "round {round}");
        }
        let (events, _) = stream_all(&mut s, json!({"taskId": tasks[round].task}));
        assert_eq!(events.len(), 3);
    }
    log_barrier(&mut s);
    assert!(!s.stderr().contains("failed task lookups"));
}

#[test]
fn running_work_per_connection_is_limited() {
    let mut s = Server::legacy(&["--max-running-tasks", "2"]);
    let a = start_emit(&mut s, 1000, 100, 0);
    let b = start_emit(&mut s, 1000, 100, 0);
    for params in [
        json!({"name": "emit", "arguments": {"count": 1}, "task": {}}),
        json!({"name": "emit", "arguments": {"count": 1}}),
    ] {
        let e = s.err("tools/call", params);
        assert_eq!(e["code"], json!(-32602), "{e}");
        assert_eq!(e["data"]["reason"], json!("task_limit"));
    }
    // tasks/result waiters are bounded by the same number.
    let w1 = s.request("tasks/result", json!({"taskId": a.task}));
    let w2 = s.request("tasks/result", json!({"taskId": b.task}));
    let e = s.err("tasks/result", json!({"taskId": a.task}));
    assert_eq!(e["data"]["reason"], json!("waiter_limit"), "{e}");
    // A task that ends frees its place.
    s.ok("tasks/cancel", json!({"taskId": a.task}));
    s.response_line(w1);
    let c = poll_until(
        &mut s,
        "a place for a new task",
        |s| {
            s.call_line(
                "tools/call",
                json!({"name": "emit", "arguments": {"count": 2}, "task": {}}),
            )
            .v
        },
        |r| r.get("result").is_some(),
    );
    let c = c["result"]["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    wait_terminal(&mut s, &c);
    s.ok("tasks/cancel", json!({"taskId": b.task}));
    s.response_line(w2);
}

#[test]
fn a_reused_request_id_is_refused_while_the_first_is_open() {
    let mut s = Server::legacy(&[]);
    let t = start_emit(&mut s, 50, 20, 0);
    s.send(&json!({"jsonrpc": "2.0", "id": "dup", "method": "tasks/stream", "params": {"taskId": t.task}}));
    s.send(
        &json!({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
                   "params": {"name": "emit", "arguments": {"count": 1}}}),
    );
    let l = s.recv_line("the refusal", |v| {
        v["id"] == json!("dup") && v.get("error").is_some()
    });
    assert_eq!(l.v["error"]["code"], json!(-32600), "{}", l.raw);
    // The stream is answered once, at its end, with all its events.
    let mut n = 0;
    loop {
        // The stream's events and its response; the legacy `notifications/tasks/status` of
        // the same task is not part of the stream.
        let l = s.recv_line("stream", |v| {
            (v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == json!(t.task))
                || v["id"] == json!("dup")
        });
        if l.v["method"] == "notifications/tasks/event" {
            n += 1;
        } else {
            assert_eq!(l.v["result"], json!({}), "{}", l.raw);
            break;
        }
    }
    assert_eq!(n, 52);
    assert_healthy(&mut s, &[t]);
}

#[test]
fn a_flood_of_events_beyond_the_store_budget_is_refused_cleanly() {
    // A store-wide budget of 1 MB of retained events (types plus payloads).
    const BUDGET: u64 = 1_000_000;
    let budget = BUDGET.to_string();
    let mut s = Server::legacy(&["--max-store-bytes", &budget]);
    let kept = start_emit(&mut s, 50, 0, 1000);
    wait_terminal(&mut s, &kept.task);
    // Sixteen tasks try to store 32 MB between them. Once the first have spent the budget, a
    // new task may be refused already, saying why.
    let mut flood = Vec::new();
    for _ in 0..16 {
        let r = s.call_line(
            "tools/call",
            json!({"name": "emit", "task": {},
                   "arguments": {"count": 2000, "interval_ms": 0, "payload_bytes": 1000}}),
        );
        match r.v["result"]["task"]["taskId"].as_str() {
            Some(task) => flood.push(super::check::Emit {
                task: task.to_owned(),
                count: 2000,
                payload_bytes: 1000,
            }),
            None => {
                let message = r.v["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("--max-store-bytes"), "{}", r.raw);
            }
        }
    }
    assert!(!flood.is_empty());
    let mut stored = 0u64;
    for e in &flood {
        let result = wait_terminal(&mut s, &e.task);
        // Each fails at the event that would overspend the budget, saying why.
        assert_eq!(result["result"]["isError"], json!(true), "{result}");
        let text = result["result"]["content"][0]["text"]
            .as_str()
            .expect("text");
        assert!(text.contains("--max-store-bytes"), "{text}");
        assert!(text.contains(&budget), "{text}");
        assert_eq!(
            s.ok("tasks/get", json!({"taskId": e.task}))["status"],
            json!("failed")
        );
        // What it stored before that streams in full, and ends with its failure.
        let (events, _) = stream_all(&mut s, json!({"taskId": e.task}));
        assert!(events.len() < 2000, "{} events stored", events.len());
        for (k, ev) in events.iter().enumerate() {
            assert_eq!(ev["seq"], json!(k));
            stored += ev["type"].as_str().expect("type").len() as u64
                + ev["payload"].to_string().len() as u64;
        }
        let last = events.last().expect("events");
        assert_eq!(last["payload"]["status"], json!("failed"));
    }
    // What the flood stored is within the budget (the status events that end the tasks are
    // never refused, so they may go a little over it).
    assert!(stored <= BUDGET + 16 * 200, "{stored} bytes stored");
    assert!(stored > BUDGET / 2, "{stored} bytes stored");
    eprintln!(
        "{} of 16 flood tasks created, {stored} bytes stored",
        flood.len()
    );
    let hwm = s.peak_rss_kib();
    eprintln!("VmHWM during the store-budget flood: {hwm} KiB");
    assert!(hwm < super::client::RSS_BOUND_KIB, "peak {hwm} KiB");
    // The server goes on: it answers, stays small, and the task from before is intact.
    assert_healthy(&mut s, &[kept]);
}

#[test]
fn tasks_that_emit_nothing_are_bounded_by_the_store_budget_too() {
    // Each task counts its record and bookkeeping against the budget, so a client that only
    // creates tasks meets it as well: 100 kB is room for a few dozen.
    let mut s = Server::legacy(&["--max-store-bytes", "100000"]);
    let mut created = Vec::new();
    let refusal = loop {
        let r = s.call_line(
            "tools/call",
            json!({"name": "emit", "task": {}, "arguments": {"count": 0}}),
        );
        match r.v["result"]["task"]["taskId"].as_str() {
            Some(task) => created.push(task.to_owned()),
            None => break r,
        }
        assert!(created.len() < 1000, "no refusal after 1000 tasks");
    };
    let message = refusal.v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-store-bytes"), "{}", refusal.raw);
    assert!(created.len() >= 10, "only {} tasks", created.len());
    eprintln!("{} tasks fit in 100 kB", created.len());
    // Every task created is there and ends normally.
    for task in &created {
        wait_terminal(&mut s, task);
        assert_eq!(
            s.ok("tasks/get", json!({"taskId": task}))["status"],
            json!("completed")
        );
    }
    assert_healthy(&mut s, &[]);
}
