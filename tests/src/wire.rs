//! The server under test as a child process: lines out on its stdin, lines in from its stdout,
//! each read with a deadline.
//!
//! A reader thread turns stdout into a channel of [`Incoming`] items, so a wait is a
//! `recv_timeout` and never a sleep. stderr is drained by another thread, which keeps its start
//! (echoed when verbose), because a server may log there freely (MCP-DIGEST a.5). This module
//! knows newline framing and JSON syntax, nothing of MCP. A server reached over Streamable HTTP
//! (`crate::http`) is read through the same channel.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::{Gate, HttpConn};

/// How much of the server's stderr is kept for error messages: the start of it.
const STDERR_KEPT_BYTES: usize = 4096;

/// One item read from the server's stdout.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A line that parsed as JSON.
    Message(Value),
    /// A line that did not (kept for the verbose log).
    Garbage(String),
    /// stdout reached end of file: the server is gone.
    Closed,
}

/// A running server process, or a connection to a Streamable HTTP endpoint.
pub(crate) struct ServerUnderTest {
    backend: Backend,
    lines: Receiver<Incoming>,
    label: String,
    verbose: bool,
    closed: bool,
}

enum Backend {
    Process {
        child: Child,
        stdin: Option<ChildStdin>,
        stderr_kept: Arc<Mutex<Vec<u8>>>,
        /// Signalled when stderr reaches end of file.
        stderr_done: Receiver<()>,
        /// Passed by the stdout reader before each line: closed, it stops reading.
        gate: Arc<Gate>,
    },
    Http(HttpConn),
}

/// The URL when `command` names a Streamable HTTP endpoint: one word, `http://…`.
pub(crate) fn http_url(command: &[String]) -> Option<&str> {
    match command {
        [url] if url.starts_with("http://") => Some(url),
        _ => None,
    }
}

impl ServerUnderTest {
    /// Starts `command` (program first) with piped stdio. `label` names it in the verbose log.
    ///
    /// # Errors
    ///
    /// The spawn error, or `InvalidInput` for an empty command.
    pub(crate) fn spawn(
        command: &[String],
        label: &str,
        verbose: bool,
    ) -> io::Result<ServerUnderTest> {
        let Some((program, args)) = command.split_first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty server command",
            ));
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        let gate = Arc::new(Gate::default());
        if let Some(stdout) = child.stdout.take() {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    gate.wait_open();
                    buf.clear();
                    match reader.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let text = String::from_utf8_lossy(&buf);
                    let text = text.trim_end_matches(['\n', '\r']);
                    if text.trim().is_empty() {
                        continue;
                    }
                    let item = match serde_json::from_str::<Value>(text) {
                        Ok(value) => Incoming::Message(value),
                        Err(_) => Incoming::Garbage(text.to_owned()),
                    };
                    if tx.send(item).is_err() {
                        return;
                    }
                }
                let _ = tx.send(Incoming::Closed);
            });
        }
        let stderr_kept = Arc::new(Mutex::new(Vec::new()));
        let (done, stderr_done) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            let kept = Arc::clone(&stderr_kept);
            let echo = verbose.then(|| label.to_owned());
            thread::spawn(move || {
                drain_stderr(stderr, &kept, echo.as_deref());
                let _ = done.send(());
            });
        }
        Ok(ServerUnderTest {
            backend: Backend::Process {
                child,
                stdin,
                stderr_kept,
                stderr_done,
                gate,
            },
            lines,
            label: label.to_owned(),
            verbose,
            closed: false,
        })
    }

    /// A connection to the Streamable HTTP endpoint `url`, in the modern era's HTTP rules or
    /// the legacy one's.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a URL this client cannot speak to.
    pub(crate) fn connect_http(
        url: &str,
        modern: bool,
        label: &str,
        verbose: bool,
    ) -> io::Result<ServerUnderTest> {
        let (tx, lines) = mpsc::channel();
        let conn = HttpConn::new(url, modern, tx)
            .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        Ok(ServerUnderTest {
            backend: Backend::Http(conn),
            lines,
            label: label.to_owned(),
            verbose,
            closed: false,
        })
    }

    /// Whether this is a Streamable HTTP connection.
    pub(crate) fn is_http(&self) -> bool {
        matches!(self.backend, Backend::Http(_))
    }

    /// Stops (true) or resumes (false) reading what the server sends: a slow client.
    pub(crate) fn pause_reading(&self, pause: bool) {
        match &self.backend {
            Backend::Http(conn) => conn.pause(pause),
            Backend::Process { gate, .. } => gate.set(pause),
        }
    }

    /// Writes one message as one line.
    ///
    /// # Errors
    ///
    /// The write error (typically a broken pipe once the server has exited).
    pub(crate) fn send(&mut self, line: &str) -> io::Result<()> {
        if self.verbose {
            eprintln!("[{}] > {}", self.label, line);
        }
        let stdin = match &mut self.backend {
            Backend::Http(conn) => return conn.send(line),
            Backend::Process { stdin, .. } => stdin,
        };
        let Some(stdin) = stdin.as_mut() else {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdin closed"));
        };
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()
    }

    /// The next item from stdout, or `None` once `deadline` has passed. After [`Incoming::Closed`]
    /// every call answers `Closed` at once.
    pub(crate) fn recv(&mut self, deadline: Instant) -> Option<Incoming> {
        if self.closed {
            return Some(Incoming::Closed);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let item = match self.lines.recv_timeout(wait) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => Incoming::Closed,
        };
        if self.verbose {
            match &item {
                Incoming::Message(value) => eprintln!("[{}] < {}", self.label, value),
                Incoming::Garbage(text) => eprintln!("[{}] < (not JSON) {}", self.label, text),
                Incoming::Closed => eprintln!("[{}] < (stdout closed)", self.label),
            }
        }
        if matches!(item, Incoming::Closed) {
            self.closed = true;
        }
        Some(item)
    }

    /// The first line the server wrote to stderr (of what is kept), for an error message: where
    /// a server explains why it stopped. Once the server has exited, its last words may still
    /// be on their way: they are awaited briefly.
    pub(crate) fn stderr_head(&self) -> String {
        let Backend::Process {
            stderr_kept,
            stderr_done,
            ..
        } = &self.backend
        else {
            return "(an HTTP endpoint: no stderr to show)".to_owned();
        };
        if self.closed {
            let _ = stderr_done.recv_timeout(Duration::from_millis(200));
        }
        let kept = match stderr_kept.lock() {
            Ok(kept) => kept.clone(),
            Err(_) => Vec::new(),
        };
        let text = String::from_utf8_lossy(&kept);
        text.trim().lines().next().unwrap_or("").to_owned()
    }
}

impl Drop for ServerUnderTest {
    fn drop(&mut self) {
        // An HTTP connection closes itself (`HttpConn`'s drop); the endpoint serves on.
        let Backend::Process {
            child, stdin, gate, ..
        } = &mut self.backend
        else {
            return;
        };
        gate.set(false);
        // Closing stdin asks a well-behaved server to exit (MCP-DIGEST a.5); give it a moment,
        // then make sure.
        drop(stdin.take());
        let deadline = Instant::now() + Duration::from_millis(200);
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn drain_stderr(mut stderr: impl Read, kept: &Mutex<Vec<u8>>, echo: Option<&str>) {
    let mut buf = [0u8; 1024];
    loop {
        let n = match stderr.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let chunk = buf.get(..n).unwrap_or_default();
        if let Some(label) = echo {
            for line in String::from_utf8_lossy(chunk).lines() {
                eprintln!("[{label}] stderr: {line}");
            }
        }
        if let Ok(mut kept) = kept.lock() {
            let room = STDERR_KEPT_BYTES.saturating_sub(kept.len());
            kept.extend(chunk.iter().take(room));
        }
    }
}
