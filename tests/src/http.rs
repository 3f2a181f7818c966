//! The server under test as an MCP Streamable HTTP endpoint: every message the session writes
//! becomes one `POST` to the endpoint, and every message in an answer (a JSON body, or each
//! `data:` of a `text/event-stream` body) comes back as one [`Incoming`] item, in the order
//! read, on the same channel a stdio server's stdout lines take.
//!
//! The HTTP client is this module's own, on `std::net` (HTTP/1.1, one TCP connection per
//! request, `Connection: close`, chunked or sized bodies), so that closing a response is
//! closing its socket, from any thread, at once.
//!
//! - **2026-07-28**: every request is a connection of its own. `Mcp-Method`, and `Mcp-Name` for
//!   `tools/call` and `tasks/*`, are sent from the body. Cancelling a request
//!   (`notifications/cancelled`) is closing its response: nothing read from it afterwards is
//!   passed on.
//! - **2025-11-25**: the `initialize` answer's `Mcp-Session-Id` is sent on every later request,
//!   a `GET` stream takes the session's other server messages, and dropping the connection
//!   ends the session with `DELETE`.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::wire::Incoming;

/// The session header (2025-11-25).
const SESSION: &str = "mcp-session-id";
/// Bound on a response's head (status line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Bound on one body or one SSE event.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How long sending a notification waits for its answer (the server handles it first) before
/// going on regardless, for a server that never answers one.
const NOTIFICATION_ANSWER: Duration = Duration::from_secs(10);

/// An endpoint `http://host:port/path`.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// `host:port`, as sent in `Host`.
    authority: String,
    path: String,
}

impl Endpoint {
    /// Parses `http://host[:port][/path]` (`https` is not spoken).
    pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("{url:?} names no host"));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Endpoint {
            authority,
            path: path.to_owned(),
        })
    }
}

/// A request in flight: its socket, to close it, and whether it was cancelled.
struct InFlight {
    socket: TcpStream,
    cancelled: Arc<AtomicBool>,
}

/// A gate the readers pass before each message: closed, they stop reading (and so the server's
/// writes back up), which is how a slow client is made.
#[derive(Default)]
pub(crate) struct Gate {
    paused: Mutex<bool>,
    turn: Condvar,
}

impl Gate {
    /// Waits while the gate is closed.
    pub(crate) fn wait_open(&self) {
        let mut paused = self.paused.lock().unwrap_or_else(PoisonError::into_inner);
        while *paused {
            paused = self
                .turn
                .wait(paused)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Closes (true) or opens (false) the gate.
    pub(crate) fn set(&self, pause: bool) {
        *self.paused.lock().unwrap_or_else(PoisonError::into_inner) = pause;
        self.turn.notify_all();
    }
}

/// What the reader threads share with the connection.
struct HttpConnState {
    endpoint: Endpoint,
    modern: bool,
    session: Mutex<Option<String>>,
    in_flight: Mutex<HashMap<String, InFlight>>,
    /// Sockets of the `GET` streams, closed with the connection.
    streams: Mutex<Vec<TcpStream>>,
    /// Serialises the passing on of messages with cancellation: once a request is cancelled,
    /// nothing of its response is passed on.
    deliver: Mutex<()>,
    gate: Gate,
    tx: Sender<Incoming>,
    /// Set when the endpoint refused a connection: the server is gone.
    gone: AtomicBool,
}

/// One client connection to a Streamable HTTP endpoint, in one era.
pub(crate) struct HttpConn {
    shared: Arc<HttpConnState>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HttpConn {
    /// A connection to `url`; `modern` picks the era's HTTP rules. Nothing is sent yet.
    pub(crate) fn new(url: &str, modern: bool, tx: Sender<Incoming>) -> Result<HttpConn, String> {
        let endpoint = Endpoint::parse(url)?;
        Ok(HttpConn {
            shared: Arc::new(HttpConnState {
                endpoint,
                modern,
                session: Mutex::new(None),
                in_flight: Mutex::new(HashMap::new()),
                streams: Mutex::new(Vec::new()),
                deliver: Mutex::new(()),
                gate: Gate::default(),
                tx,
                gone: AtomicBool::new(false),
            }),
        })
    }

    /// Sends one message. Requests are answered on the channel; a modern cancellation closes
    /// the cancelled request's response instead of being posted.
    pub(crate) fn send(&self, line: &str) -> io::Result<()> {
        if self.shared.gone.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "the endpoint refused a connection",
            ));
        }
        let message = serde_json::from_str::<Value>(line).ok();
        let method = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = message
            .as_ref()
            .and_then(|m| m.get("id"))
            .filter(|_| method.is_some())
            .map(Value::to_string);
        if self.shared.modern && method.as_deref() == Some("notifications/cancelled") {
            let target = message
                .as_ref()
                .and_then(|m| m.pointer("/params/requestId"))
                .map(Value::to_string);
            if let Some(target) = target {
                self.close_request(&target);
            }
            return Ok(());
        }
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            (
                "Accept".to_owned(),
                "application/json, text/event-stream".to_owned(),
            ),
        ];
        if self.shared.modern {
            if let Some(method) = &method {
                headers.push(("Mcp-Method".to_owned(), method.clone()));
                let name = message.as_ref().and_then(|m| {
                    let params = m.get("params")?;
                    if method == "tools/call" {
                        params.get("name")?.as_str()
                    } else if method.starts_with("tasks/") {
                        params.get("taskId")?.as_str()
                    } else {
                        None
                    }
                });
                if let Some(name) = name.filter(|n| is_header_value(n)) {
                    headers.push(("Mcp-Name".to_owned(), name.to_owned()));
                }
            }
        } else if let Some(session) = lock(&self.shared.session).clone() {
            headers.push(("Mcp-Session-Id".to_owned(), session));
            headers.push(("MCP-Protocol-Version".to_owned(), "2025-11-25".to_owned()));
        }
        let socket = self.shared.connect()?;
        write_request(
            &socket,
            &self.shared.endpoint,
            "POST",
            &headers,
            line.as_bytes(),
        )?;
        let cancelled = Arc::new(AtomicBool::new(false));
        if let Some(id) = &id {
            if let Ok(clone) = socket.try_clone() {
                lock(&self.shared.in_flight).insert(
                    id.clone(),
                    InFlight {
                        socket: clone,
                        cancelled: Arc::clone(&cancelled),
                    },
                );
            }
        }
        let shared = Arc::clone(&self.shared);
        let initialize = method.as_deref() == Some("initialize");
        let notification = id.is_none();
        let (done, answered) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = shared.read_response(socket, &cancelled, initialize);
            if let Some(id) = id {
                lock(&shared.in_flight).remove(&id);
            }
            let _ = done.send(());
        });
        if notification {
            // Each POST is a connection of its own, so a notification is ordered before the
            // next message only once it is answered (202): a `notifications/cancelled`
            // followed by a barrier request must reach the server first, as on stdio.
            let _ = answered.recv_timeout(NOTIFICATION_ANSWER);
        }
        Ok(())
    }

    /// Stops (true) or resumes (false) reading every response of this connection.
    pub(crate) fn pause(&self, pause: bool) {
        self.shared.gate.set(pause);
    }

    fn close_request(&self, key: &str) {
        let _order = lock(&self.shared.deliver);
        if let Some(flight) = lock(&self.shared.in_flight).remove(key) {
            flight.cancelled.store(true, Ordering::Release);
            let _ = flight.socket.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for HttpConn {
    /// Drops the connection: every response is closed (without a cancellation), and a legacy
    /// session is ended with `DELETE`, which ends the session, not its tasks.
    fn drop(&mut self) {
        self.shared.gate.set(false);
        {
            let _order = lock(&self.shared.deliver);
            for (_, flight) in lock(&self.shared.in_flight).drain() {
                flight.cancelled.store(true, Ordering::Release);
                let _ = flight.socket.shutdown(Shutdown::Both);
            }
            for socket in lock(&self.shared.streams).drain(..) {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
        let session = lock(&self.shared.session).take();
        if let Some(session) = session {
            if let Ok(socket) = self.shared.connect() {
                let headers = [("Mcp-Session-Id".to_owned(), session)];
                if write_request(&socket, &self.shared.endpoint, "DELETE", &headers, b"").is_ok() {
                    let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut reader = BufReader::new(&socket);
                    let _ = read_head(&mut reader);
                }
            }
        }
    }
}

impl HttpConnState {
    fn connect(&self) -> io::Result<TcpStream> {
        let addrs = self.endpoint.authority.to_socket_addrs()?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(socket) => {
                    let _ = socket.set_nodelay(true);
                    return Ok(socket);
                }
                Err(error) => last = error,
            }
        }
        if last.kind() == io::ErrorKind::ConnectionRefused {
            self.gone.store(true, Ordering::Release);
            let _ = self.tx.send(Incoming::Closed);
        }
        Err(last)
    }

    /// Passes one message on, unless its request was cancelled.
    fn deliver(&self, cancelled: &AtomicBool, text: &str) {
        self.gate.wait_open();
        let _order = lock(&self.deliver);
        if cancelled.load(Ordering::Acquire) {
            return;
        }
        let item = match serde_json::from_str::<Value>(text) {
            Ok(value) => Incoming::Message(value),
            Err(_) => Incoming::Garbage(text.to_owned()),
        };
        let _ = self.tx.send(item);
    }

    fn read_response(
        self: &Arc<Self>,
        socket: TcpStream,
        cancelled: &AtomicBool,
        initialize: bool,
    ) -> io::Result<()> {
        let mut reader = BufReader::new(socket);
        let head = read_head(&mut reader)?;
        if initialize {
            if let Some(session) = head.header(SESSION) {
                *lock(&self.session) = Some(session.to_owned());
                self.open_get_stream(session.to_owned());
            }
        }
        let mut body = head.body(reader);
        if head.is_event_stream() {
            read_events(&mut body, |data| self.deliver(cancelled, data))
        } else {
            let mut text = Vec::new();
            body.by_ref()
                .take(MAX_BODY_BYTES as u64)
                .read_to_end(&mut text)?;
            let text = String::from_utf8_lossy(&text);
            if !text.trim().is_empty() {
                self.deliver(cancelled, text.trim());
            } else if head.status >= 400 {
                self.deliver(cancelled, &format!("HTTP {} with no body", head.status));
            }
            Ok(())
        }
    }

    /// The session's `GET` stream (2025-11-25), for server messages no request answers.
    fn open_get_stream(self: &Arc<Self>, session: String) {
        let shared = Arc::clone(self);
        thread::spawn(move || {
            let Ok(socket) = shared.connect() else {
                return;
            };
            let headers = [
                ("Accept".to_owned(), "text/event-stream".to_owned()),
                ("Mcp-Session-Id".to_owned(), session),
            ];
            if write_request(&socket, &shared.endpoint, "GET", &headers, b"").is_err() {
                return;
            }
            if let Ok(clone) = socket.try_clone() {
                lock(&shared.streams).push(clone);
            }
            let never = AtomicBool::new(false);
            let mut reader = BufReader::new(socket);
            let Ok(head) = read_head(&mut reader) else {
                return;
            };
            if head.status == 200 && head.is_event_stream() {
                let mut body = head.body(reader);
                let _ = read_events(&mut body, |data| shared.deliver(&never, data));
            }
        });
    }
}

fn is_header_value(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn write_request(
    mut socket: &TcpStream,
    endpoint: &Endpoint,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> io::Result<()> {
    let mut head = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        endpoint.path,
        endpoint.authority,
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    socket.write_all(&bytes)?;
    socket.flush()
}

/// A response's status line and headers.
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn is_event_stream(&self) -> bool {
        self.header("content-type")
            .is_some_and(|t| t.trim_start().starts_with("text/event-stream"))
    }

    fn body<R: BufRead>(&self, reader: R) -> Body<R> {
        let chunked = self
            .header("transfer-encoding")
            .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
        if chunked {
            Body::Chunked {
                reader,
                left: 0,
                done: false,
            }
        } else {
            let length = self
                .header("content-length")
                .and_then(|l| l.trim().parse::<u64>().ok());
            match length {
                Some(length) => Body::Sized {
                    reader,
                    left: length,
                },
                None => Body::ToEnd(reader),
            }
        }
    }
}

fn read_line_bounded(reader: &mut impl BufRead, total: &mut usize) -> io::Result<String> {
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take((MAX_HEAD_BYTES.saturating_sub(*total)) as u64 + 1)
        .read_until(b'\n', &mut line)?;
    *total += n;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    if *total > MAX_HEAD_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "response head too long",
        ));
    }
    Ok(String::from_utf8_lossy(&line)
        .trim_end_matches(['\r', '\n'])
        .to_owned())
}

fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let mut total = 0;
    let status_line = read_line_bounded(reader, &mut total)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an HTTP status line"))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line_bounded(reader, &mut total)?;
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    Ok(Head { status, headers })
}

/// A response body: chunked, sized, or to the end of the connection.
enum Body<R> {
    Chunked { reader: R, left: u64, done: bool },
    Sized { reader: R, left: u64 },
    ToEnd(R),
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Body::ToEnd(reader) => reader.read(buf),
            Body::Sized { reader, left } => {
                if *left == 0 {
                    return Ok(0);
                }
                let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = reader.read(buf.get_mut(..want).unwrap_or_default())?;
                *left -= n as u64;
                Ok(n)
            }
            Body::Chunked { reader, left, done } => {
                if *done {
                    return Ok(0);
                }
                if *left == 0 {
                    let mut total = 0;
                    let mut size = read_line_bounded(reader, &mut total)?;
                    if size.is_empty() {
                        // The CRLF after the previous chunk.
                        size = read_line_bounded(reader, &mut total)?;
                    }
                    let hex = size.split(';').next().unwrap_or("").trim();
                    let n = u64::from_str_radix(hex, 16).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, "bad chunk size")
                    })?;
                    if n == 0 {
                        *done = true;
                        return Ok(0);
                    }
                    *left = n;
                }
                let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = reader.read(buf.get_mut(..want).unwrap_or_default())?;
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut chunk"));
                }
                *left -= n as u64;
                Ok(n)
            }
        }
    }
}

/// Reads `text/event-stream` events and hands each non-empty `data` to `each` (a priming event
/// has none); `id`, `retry`, `event` fields and comments are read past.
fn read_events(body: &mut impl Read, mut each: impl FnMut(&str)) -> io::Result<()> {
    let mut reader = BufReader::new(body);
    let mut data = String::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .by_ref()
            .take(MAX_BODY_BYTES as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            if !data.is_empty() {
                each(&data);
            }
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if !data.is_empty() {
                each(&data);
                data.clear();
            }
            continue;
        }
        if let Some(value) = text.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp").map_err(|e| e.to_string());
        let e = e.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.authority, "127.0.0.1:8080");
        assert_eq!(e.path, "/mcp");
        assert!(Endpoint::parse("https://x/mcp").is_err());
        let e = Endpoint::parse("http://localhost").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.authority, "localhost:80");
    }

    #[test]
    fn chunked_sse_is_read_event_by_event() {
        // An SSE text cut into chunks anywhere, a line across two of them included.
        let sse = ": keep-alive\n\nid: 1-0\ndata: a\n\ndata: {}\n\ndata:\n\n";
        let mut raw = Vec::new();
        for piece in [&sse[..5], &sse[5..20], &sse[20..]] {
            raw.extend_from_slice(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes());
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        let mut body = Body::Chunked {
            reader: &raw[..],
            left: 0,
            done: false,
        };
        let mut seen = Vec::new();
        read_events(&mut body, |d| seen.push(d.to_owned())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen, ["a", "{}"]);
    }
}
