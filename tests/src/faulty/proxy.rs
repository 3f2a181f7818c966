//! A fault for Streamable HTTP servers: a proxy in front of a correct server that kills a task
//! when the connection that streamed it closes, as a server whose tasks belong to their
//! connection would. It passes every request on unchanged and kills by sending `tasks/cancel`
//! for the task upstream, with the stream request's own headers and `_meta` (so in the same
//! era, session and principal):
//!
//! - **2026-07-28**, where a request is its own connection: when a client has closed a
//!   `tasks/stream` response before the server ended it.
//! - **2025-11-25**, where the connection is the session: when the session ends (`DELETE`),
//!   every task it streamed, before the `DELETE` is passed on.
//!
//! The long-lived group of the suite must catch it (TS-08); the proxy exists for the suite's
//! own tests of that group, against a real HTTP server.
//!
//! The kill is deterministic, not a race with the client's next step: before any request is
//! passed on, every stream response whose client has closed its end is found (a closed socket
//! reads its end at once) and its task is cancelled, and the cancel is answered, first. A
//! client that closes a stream and then asks about its task always finds it killed.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

/// Bound on a request's head and body.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// A running proxy; it stops accepting when dropped.
pub struct KillOnDisconnect {
    /// `http://127.0.0.1:PORT/PATH`: the proxy's endpoint.
    pub url: String,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

/// A `tasks/stream` response being copied to its client.
struct Flight {
    /// The client's socket, read only to see whether the client closed it.
    client: TcpStream,
    /// The server's socket, shut down when the task is killed.
    server: TcpStream,
    /// The stream request's head lines, for the cancel.
    head: Vec<String>,
    /// The stream request.
    request: Value,
    /// Its `Mcp-Session-Id`, if any.
    session: Option<String>,
    /// Set once: the server ended the response, or the proxy killed the task.
    settled: AtomicBool,
}

/// The streams the proxy has seen.
#[derive(Default)]
struct Seen {
    /// The stream responses in flight in the modern era (no session).
    flights: Mutex<Vec<Arc<Flight>>>,
    /// Every stream each legacy session opened.
    sessions: Mutex<HashMap<String, Vec<Arc<Flight>>>>,
}

impl KillOnDisconnect {
    /// Starts the proxy for the endpoint `upstream` (`http://HOST:PORT/PATH`) on a free loopback
    /// port.
    ///
    /// # Errors
    ///
    /// A URL that is not `http://HOST:PORT/PATH`, or the bind error.
    pub fn start(upstream: &str) -> io::Result<KillOnDisconnect> {
        let rest = upstream
            .strip_prefix("http://")
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an http:// URL"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let authority = authority.to_owned();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let seen = Arc::new(Seen::default());
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else {
                    continue;
                };
                let authority = authority.clone();
                let seen = Arc::clone(&seen);
                thread::spawn(move || {
                    let _ = serve(client, &authority, &seen);
                });
            }
        });
        Ok(KillOnDisconnect {
            url: format!("http://{addr}{path}"),
            stop,
            addr,
        })
    }
}

impl Drop for KillOnDisconnect {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// One request: read it whole, kill what its client's earlier steps closed, pass it on, copy
/// the answer back.
fn serve(client: TcpStream, authority: &str, seen: &Seen) -> io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    let mut session = None;
    loop {
        let mut line = Vec::new();
        let n = reader
            .by_ref()
            .take(MAX_REQUEST_BYTES as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        let end = text.trim().is_empty();
        match text.split_once(':').map(|(n, v)| (n.trim(), v.trim())) {
            Some((name, _)) if name.eq_ignore_ascii_case("host") => {
                // The server checks `Host` against its own address.
                head.push(format!("Host: {authority}\r\n"));
                continue;
            }
            Some((name, value)) if name.eq_ignore_ascii_case("content-length") => {
                length = value.parse().unwrap_or(0).min(MAX_REQUEST_BYTES);
            }
            Some((name, value)) if name.eq_ignore_ascii_case("mcp-session-id") => {
                session = Some(value.to_owned());
            }
            _ => {}
        }
        head.push(text);
        if end {
            break;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;

    // What the client closed before this request is dead before this request is served; a
    // session's end kills every task it streamed.
    reap(seen, authority);
    if head.first().is_some_and(|line| line.starts_with("DELETE ")) {
        let streamed = session
            .as_ref()
            .and_then(|id| lock(&seen.sessions).remove(id))
            .unwrap_or_default();
        for flight in streamed {
            flight.settled.store(true, Ordering::Release);
            let _ = flight.server.shutdown(Shutdown::Both);
            let _ = cancel_task(authority, &flight.head, &flight.request);
        }
    }

    let mut server = TcpStream::connect(authority)?;
    server.write_all(head.concat().as_bytes())?;
    server.write_all(&body)?;
    let flight = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("tasks/stream"))
        .map(|request| -> io::Result<Arc<Flight>> {
            let flight = Arc::new(Flight {
                client: client.try_clone()?,
                server: server.try_clone()?,
                head: head.clone(),
                request,
                session: session.clone(),
                settled: AtomicBool::new(false),
            });
            match &session {
                Some(id) => lock(&seen.sessions)
                    .entry(id.clone())
                    .or_default()
                    .push(Arc::clone(&flight)),
                None => lock(&seen.flights).push(Arc::clone(&flight)),
            }
            Ok(flight)
        })
        .transpose()?;
    let mut client_out = client;
    let copied = io::copy(&mut server, &mut client_out);
    if let Some(flight) = flight.filter(|f| f.session.is_none()) {
        if copied.is_err() {
            // The answer could not be written: the client closed it.
            kill(&flight, authority);
        }
        flight.settled.store(true, Ordering::Release);
        lock(&seen.flights).retain(|f| !Arc::ptr_eq(f, &flight));
    }
    let _ = client_out.shutdown(Shutdown::Both);
    copied.map(|_| ())
}

/// Kills the task of every modern stream in flight whose client closed it.
fn reap(seen: &Seen, authority: &str) {
    let open: Vec<Arc<Flight>> = lock(&seen.flights).clone();
    for flight in open {
        if closed(&flight.client) {
            kill(&flight, authority);
        }
    }
}

/// Whether the peer closed `socket`: its end (or a reset) is there to read at once.
fn closed(socket: &TcpStream) -> bool {
    if socket
        .set_read_timeout(Some(Duration::from_millis(1)))
        .is_err()
    {
        return true;
    }
    match socket.peek(&mut [0u8; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
        ),
    }
}

/// Kills a stream's task once: the stream is cut upstream and the task cancelled.
fn kill(flight: &Flight, authority: &str) {
    if flight.settled.swap(true, Ordering::AcqRel) {
        return;
    }
    let _ = flight.server.shutdown(Shutdown::Both);
    let _ = cancel_task(authority, &flight.head, &flight.request);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
/// `tasks/cancel` for the stream request's task, with its headers and `_meta`.
fn cancel_task(authority: &str, head: &[String], request: &Value) -> io::Result<()> {
    let mut params = json!({});
    if let Some(task) = request.pointer("/params/taskId") {
        params["taskId"] = task.clone();
    }
    if let Some(meta) = request.pointer("/params/_meta") {
        params["_meta"] = meta.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": "kill-on-disconnect", "method": "tasks/cancel", "params": params})
        .to_string();
    let mut out = String::new();
    for (i, line) in head.iter().enumerate() {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if i > 0 && matches!(name.as_str(), "content-length" | "mcp-method" | "accept") {
            continue;
        }
        if line.trim().is_empty() {
            break;
        }
        out.push_str(line);
    }
    out.push_str(&format!(
        "Mcp-Method: tasks/cancel\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let mut upstream = TcpStream::connect(authority)?;
    upstream.set_read_timeout(Some(Duration::from_secs(5)))?;
    upstream.write_all(out.as_bytes())?;
    let mut answer = Vec::new();
    let _ = upstream.read_to_end(&mut answer);
    Ok(())
}
