//! A small wire client for the black-box tests: spawns the real `taskstream serve`, writes
//! lines to its stdin, and waits for specific lines on its stdout (and stderr) with a deadline,
//! never a fixed sleep.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long any single expected line may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

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

pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Value>,
    err: Receiver<String>,
    gate: Arc<Gate>,
    backlog: VecDeque<Value>,
    next_id: i64,
    /// Every stderr line seen so far.
    pub(crate) stderr: Vec<String>,
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
        let mut child = Command::new(bin())
            .arg(command)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("TASKSTREAM_PRINCIPAL")
            .env("TASKSTREAM_LOG", "info")
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
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let v: Value = serde_json::from_str(&line)
                            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let (etx, err) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if etx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            out,
            err,
            gate,
            backlog: VecDeque::new(),
            next_id: 1,
            stderr: Vec::new(),
        }
    }

    /// An in-memory server without fsync, plus `extra` flags.
    pub(crate) fn in_memory(extra: &[&str]) -> Server {
        let mut args = vec!["--in-memory", "--durability", "none"];
        args.extend_from_slice(extra);
        Server::spawn(&args)
    }

    /// An in-memory server with a completed legacy handshake (2025-11-25).
    pub(crate) fn legacy(extra: &[&str]) -> Server {
        let mut s = Server::in_memory(extra);
        s.initialize("2025-11-25");
        s
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        let r = self.call(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    /// Writes one message.
    pub(crate) fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string());
    }

    /// Writes one raw line (a newline is added).
    pub(crate) fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request with a fresh integer id; returns the id.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// `notifications/cancelled` for request `id`.
    pub(crate) fn cancel(&mut self, id: i64) {
        self.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": "test"}}),
        );
    }

    /// The first message (in arrival order, backlog first) matching `pred`; others are kept.
    #[track_caller]
    pub(crate) fn recv(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.try_recv(pred, DEADLINE)
            .unwrap_or_else(|| panic!("no {what} within {DEADLINE:?}; backlog {:?}", self.backlog))
    }

    /// Like [`recv`](Self::recv), `None` after `timeout`.
    pub(crate) fn try_recv(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(v) if pred(&v) => return Some(v),
                Ok(v) => self.backlog.push_back(v),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The response to request `id` (result or error).
    #[track_caller]
    pub(crate) fn response(&mut self, id: i64) -> Value {
        self.recv(&format!("response {id}"), |v| {
            v["id"] == json!(id) && v.get("method").is_none()
        })
    }

    /// Sends a request and waits for its response.
    #[track_caller]
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id)
    }

    /// Sends a request and returns its `result`, failing on an error.
    #[track_caller]
    pub(crate) fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// Sends a request and returns its `error.code`, failing on a result.
    #[track_caller]
    pub(crate) fn error_code(&mut self, method: &str, params: Value) -> i64 {
        let r = self.call(method, params);
        r["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} should fail: {r}"))
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

    /// Waits for a stderr line containing `needle`.
    #[track_caller]
    pub(crate) fn wait_stderr(&mut self, needle: &str) -> String {
        if let Some(l) = self.stderr.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.err.recv_timeout(left) {
                Ok(l) => {
                    self.stderr.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => panic!("no stderr line with {needle:?}; saw {:?}", self.stderr),
            }
        }
    }

    /// Stops reading stdout (the server's pipe fills up) until [`resume_reading`].
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
