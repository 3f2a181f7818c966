//! A minimal MCP client over a child process's stdin and stdout, built to measure: it reads raw
//! bytes through [`Lines`], recognises event notifications by their first bytes and their seq by
//! a substring search, and parses JSON only for the few other lines (responses). The same
//! client reads taskstream, the TypeScript SDK's stdio server and the raw pipe writer.

use std::io::{self, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::lines::{is_event, seq_of, Lines};

/// What a client received of a run of events.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Received {
    /// From the start instant to the first event.
    pub first: Duration,
    /// From the start instant to the last event counted.
    pub last: Duration,
    /// Events counted.
    pub events: u64,
    /// Events whose seq was below the seq of the event before them.
    pub out_of_order: u64,
    /// Bytes of the event lines (with their newlines).
    pub bytes: u64,
}

impl Received {
    /// Events per second, first byte of the run (the start instant) to the last event.
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.last.as_secs_f64()
    }
}

/// Counts event lines (see [`is_event`]) until `expected` arrived, ignoring other lines but
/// error answers. Returns early (with fewer events) at the end of the input.
///
/// # Errors
/// The reader's error, or an error answer (a stream that fell behind retention, say), which
/// would otherwise leave the count waiting forever.
pub fn count_events<R: io::Read>(
    lines: &mut Lines<R>,
    start: Instant,
    expected: u64,
) -> io::Result<Received> {
    let mut got = Received::default();
    let mut prev: Option<u64> = None;
    while got.events < expected {
        let Some(line) = lines.next_line()? else {
            break;
        };
        if !is_event(line) {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                if v.get("error").is_some() {
                    return Err(protocol(format!(
                        "an error answer while events were expected: {v}"
                    )));
                }
            }
            continue;
        }
        if got.events == 0 {
            got.first = start.elapsed();
        }
        got.events += 1;
        got.bytes += line.len() as u64 + 1;
        let seq = seq_of(line);
        if let (Some(p), Some(s)) = (prev, seq) {
            if s < p {
                got.out_of_order += 1;
            }
        }
        prev = seq.or(prev);
    }
    got.last = start.elapsed();
    Ok(got)
}

/// A server child process spoken to over stdio.
pub struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its stdout, split into lines.
    pub lines: Lines<ChildStdout>,
    next_id: u64,
}

fn protocol(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl StdioServer {
    /// Spawns `cmd` with piped stdin and stdout (stderr is discarded unless
    /// `$TASKSTREAM_BENCH_STDERR` is set).
    ///
    /// # Errors
    /// If it cannot be started.
    pub fn spawn(cmd: &mut Command) -> io::Result<StdioServer> {
        let stderr = if std::env::var_os("TASKSTREAM_BENCH_STDERR").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        Ok(StdioServer {
            child,
            stdin,
            lines: Lines::new(stdout),
            next_id: 1,
        })
    }

    /// Writes one line (a `\n` is added).
    ///
    /// # Errors
    /// If the server's stdin is closed.
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("stdin closed"))?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        stdin.write_all(&buf)?;
        stdin.flush()
    }

    /// Sends a request; returns its id.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn request(&mut self, method: &str, params: &Value) -> io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&line.to_string())?;
        Ok(id)
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn notify(&mut self, method: &str, params: &Value) -> io::Result<()> {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&line.to_string())
    }

    /// Reads until the response to request `id`; returns its `result`. Other lines are skipped.
    ///
    /// # Errors
    /// The end of the output, or an error response.
    pub fn response(&mut self, id: u64) -> io::Result<Value> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                return Err(protocol(format!("the server closed before answering {id}")));
            };
            if is_event(line) {
                continue;
            }
            let Ok(msg) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            if msg.get("id").and_then(Value::as_u64) != Some(id) || msg.get("method").is_some() {
                continue;
            }
            if let Some(result) = msg.get("result") {
                return Ok(result.clone());
            }
            return Err(protocol(format!("request {id} failed: {msg}")));
        }
    }

    /// A request and its answer.
    ///
    /// # Errors
    /// As [`response`](Self::response).
    pub fn call(&mut self, method: &str, params: &Value) -> io::Result<Value> {
        let id = self.request(method, params)?;
        self.response(id)
    }

    /// The legacy handshake: `initialize` with `version`, then `notifications/initialized`.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn initialize(&mut self, version: &str) -> io::Result<Value> {
        let result = self.call(
            "initialize",
            &json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "taskstream-benches", "version": "0"},
            }),
        )?;
        self.notify("notifications/initialized", &json!({}))?;
        Ok(result)
    }

    /// Counts events until `expected` arrived (see [`count_events`]).
    ///
    /// # Errors
    /// The reader's error.
    pub fn events(&mut self, start: Instant, expected: u64) -> io::Result<Received> {
        count_events(&mut self.lines, start, expected)
    }

    /// Calls taskstream's `emit {count, payload_bytes}` as a task (SEP-1686 `params.task`);
    /// returns the task id.
    ///
    /// # Errors
    /// As [`call`](Self::call), or an answer without a task id.
    pub fn emit_task(&mut self, count: u64, payload_bytes: usize) -> io::Result<String> {
        let result = self.call(
            "tools/call",
            &json!({
                "name": "emit",
                "arguments": {"count": count, "payload_bytes": payload_bytes},
                "task": {"ttl": 3_600_000},
            }),
        )?;
        result
            .pointer("/task/taskId")
            .or_else(|| result.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| protocol(format!("no task id in {result}")))
    }

    /// Polls `tasks/get` every 2 ms until the task is terminal; returns its status.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn wait_terminal(&mut self, task_id: &str) -> io::Result<String> {
        loop {
            let r = self.call("tasks/get", &json!({"taskId": task_id}))?;
            let status = r
                .get("status")
                .or_else(|| r.pointer("/task/status"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Sends `tasks/stream {taskId, after?}`; returns the request id.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn open_stream(&mut self, task_id: &str, after: Option<u64>) -> io::Result<u64> {
        let mut params = json!({"taskId": task_id});
        if let Some(after) = after {
            params["after"] = json!(after);
        }
        self.request("tasks/stream", &params)
    }

    /// Cancels request `id` (`notifications/cancelled`), then reads past the answer to a
    /// `ping` sent after it: no frame of the cancelled stream follows that answer.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn cancel_and_settle(&mut self, id: u64) -> io::Result<()> {
        self.notify(
            "notifications/cancelled",
            &json!({"requestId": id, "reason": "benchmark"}),
        )?;
        self.call("ping", &json!({})).map(drop)
    }

    /// Closes stdin and waits for the process to exit.
    ///
    /// # Errors
    /// If waiting fails.
    pub fn close(mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        // Drain whatever is left so the server is not blocked writing.
        while self.lines.next_line()?.is_some() {}
        self.child.wait()
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
