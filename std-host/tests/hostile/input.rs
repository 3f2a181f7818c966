//! Hostile input on stdin: every line gets the right error (or none, for a notification), the
//! server reads on, its memory stays bounded, and the tasks running meanwhile lose nothing.
//!
//! Each test runs its attack while an `emit` task is running and after another has completed,
//! then checks [`assert_healthy`]: `ping` answers, VmRSS is under the bound, and both tasks
//! stream gap-free with exactly their content.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::check::{assert_healthy, assert_intact, log_barrier, start_emit, wait_terminal, Emit};
use super::client::{modern, Server, RSS_BOUND_KIB};

/// Runs `attack` on a legacy in-memory server started with `flags`, between a completed and a
/// running task, then checks the server's health.
fn under_attack(flags: &[&str], attack: impl FnOnce(&mut Server, &[Emit])) {
    let mut s = Server::legacy(flags);
    let done = start_emit(&mut s, 5, 0, 16);
    wait_terminal(&mut s, &done.task);
    let running = start_emit(&mut s, 40, 10, 32);
    let tasks = [done, running];
    attack(&mut s, &tasks);
    assert_healthy(&mut s, &tasks);
}

/// Sends `line` and expects exactly one answer, an error with `id: null` and `code`; returns
/// the error object.
#[track_caller]
fn expect_null_id_error(s: &mut Server, line: &[u8], code: i64) -> Value {
    s.send_raw(line);
    let e = s.null_id_error();
    assert_eq!(
        e["code"],
        json!(code),
        "{e} for {}",
        String::from_utf8_lossy(line)
    );
    e
}

#[test]
fn malformed_json_is_a_parse_error_with_null_id() {
    under_attack(&[], |s, _| {
        for line in [
            &b"{"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":tru}}",
            b"{'jsonrpc':'2.0','id':1,'method':'ping'}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\tng\"}",
            b"nul",
            b"\x00\x01\x02",
            b"{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":NaN,\"method\":\"ping\"}",
        ] {
            let e = expect_null_id_error(s, line, -32700);
            assert_eq!(e, json!({"code": -32700, "message": "Parse error"}));
        }
    });
}

#[test]
fn invalid_utf8_is_a_parse_error() {
    under_attack(&[], |s, _| {
        for line in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\xc3ng\"}",
            // An overlong encoding of '/' and a UTF-16 surrogate encoded as UTF-8.
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks\xc0\xafstream\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xed\xa0\x80\",\"method\":\"ping\"}",
            // A lone surrogate escape is not a Unicode string either.
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"ping\"}",
            // A byte order mark is not JSON.
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
        ] {
            expect_null_id_error(s, line, -32700);
        }
    });
}

#[test]
fn a_batch_is_an_invalid_request() {
    under_attack(&[], |s, _| {
        let e = expect_null_id_error(
            s,
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
            -32600,
        );
        assert_eq!(
            e["message"],
            json!("Invalid Request: batches are not supported")
        );
        expect_null_id_error(s, b"[]", -32600);
        // Neither member of the batch was answered on its own.
        let id = s.request("ping", json!({}));
        s.assert_next_is_response(id);
    });
}

#[test]
fn an_object_without_method_is_an_invalid_request() {
    under_attack(&[], |s, _| {
        // The id can be read, so it is echoed.
        s.send_raw(br#"{"jsonrpc":"2.0","id":"no-method"}"#);
        let l = s.response_to(&json!("no-method"));
        assert_eq!(l.v["error"]["code"], json!(-32600), "{}", l.raw);
        for line in [
            &br#"{"jsonrpc":"2.0"}"#[..],
            br#"{}"#,
            br#"{"jsonrpc":"2.0","method":7}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            br#""ping""#,
            b"42",
        ] {
            s.send_raw(line);
            let l = s.recv_line("an error", |v| v.get("error").is_some());
            assert_eq!(l.v["error"]["code"], json!(-32600), "{}", l.raw);
        }
        // A notification with an unknown method gets nothing; a response from the client is
        // ignored.
        s.send_raw(br#"{"jsonrpc":"2.0","method":"notifications/nonsense","params":{}}"#);
        s.send_raw(br#"{"jsonrpc":"2.0","id":99,"result":{}}"#);
        let id = s.request("ping", json!({}));
        s.assert_next_is_response(id);
    });
}

#[test]
fn a_two_mib_line_gets_message_too_long_and_the_server_reads_on() {
    under_attack(&[], |s, _| {
        let mut line = br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":""#.to_vec();
        line.resize(2 << 20, b'a');
        line.extend_from_slice(br#""}}"#);
        let e = expect_null_id_error(s, &line, -32600);
        assert_eq!(
            e,
            json!({"code": -32600, "message": "Invalid Request: message too long",
                   "data": {"reason": "message_too_long"}})
        );
        // Written in pieces, with the next request right behind it in the same write.
        let mut both = line.clone();
        both.push(b'\n');
        both.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"after\",\"method\":\"ping\"}\n");
        for chunk in both.chunks(100_000) {
            s.write(chunk);
        }
        s.null_id_error();
        let l = s.response_to(&json!("after"));
        assert_eq!(l.v["result"], json!({}));
        // Exactly at the limit is accepted.
        let mut exact =
            br#"{"jsonrpc":"2.0","id":"exact","method":"ping","params":{"pad":""#.to_vec();
        exact.resize(1_048_576 - 3, b'b');
        exact.extend_from_slice(br#""}}"#);
        assert_eq!(exact.len(), 1_048_576);
        s.send_raw(&exact);
        assert_eq!(s.response_to(&json!("exact")).v["result"], json!({}));
    });
}

#[test]
fn a_hundred_thousand_levels_of_nesting_are_refused_without_recursion() {
    under_attack(&[], |s, _| {
        const DEPTH: usize = 100_000;
        let arrays = "[".repeat(DEPTH) + &"]".repeat(DEPTH);
        expect_null_id_error(s, arrays.as_bytes(), -32700);
        let objects = r#"{"a":"#.repeat(DEPTH) + "1" + &"}".repeat(DEPTH);
        expect_null_id_error(s, objects.as_bytes(), -32700);
        // Deep inside the params of a real request, and unclosed.
        let inside = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{}0{}}}}}"#,
            "[".repeat(DEPTH),
            "]".repeat(DEPTH)
        );
        expect_null_id_error(s, inside.as_bytes(), -32700);
        expect_null_id_error(s, "[".repeat(DEPTH).as_bytes(), -32700);
        // 128 levels (the core's limit, as serde_json's) are fine.
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":"deep","method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(120),
            "]".repeat(120)
        );
        s.send_raw(ok.as_bytes());
        assert_eq!(s.response_to(&json!("deep")).v["result"], json!({}));
    });
}

#[test]
fn numbers_with_ten_thousand_digits() {
    under_attack(&[], |s, tasks| {
        let digits = "9".repeat(10_000);
        // An integer id beyond any i64 that is still a JSON number: out of range for
        // serde_json too, so not JSON to us.
        let line = format!(r#"{{"jsonrpc":"2.0","id":{digits},"method":"ping"}}"#);
        expect_null_id_error(s, line.as_bytes(), -32700);
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"n":1e{digits}}}}}"#);
        expect_null_id_error(s, line.as_bytes(), -32700);
        // A long fraction is a fine number: the ping is answered.
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"frac","method":"ping","params":{{"n":0.{digits}}}}}"#
        );
        s.send_raw(line.as_bytes());
        assert_eq!(s.response_to(&json!("frac")).v["result"], json!({}));
        // As `after`: a fraction is not an integer (RS-02); an integer this long is not
        // even a number serde_json can read.
        let task = &tasks[0].task;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"after","method":"tasks/stream","params":{{"taskId":"{task}","after":1.{digits}}}}}"#
        );
        s.send_raw(line.as_bytes());
        let e = s.response_to(&json!("after")).v["error"].clone();
        assert_eq!(e["code"], json!(-32602));
        assert_eq!(e["data"]["reason"], json!("invalid_after"));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"after","method":"tasks/stream","params":{{"taskId":"{task}","after":{digits}}}}}"#
        );
        expect_null_id_error(s, line.as_bytes(), -32700);
        // And as emit's count: a tool error, not a run.
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"count","method":"tools/call","params":{{"name":"emit","arguments":{{"count":1.{digits}}}}}}}"#
        );
        s.send_raw(line.as_bytes());
        let r = s.response_to(&json!("count")).v;
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
    });
}

#[test]
fn duplicate_keys_are_refused_wherever_they_matter() {
    under_attack(&[], |s, tasks| {
        let task = tasks[0].task.clone();
        // In the envelope: -32600.
        s.send_raw(br#"{"jsonrpc":"2.0","id":"d1","method":"ping","method":"tools/list"}"#);
        let l = s.recv_line("envelope duplicate", |v| v.get("error").is_some());
        assert_eq!(l.v["error"]["code"], json!(-32600), "{}", l.raw);
        s.send_raw(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
        let l = s.recv_line("id duplicate", |v| v.get("error").is_some());
        assert_eq!(l.v["error"]["code"], json!(-32600), "{}", l.raw);
        // In params: -32602, whichever task the second copy names.
        for (method, params) in [
            (
                "tasks/stream",
                format!(r#"{{"taskId":"{task}","taskId":"{task}"}}"#),
            ),
            (
                "tasks/stream",
                format!(r#"{{"taskId":"{task}","after":0,"after":1}}"#),
            ),
            (
                "tasks/get",
                format!(r#"{{"taskId":"{task}","taskId":"0000"}}"#),
            ),
            (
                "tasks/cancel",
                format!(r#"{{"taskId":"{task}","taskId":"{task}"}}"#),
            ),
            (
                "tools/call",
                r#"{"name":"emit","arguments":{"count":1,"count":999999}}"#.to_owned(),
            ),
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":"dup","method":"{method}","params":{params}}}"#);
            s.send_raw(line.as_bytes());
            let l = s.response_to(&json!("dup"));
            assert_eq!(l.v["error"]["code"], json!(-32602), "{method}: {}", l.raw);
        }
        // The task was neither cancelled nor disturbed: checked by assert_healthy.
    });
}

#[test]
fn a_task_id_of_one_mib() {
    // At the default limit the line itself is too long.
    under_attack(&[], |s, _| {
        let id = "a".repeat(1 << 20);
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{id}"}}}}"#
        );
        expect_null_id_error(s, line.as_bytes(), -32600);
    });
    // Under a larger limit it is an unknown task, answered exactly as any unknown task, for
    // every method that takes one.
    under_attack(&["--max-message-bytes", "4194304"], |s, _| {
        let huge = "f".repeat(1 << 20);
        for method in ["tasks/get", "tasks/cancel", "tasks/result", "tasks/stream"] {
            let unknown = answer_raw(s, method, &json!({"taskId": "0123"}));
            let big = answer_raw(s, method, &json!({"taskId": huge}));
            assert_eq!(big, unknown, "{method}");
            assert!(unknown.contains(r#""reason":"unknown_task""#), "{unknown}");
        }
        assert!(
            s.rss_kib() < RSS_BOUND_KIB,
            "memory after 1 MiB ids: {} KiB",
            s.rss_kib()
        );
        log_barrier(s);
        assert!(!s.stderr().contains(&huge[..64]), "the id was logged");
    });
}

/// The raw answer line to `method` with `params`, sent with the id `"same"`.
fn answer_raw(s: &mut Server, method: &str, params: &Value) -> String {
    s.send(&json!({"jsonrpc": "2.0", "id": "same", "method": method, "params": params}));
    s.response_to(&json!("same")).raw
}

#[test]
fn every_invalid_after_is_invalid_params() {
    under_attack(&[], |s, tasks| {
        let task = tasks[0].task.clone(); // completed: seqs 0..=6
        for after in [
            "-1",
            "-0",
            "1.0",
            "0.5",
            "1e2",
            "1E2",
            "0e0",
            "\"3\"",
            "null",
            "true",
            "false",
            "{}",
            "[]",
            "[1]",
            "9007199254740992",
            "18446744073709551616",
            "-9007199254740991",
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"a","method":"tasks/stream","params":{{"taskId":"{task}","after":{after}}}}}"#
            );
            s.send_raw(line.as_bytes());
            let l = s.response_to(&json!("a"));
            assert_eq!(
                l.v["error"]["code"],
                json!(-32602),
                "after {after}: {}",
                l.raw
            );
            assert_eq!(
                l.v["error"]["data"]["reason"],
                json!("invalid_after"),
                "after {after}: {}",
                l.raw
            );
        }
        // Beyond the last assigned seq (MCP-DIGEST A-01).
        for after in [7u64, 100, 9_007_199_254_740_991] {
            let e = s.err("tasks/stream", json!({"taskId": task, "after": after}));
            assert_eq!(e["code"], json!(-32602), "after {after}: {e}");
            assert_eq!(e["data"]["reason"], json!("cursor_ahead"), "after {after}");
        }
        // The valid edge cases still work: the last seq completes at once, 0 replays the rest.
        let r = s.call_line("tasks/stream", json!({"taskId": task, "after": 6}));
        assert_eq!(r.v["result"], json!({}), "{}", r.raw);
    });
}

#[test]
fn requests_before_initialize_in_a_legacy_client() {
    let mut s = Server::in_memory(&[]);
    // A task made by a modern request, to check afterwards.
    let r = s.ok(
        "tools/call",
        modern(
            json!({"name": "emit", "arguments": {"count": 20, "interval_ms": 10}}),
            true,
        ),
    );
    let running = Emit {
        task: r["taskId"].as_str().expect("taskId").to_owned(),
        count: 20,
        payload_bytes: 0,
    };
    // Only ping works without the modern _meta before initialize (MCP-DIGEST a.3).
    assert_eq!(s.ok("ping", json!({})), json!({}));
    for method in [
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "tasks/cancel",
        "tasks/stream",
        "resources/list",
    ] {
        let e = s.err(method, json!({"taskId": running.task, "name": "emit"}));
        assert_eq!(e["code"], json!(-32602), "{method}: {e}");
    }
    // Not even a cancel of the running task got through.
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.initialize("2025-11-25");
    // A second initialize is refused; the session stays legacy.
    let e = s.err(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_eq!(e["code"], json!(-32600));
    assert_healthy(&mut s, &[running]);
}

#[test]
fn a_flood_of_a_hundred_thousand_pings() {
    under_attack(&[], |s, _| {
        const N: usize = 100_000;
        let mut flood = Vec::with_capacity(N * 48);
        for i in 0..N {
            flood.extend_from_slice(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":\"p{i}\",\"method\":\"ping\"}}\n").as_bytes(),
            );
        }
        // Written from another thread while this one reads, as a real client would.
        let mut stdin = s.take_stdin();
        let writer = std::thread::spawn(move || {
            stdin.write_all(&flood).expect("flood");
            stdin.flush().expect("flush");
            stdin
        });
        let mut peak = 0;
        for i in 0..N {
            let l = s.recv_line("a pong", |v| v.get("method").is_none());
            assert_eq!(
                l.v,
                json!({"jsonrpc": "2.0", "id": format!("p{i}"), "result": {}}),
                "answers in order"
            );
            if i % 10_000 == 0 {
                peak = peak.max(s.rss_kib());
            }
        }
        s.give_stdin(writer.join().expect("writer"));
        eprintln!("VmRSS peak during the ping flood: {peak} KiB");
        assert!(peak < RSS_BOUND_KIB, "peak {peak} KiB during the flood");
    });
}

#[test]
fn a_client_that_stops_reading_for_seconds_while_tasks_run() {
    let mut s = Server::legacy(&["--max-streams", "64"]);
    // Streams open on running tasks, then the client stops reading.
    let tasks: Vec<Emit> = (0..8).map(|_| start_emit(&mut s, 300, 2, 1000)).collect();
    for t in &tasks {
        s.request("tasks/stream", json!({"taskId": t.task}));
    }
    s.pause_reading();
    let paused_at = Instant::now();
    // The pause itself is the attack: at least 3 s of a full stdout pipe while 8 tasks emit
    // 2400 events of 1 KiB. The tasks are not held back: each one's completion shows on stderr
    // (a pipe of its own) while stdout is still stalled. Memory is sampled meanwhile.
    let mut peak = 0;
    for t in &tasks {
        s.wait_stderr(&format!("task {} completed", t.task));
        peak = peak.max(s.rss_kib());
    }
    while paused_at.elapsed() < Duration::from_secs(3) {
        peak = peak.max(s.rss_kib());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Requests still go in (the reader may block on a full stdout, not on the tasks).
    let ping = s.request("ping", json!({}));
    s.resume_reading();
    s.response_line(ping);
    eprintln!("VmRSS peak while the client did not read: {peak} KiB");
    assert!(peak < RSS_BOUND_KIB, "peak {peak} KiB while not reading");
    for t in &tasks {
        let r = s.ok("tasks/get", json!({"taskId": t.task}));
        assert_eq!(r["status"], json!("completed"), "{r}");
    }
    // The streams opened before the pause deliver everything, in order, without a gap; the
    // full check streams each task again from the start.
    let mut seen = vec![0u64; tasks.len()];
    let mut closed = 0;
    while closed < tasks.len() {
        let l = s.recv_line("stream traffic", |v| {
            v["method"] == "notifications/tasks/event" || v.get("result").is_some()
        });
        if let Some(i) = tasks
            .iter()
            .position(|t| l.v["params"]["taskId"] == json!(t.task))
        {
            assert_eq!(l.v["params"]["seq"], json!(seen[i]), "{}", l.raw);
            seen[i] += 1;
        } else if l.v["result"] == json!({}) {
            closed += 1;
        }
    }
    assert!(seen.iter().all(|&n| n == 302), "{seen:?}");
    for t in &tasks {
        assert_intact(&mut s, t);
    }
    assert_healthy(&mut s, &tasks);
}

/// A request id is echoed exactly as it was sent; `-0`, which would come back as `0`, is
/// refused as an invalid id (-32600 with `id: null`) in both eras, as a `requestId` too.
#[test]
fn an_id_of_minus_zero_is_refused_and_every_other_id_echoed_as_sent() {
    let mut s = Server::in_memory(&[]);
    for era in ["modern", "legacy"] {
        if era == "legacy" {
            s.initialize("2025-11-25");
        }
        let params = if era == "modern" {
            modern(json!({}), true)
        } else {
            json!({})
        };
        for method in ["ping", "tasks/cancel", "tasks/get"] {
            let line = json!({"jsonrpc": "2.0", "id": "ID", "method": method, "params": params})
                .to_string()
                .replace(r#""ID""#, "-0");
            let e = expect_null_id_error(&mut s, line.as_bytes(), -32600);
            assert_eq!(
                e["message"],
                json!("Invalid Request: id must be a string or an integer (not -0)"),
                "{era} {method}"
            );
        }
        // A cancellation naming `-0` names no request: it is ignored, the server reads on.
        s.send_raw(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":-0}}"#,
        );
        for (sent, echoed) in [
            (r#""-0""#, json!("-0")),
            ("0", json!(0)),
            ("-9223372036854775808", json!(i64::MIN)),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": "ID", "method": "ping", "params": params})
                .to_string()
                .replace(r#""ID""#, sent);
            s.send_raw(line.as_bytes());
            let l = s.recv_line("the ping's answer", |v| v.get("id").is_some());
            assert!(
                l.raw.contains(&format!(r#""id":{sent}"#)),
                "{era}: {sent} echoed as {}",
                l.raw
            );
            assert_eq!(l.v["id"], echoed);
            assert!(l.v.get("result").is_some(), "{}", l.raw);
        }
    }
}
