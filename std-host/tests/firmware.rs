//! The firmware MCP agent (`examples/device`) on its emulated board, from the host's side of
//! the serial line: `scripts/firmware run` starts QEMU (mps2-an385, or microbit) with the image.
//!
//! - `unplugged_cable_*`: the UART is a Unix socket (`--socket`), a cable that can be pulled.
//!   The host reads part of a stream, closes the connection without a word, the device's task
//!   keeps sampling, the host plugs back in and resumes with `after`: gap-free while the ring
//!   still holds the cursor's successor (RS-03a), `events_gone` with the right `earliestSeq`
//!   once it has moved on (RS-03b, RS-07, EG-01), and then gap-free again from
//!   `earliestSeq - 1`.
//! - `fuzz_corpora_replayed_through_the_uart`: every seed of the parser, framer and server
//!   fuzz corpora goes through the emulated UART line by line; the device answers or refuses
//!   each line, never hangs (a `ping` after every line is answered in bounded time) and never
//!   resets (a task made before the replay still resolves after it, and QEMU, started with
//!   `-no-reboot`, is still running), and its stack never grew into its static data.
//!
//! - `legacy_tasks_result_*`: SEP-1686's `tasks/result`, answered when the task ends (or
//!   refused for a second waiter), and `tasks/list`.
//!
//! They run on the board `scripts/firmware` defaults to: the Cortex-M3, or the Cortex-M0 with
//! `TASKSTREAM_FIRMWARE_BOARD=m0`. They need QEMU and the board's Rust target, which
//! `scripts/firmware` installs: they run when `TASKSTREAM_FIRMWARE_TESTS=1` (as `scripts/test`
//! sets it) and otherwise say SKIP and pass.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Bound on every wait for an answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on the start of QEMU, which may first build the image.
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// The events each task's ring holds on the device.
const RING_EVENTS: u64 = 12;

fn enabled(test: &str) -> bool {
    let on = std::env::var("TASKSTREAM_FIRMWARE_TESTS").is_ok_and(|v| v == "1");
    if !on {
        eprintln!("SKIP {test}: set TASKSTREAM_FIRMWARE_TESTS=1 to run it (scripts/test does)");
    }
    on
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/firmware")
}

/// QEMU running the image; killed on drop.
struct Board {
    child: Child,
}

impl Board {
    fn start(args: &[&str], stdio: bool) -> Board {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).arg("run").args(args);
        if stdio {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        } else {
            cmd.stdin(Stdio::null()).stdout(Stdio::null());
        }
        let child = cmd.spawn().expect("scripts/firmware run starts");
        Board { child }
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection over the serial line: lines out, lines in (read by a thread, with deadlines).
struct Line {
    out: Box<dyn Write + Send>,
    lines: Receiver<String>,
    next_id: u64,
    /// Event notifications read while waiting for something else.
    events: Vec<Value>,
    /// Plugged into a line the device may have been writing on: the first thing read can be
    /// the tail of a line whose start went out while the cable was pulled (a real cable does
    /// that too), which is skipped. Cleared by the first line read.
    may_start_mid_line: bool,
}

impl Line {
    fn new(input: impl Read + Send + 'static, out: impl Write + Send + 'static) -> Line {
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(input).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Line {
            out: Box::new(out),
            lines,
            next_id: 1,
            events: Vec::new(),
            may_start_mid_line: false,
        }
    }

    /// Connects to the board's UART socket, waiting (bounded) for QEMU to listen.
    fn plug(socket: &Path, board: &mut Board) -> Line {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(stream) = UnixStream::connect(socket) {
                let reader = stream.try_clone().expect("socket clones");
                let mut line = Line::new(reader, stream);
                line.may_start_mid_line = true;
                return line;
            }
            assert!(
                board.is_running(),
                "QEMU exited before its UART socket opened"
            );
            assert!(Instant::now() < deadline, "QEMU's UART socket did not open");
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn send(&mut self, message: &Value) {
        let mut text = message.to_string();
        text.push('\n');
        self.send_raw(text.as_bytes());
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.out.write_all(bytes).expect("the UART takes the line");
        self.out.flush().expect("the UART flushes");
    }

    /// The next message, parsed; panics on a line that is not JSON (but the cut tail of one
    /// right after plugging in, see `may_start_mid_line`) or on the deadline.
    fn recv(&mut self, deadline: Instant) -> Value {
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(wait) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no message from the device within the bound")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the device's line closed"),
            };
            let first = std::mem::replace(&mut self.may_start_mid_line, false);
            match serde_json::from_str(&line) {
                Ok(message) => return message,
                // No suffix of a JSON object is itself JSON, so this cannot hide a message.
                Err(_) if first => continue,
                Err(e) => panic!("the device wrote a line that is not JSON ({e}): {line:?}"),
            }
        }
    }

    /// Sends a request and waits for its answer, keeping the events that arrive meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(id)
    }

    fn answer(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let message = self.recv(deadline);
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            if message.get("method") == Some(&json!("notifications/tasks/event")) {
                self.events.push(message);
            }
        }
    }

    /// Opens `tasks/stream`; answers the request id.
    fn open_stream(&mut self, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream", "params": params}));
        id
    }

    /// Reads the events of `task` (those read meanwhile first) until `until` holds for the
    /// seqs seen, or the stream's answer comes, which is then returned.
    fn read_events(
        &mut self,
        stream: u64,
        task: &str,
        mut until: impl FnMut(&[u64]) -> bool,
    ) -> (Vec<u64>, Option<Value>) {
        let of_task = |e: &Value| e.pointer("/params/taskId") == Some(&json!(task));
        let mut seqs: Vec<u64> = std::mem::take(&mut self.events)
            .iter()
            .filter(|e| of_task(e))
            .map(seq_of)
            .collect();
        let deadline = Instant::now() + TIMEOUT;
        while !until(&seqs) {
            let message = self.recv(deadline);
            if message.get("id") == Some(&json!(stream)) {
                return (seqs, Some(message));
            }
            if message.get("method") == Some(&json!("notifications/tasks/event")) {
                assert!(of_task(&message), "an event of another task: {message}");
                seqs.push(seq_of(&message));
            }
        }
        (seqs, None)
    }
}

fn seq_of(event: &Value) -> u64 {
    event
        .pointer("/params/seq")
        .and_then(Value::as_u64)
        .expect("every event has an integer seq")
}

fn legacy_handshake(line: &mut Line) {
    let init = line.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert_eq!(
        init.pointer("/result/protocolVersion"),
        Some(&json!("2025-11-25")),
        "{init}"
    );
    // The answer is a barrier: events read before it belong to the previous peer's streams,
    // which the handshake dropped.
    line.events.clear();
    line.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

fn modern(params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    params
}

fn task_id_of(created: &Value) -> String {
    created
        .pointer("/result/task/taskId")
        .or_else(|| created.pointer("/result/taskId"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("tools/call made no task: {created}"))
        .to_owned()
}

fn wait_completed(line: &mut Line, task: &str, meta: fn(Value) -> Value) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let got = line.call("tasks/get", meta(json!({"taskId": task})));
        let status = got.pointer("/result/status").and_then(Value::as_str);
        if status == Some("completed") {
            return;
        }
        assert_eq!(status, Some("working"), "{got}");
        assert!(
            Instant::now() < deadline,
            "the task did not complete in time"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that `seqs` are `from, from + 1, …` with no gap and no repeat.
fn assert_gap_free(seqs: &[u64], from: u64) {
    for (i, seq) in seqs.iter().enumerate() {
        assert_eq!(
            *seq,
            from + i as u64,
            "gap or repeat in {seqs:?} (expected to start at {from})"
        );
    }
}

/// How long the cable stays unplugged while the device samples on: the scenario itself, not a
/// wait for a condition.
const UNPLUGGED: Duration = Duration::from_millis(300);

#[test]
fn unplugged_cable_resumes_gap_free_or_gets_events_gone() {
    if !enabled("unplugged_cable_resumes_gap_free_or_gets_events_gone") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("uart.sock");
    let socket_arg = socket.to_str().expect("utf-8 path");
    let mut board = Board::start(&["--socket", socket_arg], false);

    // 1. Gap-free: 60 readings 60 ms apart (3.6 s); unplugged for 0.3 s at about seq 8, well
    //    inside the 12-event ring (0.72 s of readings).
    let mut line = Line::plug(&socket, &mut board);
    legacy_handshake(&mut line);
    let created = line.call(
        "tools/call",
        json!({"name": "sample", "arguments": {"count": 60, "interval_ms": 60}, "task": {"ttl": 60000}}),
    );
    let task = task_id_of(&created);
    let stream = line.open_stream(json!({"taskId": task}));
    let (seen, answer) = line.read_events(stream, &task, |s| s.len() >= 8);
    assert!(answer.is_none(), "the stream ended early: {answer:?}");
    assert_gap_free(&seen, 0);
    let last = *seen.last().expect("events were read");
    drop(line); // the cable is pulled: no cancellation, no goodbye
    thread::sleep(UNPLUGGED);

    let mut line = Line::plug(&socket, &mut board);
    // A new peer on the line starts with the handshake, which drops the old peer's stream.
    legacy_handshake(&mut line);
    let stream = line.open_stream(json!({"taskId": task, "after": last}));
    let (resumed, answer) = line.read_events(stream, &task, |_| false);
    let answer = answer.expect("the stream closes once the task is done");
    assert_eq!(answer.get("result"), Some(&json!({})), "{answer}");
    assert_gap_free(&resumed, last + 1);
    // seq 0 is the working status, 1..=60 the readings, 61 the completed status.
    assert_eq!(resumed.last(), Some(&61), "{resumed:?}");

    // 2. The ring moved on: 100 readings 2 ms apart, unplugged after seq 4 until the task has
    //    ended with seqs 0..=101, of which the ring keeps the last 12: 90..=101.
    let created = line.call(
        "tools/call",
        json!({"name": "sample", "arguments": {"count": 100, "interval_ms": 2}, "task": {}}),
    );
    let task = task_id_of(&created);
    let stream = line.open_stream(json!({"taskId": task}));
    let (seen, _) = line.read_events(stream, &task, |s| s.len() >= 4);
    let last = *seen.last().expect("events were read");
    assert!(
        last < 60,
        "the reading was too slow for the scenario: {seen:?}"
    );
    drop(line);
    thread::sleep(UNPLUGGED);

    let mut line = Line::plug(&socket, &mut board);
    legacy_handshake(&mut line);
    wait_completed(&mut line, &task, |p| p);
    let stream = line.open_stream(json!({"taskId": task, "after": last}));
    let (none, answer) = line.read_events(stream, &task, |_| false);
    let answer = answer.expect("answered");
    assert!(none.is_empty(), "no event before events_gone: {none:?}");
    assert_eq!(
        answer.pointer("/error/code"),
        Some(&json!(-32010)),
        "{answer}"
    );
    assert_eq!(
        answer.pointer("/error/data/reason"),
        Some(&json!("events_gone"))
    );
    assert_eq!(answer.pointer("/error/data/taskId"), Some(&json!(task)));
    let earliest = answer
        .pointer("/error/data/earliestSeq")
        .and_then(Value::as_u64)
        .expect("earliestSeq");
    assert_eq!(earliest, 102 - RING_EVENTS, "{answer}");

    let stream = line.open_stream(json!({"taskId": task, "after": earliest - 1}));
    let (replayed, answer) = line.read_events(stream, &task, |_| false);
    assert_eq!(
        answer.and_then(|a| a.get("result").cloned()),
        Some(json!({}))
    );
    assert_gap_free(&replayed, earliest);
    assert_eq!(replayed.last(), Some(&101));
    assert!(board.is_running(), "the board kept running");
}

#[test]
fn unplugged_cable_in_the_modern_era_resumes_after_cancelling_the_lost_stream() {
    if !enabled("unplugged_cable_in_the_modern_era_resumes_after_cancelling_the_lost_stream") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("uart.sock");
    let socket_arg = socket.to_str().expect("utf-8 path");
    let mut board = Board::start(&["--socket", socket_arg], false);

    let mut line = Line::plug(&socket, &mut board);
    let created = line.call(
        "tools/call",
        modern(json!({"name": "sample", "arguments": {"count": 40, "interval_ms": 60}})),
    );
    assert_eq!(
        created.pointer("/result/resultType"),
        Some(&json!("task")),
        "{created}"
    );
    let task = task_id_of(&created);
    let lost = line.open_stream(modern(json!({"taskId": task})));
    let (seen, _) = line.read_events(lost, &task, |s| s.len() >= 5);
    assert_gap_free(&seen, 0);
    let last = *seen.last().expect("events were read");
    drop(line);
    thread::sleep(UNPLUGGED);

    // 2026-07-28 has no handshake, so the device cannot tell a new peer: its stream is still
    // active (TS-05), and a resume is refused until the host cancels the request it lost.
    let mut line = Line::plug(&socket, &mut board);
    line.next_id = 100;
    let refused = line.open_stream(modern(json!({"taskId": task, "after": last})));
    let (_, answer) = line.read_events(refused, &task, |_| false);
    let answer = answer.expect("answered");
    assert_eq!(
        answer.pointer("/error/data/reason"),
        Some(&json!("stream_active")),
        "{answer}"
    );
    line.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": lost}}));
    // A barrier: once it is answered the device has read the cancellation, so no frame of
    // the lost stream follows (DX-04) and the events read so far were all the lost stream's.
    line.call("tasks/get", modern(json!({"taskId": task})));
    line.events.clear();
    let stream = line.open_stream(modern(json!({"taskId": task, "after": last})));
    let (resumed, answer) = line.read_events(stream, &task, |_| false);
    let answer = answer.expect("the stream closes once the task is done");
    assert_eq!(
        answer.get("result"),
        Some(&json!({"resultType": "complete"})),
        "{answer}"
    );
    assert_gap_free(&resumed, last + 1);
    assert_eq!(resumed.last(), Some(&41), "{resumed:?}");
    // SEP-2663 has no tasks/result: the result is inline in tasks/get.
    let result = line.call("tasks/result", modern(json!({"taskId": task})));
    assert_eq!(
        result.pointer("/error/code"),
        Some(&json!(-32601)),
        "{result}"
    );
    let got = line.call("tasks/get", modern(json!({"taskId": task})));
    assert_eq!(
        got.pointer("/result/result/content/0/text"),
        Some(&json!("sampled 40 readings")),
        "{got}"
    );
}

/// The seeds of the fuzz targets that take JSON-RPC lines or raw bytes.
fn corpus_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut files = Vec::new();
    for target in ["rpc_parse", "frame", "server"] {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root.join(target))
            .expect("the corpus is in the repository")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        files.extend(entries);
    }
    files
}

/// What a line must get from the device: `Some(id)` for a request (an answer with its id, or,
/// for `tasks/stream`, possibly an open stream), `Some(Null)` for a line that is not a JSON
/// object (an error), `None` for a notification or a response (nothing).
fn expected_answer(line: &[u8]) -> Option<Value> {
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return Some(Value::Null);
    };
    let Some(object) = value.as_object() else {
        return Some(Value::Null);
    };
    match (object.get("id"), object.get("method")) {
        (Some(id), Some(Value::String(method)))
            if (id.is_u64() || id.is_i64() || id.is_string()) =>
        {
            (method != "tasks/stream").then(|| id.clone())
        }
        _ => None,
    }
}

#[test]
fn fuzz_corpora_replayed_through_the_uart() {
    if !enabled("fuzz_corpora_replayed_through_the_uart") {
        return;
    }
    let mut board = Board::start(&[], true);
    let stdin = board.child.stdin.take().expect("piped");
    let stdout = board.child.stdout.take().expect("piped");
    let mut line = Line::new(stdout, stdin);
    line.next_id = 1_000_000;
    let created = line.call(
        "tools/call",
        modern(json!({"name": "sample", "arguments": {"count": 1}})),
    );
    let task = task_id_of(&created);

    let mut lines_sent = 0usize;
    for file in corpus_files() {
        let bytes = std::fs::read(&file).expect("a corpus file");
        for raw in bytes.split(|&b| b == b'\n') {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let expected = expected_answer(raw);
            line.send_raw(raw);
            line.send_raw(b"\n");
            lines_sent += 1;
            // The barrier: answered once the device has dealt with the line.
            let barrier = format!("barrier-{lines_sent}");
            line.send(&json!({"jsonrpc": "2.0", "id": barrier, "method": "ping"}));
            let deadline = Instant::now() + TIMEOUT;
            let mut answered_ids = Vec::new();
            loop {
                let message = line.recv(deadline);
                let id = message.get("id").cloned();
                if id == Some(json!(barrier)) {
                    break;
                }
                if let Some(id) = id {
                    assert!(
                        message.get("result").is_some() || message.get("error").is_some(),
                        "an answer that is neither result nor error: {message}"
                    );
                    answered_ids.push(id);
                }
            }
            match expected {
                None => {}
                Some(Value::Null) => assert!(
                    !answered_ids.is_empty() || raw.iter().all(u8::is_ascii_whitespace),
                    "{}: the line {:?} got no answer",
                    file.display(),
                    String::from_utf8_lossy(raw)
                ),
                Some(id) => assert!(
                    answered_ids.contains(&id) || answered_ids.contains(&Value::Null),
                    "{}: the request {:?} got no answer",
                    file.display(),
                    String::from_utf8_lossy(raw)
                ),
            }
        }
    }
    assert!(
        lines_sent > 100,
        "the corpus was replayed: {lines_sent} lines"
    );
    // No reset: the task made before the replay is still there.
    let got = line.call("tasks/get", modern(json!({"taskId": task})));
    assert_eq!(got.pointer("/result/taskId"), Some(&json!(task)), "{got}");
    assert!(
        board.is_running(),
        "QEMU (started with -no-reboot) still runs"
    );
    // The stack never reached the static data below it (the device paints that RAM at boot).
    let ping = line.call("ping", json!({}));
    let device = ping
        .pointer("/result/_meta/dev.taskstream~1device")
        .unwrap_or_else(|| panic!("ping reports the stack: {ping}"));
    let peak = device["stackPeakBytes"].as_u64().expect("stackPeakBytes");
    let room = device["stackBytes"].as_u64().expect("stackBytes");
    eprintln!("device stack: peak {peak} B of {room} B after {lines_sent} corpus lines");
    assert!(peak > 0 && peak < room, "stack peak {peak} B of {room} B");
}

#[test]
fn legacy_tasks_result_waits_for_the_end_and_tasks_list_lists() {
    if !enabled("legacy_tasks_result_waits_for_the_end_and_tasks_list_lists") {
        return;
    }
    let mut board = Board::start(&[], true);
    let stdin = board.child.stdin.take().expect("piped");
    let stdout = board.child.stdout.take().expect("piped");
    let mut line = Line::new(stdout, stdin);
    legacy_handshake(&mut line);
    let created = line.call(
        "tools/call",
        json!({"name": "sample", "arguments": {"count": 5, "interval_ms": 30}, "task": {}}),
    );
    let task = task_id_of(&created);
    // Sent while the task works: answered when it ends, with the tool's result.
    let result = line.call("tasks/result", json!({"taskId": task}));
    assert_eq!(
        result.pointer("/result/content/0/text"),
        Some(&json!("sampled 5 readings")),
        "{result}"
    );
    assert_eq!(result.pointer("/result/isError"), Some(&json!(false)));
    assert_eq!(
        result.pointer("/result/_meta/io.modelcontextprotocol~1related-task/taskId"),
        Some(&json!(task))
    );
    let got = line.call("tasks/get", json!({"taskId": task}));
    assert_eq!(
        got.pointer("/result/status"),
        Some(&json!("completed")),
        "{got}"
    );

    // A cancelled task's result is an error saying so, for a waiting request too.
    let created = line.call(
        "tools/call",
        json!({"name": "sample", "arguments": {"count": 100, "interval_ms": 1000}, "task": {}}),
    );
    let cancelled = task_id_of(&created);
    let waiting = line.next_id;
    line.next_id += 1;
    line.send(&json!({"jsonrpc": "2.0", "id": waiting, "method": "tasks/result", "params": {"taskId": cancelled}}));
    let second = line.call("tasks/result", json!({"taskId": cancelled}));
    assert_eq!(
        second.pointer("/error/data/reason"),
        Some(&json!("waiter_limit")),
        "{second}"
    );
    let listed = line.call("tasks/list", json!({}));
    let ids: Vec<&Value> = listed
        .pointer("/result/tasks")
        .and_then(Value::as_array)
        .expect("tasks")
        .iter()
        .filter_map(|t| t.get("taskId"))
        .collect();
    assert_eq!(ids, [&json!(task), &json!(cancelled)], "{listed}");
    let cancel = line.call("tasks/cancel", json!({"taskId": cancelled}));
    assert_eq!(
        cancel.pointer("/result/status"),
        Some(&json!("cancelled")),
        "{cancel}"
    );
    let answer = line.answer(waiting);
    assert_eq!(
        answer.pointer("/error/code"),
        Some(&json!(-32603)),
        "{answer}"
    );
    let unknown = line.call("tasks/result", json!({"taskId": "no-such-task"}));
    assert_eq!(
        unknown.pointer("/error/code"),
        Some(&json!(-32602)),
        "{unknown}"
    );
}
