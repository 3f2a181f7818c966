//! The one wire client of the black-box tests: spawns the real `taskstream` (`serve`, or any
//! command), writes lines or raw bytes to its stdin, keeps every stdout line both as text and
//! parsed (so answers can be compared byte for byte), reads its stderr and its resident memory,
//! and waits for what it expects with a deadline, never a fixed sleep.
//!
//! The `Value` methods (`recv`, `response`, `call`) are for tests about what the server says;
//! the `Line` ones (`recv_line`, `response_line`, `call_line`) for tests about how it says it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long any single expected line may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// The resident memory bound every hostile test holds the server to (docs/security.md).
pub(crate) const RSS_BOUND_KIB: u64 = 64 * 1024;

/// One stdout line: its text and its parse.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub(crate) raw: String,
    pub(crate) v: Value,
}

/// A gate the stdout reader waits at while closed: closing it makes the client a slow reader.
#[derive(Default)]
struct Gate {
    closed: Mutex<bool>,
    cond: Condvar,
}

impl Gate {
    fn wait_open(&self) {
        let mut closed = self.closed.lock().expect("gate");
        while *closed {
            closed = self.cond.wait(closed).expect("gate");
        }
    }

    fn set(&self, closed: bool) {
        *self.closed.lock().expect("gate") = closed;
        self.cond.notify_all();
    }
}

/// Every stderr line so far, and a signal for each new one.
#[derive(Default)]
struct Stderr {
    lines: Mutex<Vec<String>>,
    grew: Condvar,
}

pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Line>,
    gate: Arc<Gate>,
    backlog: VecDeque<Line>,
    next_id: i64,
    stderr: Arc<Stderr>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_taskstream")
}

impl Server {
    /// `taskstream serve ARGS`.
    pub(crate) fn spawn(args: &[&str]) -> Server {
        Server::spawn_env(args, &[])
    }

    /// `taskstream serve ARGS` with `env` added to its environment.
    pub(crate) fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::spawn_command("serve", args, env)
    }

    /// `taskstream COMMAND ARGS` with `env` added to its environment.
    pub(crate) fn spawn_command(command: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(bin());
        cmd.arg(command)
            .args(args)
            .env_remove("TASKSTREAM_PRINCIPAL")
            .env("TASKSTREAM_LOG", "info")
            .envs(env.iter().copied());
        Server::spawn_from(cmd)
    }

    /// `cmd` (the server, or a program that runs it, such as a tracer) with its stdio piped
    /// to this client; its environment is the caller's to set.
    pub(crate) fn spawn_from(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn taskstream");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let gate = Arc::new(Gate::default());
        let (tx, out) = channel();
        let g = Arc::clone(&gate);
        std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(1024, stdout);
            loop {
                g.wait_open();
                let mut raw = String::new();
                match r.read_line(&mut raw) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let raw = raw.trim_end_matches('\n').to_owned();
                        let v: Value = serde_json::from_str(&raw)
                            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {raw}"));
                        if tx.send(Line { raw, v }).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let log = Arc::new(Stderr::default());
        let sink = Arc::clone(&log);
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lines.lock().expect("stderr").push(line);
                sink.grew.notify_all();
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            out,
            gate,
            backlog: VecDeque::new(),
            next_id: 1,
            stderr: log,
            stderr_reader: Some(stderr_reader),
        }
    }

    /// An in-memory server without fsync, plus `extra` flags.
    pub(crate) fn in_memory(extra: &[&str]) -> Server {
        let mut args = vec!["--in-memory", "--durability", "none"];
        args.extend_from_slice(extra);
        Server::spawn(&args)
    }

    /// A server on data dir `dir` as `principal`, without fsync, plus `extra` flags.
    pub(crate) fn on_dir(dir: &Path, principal: &str, extra: &[&str]) -> Server {
        let dir = dir.to_str().expect("utf-8 path");
        let mut args = vec![
            "--data-dir",
            dir,
            "--principal",
            principal,
            "--durability",
            "none",
        ];
        args.extend_from_slice(extra);
        Server::spawn(&args)
    }

    /// An in-memory server with a completed legacy handshake (2025-11-25).
    pub(crate) fn legacy(extra: &[&str]) -> Server {
        let mut s = Server::in_memory(extra);
        s.initialize("2025-11-25");
        s
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result, failing on
    /// an error.
    #[track_caller]
    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        let r = self.call(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes raw bytes (no newline added).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes one message.
    pub(crate) fn send(&mut self, v: &Value) {
        self.send_raw(v.to_string());
    }

    /// Writes one raw line (a newline is added).
    pub(crate) fn send_raw(&mut self, line: impl AsRef<[u8]>) {
        let line = line.as_ref();
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        self.write(&buf);
    }

    /// A fresh integer id.
    pub(crate) fn fresh_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Sends a request with a fresh integer id; returns the id.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.fresh_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Like [`request`](Self::request), `None` when the server no longer reads its stdin (it
    /// exited).
    pub(crate) fn try_request(&mut self, method: &str, params: Value) -> Option<i64> {
        let id = self.fresh_id();
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut()?;
        let mut buf = line.to_string().into_bytes();
        buf.push(b'\n');
        stdin.write_all(&buf).and_then(|()| stdin.flush()).ok()?;
        Some(id)
    }

    /// The exit status, if the process has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// `notifications/cancelled` for request `id`.
    pub(crate) fn cancel(&mut self, id: i64) {
        self.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": "test"}}),
        );
    }

    /// The first line (in arrival order, backlog first) matching `pred`, or `None` after
    /// `timeout`; the others are kept.
    pub(crate) fn try_recv_line(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Line> {
        if let Some(i) = self.backlog.iter().position(|l| pred(&l.v)) {
            return self.backlog.remove(i);
        }
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(l) if pred(&l.v) => return Some(l),
                Ok(l) => self.backlog.push_back(l),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Like [`try_recv_line`](Self::try_recv_line), the parse only.
    pub(crate) fn try_recv(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        self.try_recv_line(pred, timeout).map(|l| l.v)
    }

    /// The first line matching `pred`, failing after [`DEADLINE`].
    #[track_caller]
    pub(crate) fn recv_line(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Line {
        match self.try_recv_line(pred, DEADLINE) {
            Some(l) => l,
            None => panic!(
                "no {what} within {DEADLINE:?}; backlog {:?}; stderr {}",
                self.backlog
                    .iter()
                    .take(20)
                    .map(|l| &l.raw)
                    .collect::<Vec<_>>(),
                self.stderr()
            ),
        }
    }

    /// The first message matching `pred`, failing after [`DEADLINE`].
    #[track_caller]
    pub(crate) fn recv(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.recv_line(what, pred).v
    }

    /// The response with this id (`Value` form of the id).
    #[track_caller]
    pub(crate) fn response_to(&mut self, id: &Value) -> Line {
        let id = id.clone();
        self.recv_line(&format!("response {id}"), move |v| {
            v.get("id") == Some(&id) && v.get("method").is_none()
        })
    }

    /// The response to request `id` (result or error), as a line.
    #[track_caller]
    pub(crate) fn response_line(&mut self, id: i64) -> Line {
        self.response_to(&json!(id))
    }

    /// The response to request `id` (result or error).
    #[track_caller]
    pub(crate) fn response(&mut self, id: i64) -> Value {
        self.response_line(id).v
    }

    /// Sends a request and waits for its response, as a line.
    #[track_caller]
    pub(crate) fn call_line(&mut self, method: &str, params: Value) -> Line {
        let id = self.request(method, params);
        self.response_line(id)
    }

    /// Sends a request and waits for its response.
    #[track_caller]
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_line(method, params).v
    }

    /// Sends a request and returns its `result`, failing on an error.
    #[track_caller]
    pub(crate) fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// Sends a request and returns its `error`, failing on a result.
    #[track_caller]
    pub(crate) fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_some(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// Sends a request and returns its `error.code`, failing on a result.
    #[track_caller]
    pub(crate) fn error_code(&mut self, method: &str, params: Value) -> i64 {
        let r = self.call(method, params);
        r["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} should fail: {r}"))
    }

    /// The next error response with `id: null`.
    #[track_caller]
    pub(crate) fn null_id_error(&mut self) -> Value {
        self.recv("an error with id null", |v| {
            v.get("id") == Some(&Value::Null) && v.get("error").is_some()
        })["error"]
            .clone()
    }

    /// The next answer (a line without `method`; notifications are skipped) is the one to
    /// request `id`: nothing sent before it was answered (used after lines that must get no
    /// answer, such as notifications, or whose parts must not be answered, such as a batch).
    #[track_caller]
    pub(crate) fn assert_next_is_response(&mut self, id: i64) {
        let l = self.recv_line("an answer", |v| v.get("method").is_none());
        assert_eq!(
            l.v["id"],
            json!(id),
            "expected only the answer to {id}, got {}",
            l.raw
        );
    }

    /// Reads everything the server wrote before it answered a `ping` sent now, then drops the
    /// lines matching `pred` (e.g. leftovers of an earlier stream).
    pub(crate) fn discard_until_now(&mut self, pred: impl Fn(&Value) -> bool) {
        let id = self.request("ping", json!({}));
        self.response(id);
        self.backlog.retain(|l| !pred(&l.v));
    }

    /// Every message of stream request `id` for `task`, its events (whole notifications) in
    /// arrival order and, last, its response.
    #[track_caller]
    pub(crate) fn stream_messages(&mut self, id: i64, task: &str) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let v = self.recv(&format!("stream {id} message"), |v| {
                (v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == task)
                    || (v["id"] == json!(id) && v.get("method").is_none())
            });
            let answered = v.get("method").is_none();
            out.push(v);
            if answered {
                return out;
            }
        }
    }

    /// Collects the events of stream request `id` for `task` until its response; returns the
    /// events (params) in arrival order and the response.
    #[track_caller]
    pub(crate) fn collect_stream(&mut self, id: i64, task: &str) -> (Vec<Value>, Value) {
        let mut messages = self.stream_messages(id, task);
        let end = messages.pop().unwrap_or_default();
        let events = messages.into_iter().map(|m| m["params"].clone()).collect();
        (events, end)
    }

    /// Takes stdin, to write from another thread; give it back with
    /// [`give_stdin`](Self::give_stdin).
    pub(crate) fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin open")
    }

    /// Gives back what [`take_stdin`](Self::take_stdin) took.
    pub(crate) fn give_stdin(&mut self, stdin: ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Waits for a stderr line containing `needle`; returns it.
    #[track_caller]
    pub(crate) fn wait_stderr(&self, needle: &str) -> String {
        let end = Instant::now() + DEADLINE;
        let mut lines = self.stderr.lines.lock().expect("stderr");
        loop {
            if let Some(l) = lines.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let left = end.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no stderr line with {needle:?}; stderr: {}",
                lines.join("\n")
            );
            lines = self
                .stderr
                .grew
                .wait_timeout(lines, left)
                .expect("stderr")
                .0;
        }
    }

    /// Every stderr line so far, each ended by a newline.
    pub(crate) fn stderr(&self) -> String {
        let lines = self.stderr.lines.lock().expect("stderr");
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Closes stdin, waits for the exit, and returns everything the server wrote to stderr
    /// (read to its end).
    #[track_caller]
    pub(crate) fn shutdown_and_log(&mut self) -> (ExitStatus, String) {
        let status = self.shutdown();
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().expect("stderr reader");
        }
        (status, self.stderr())
    }

    /// The server's resident memory (VmRSS) in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// The server's peak resident memory so far (VmHWM) in KiB.
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        status_kib(self.pid(), "VmHWM:")
    }

    /// Stops reading stdout (the server's pipe fills up) until
    /// [`resume_reading`](Self::resume_reading).
    pub(crate) fn pause_reading(&self) {
        self.gate.set(true);
    }

    /// Reads stdout again.
    pub(crate) fn resume_reading(&self) {
        self.gate.set(false);
    }

    /// Closes stdin (EOF).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin and waits for the exit.
    #[track_caller]
    pub(crate) fn shutdown(&mut self) -> ExitStatus {
        self.stdin = None;
        self.gate.set(false);
        self.wait_exit()
    }

    /// Waits for the process to exit.
    #[track_caller]
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < end, "server did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, as a crash.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.gate.set(false);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of process `pid` in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A memory line (`VmRSS:`, `VmHWM:`) of process `pid`'s status, in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in the status of {pid}"))
}

/// Modern `_meta` added to `params`; `tasks` declares the Tasks extension.
pub(crate) fn modern(mut params: Value, tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    });
    params
}

/// The event seqs of a collected stream.
pub(crate) fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect()
}
