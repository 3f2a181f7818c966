//! The Streamable HTTP transport of [`Client::connect_http`](crate::Client::connect_http),
//! 2026-07-28 era: every JSON-RPC message is one stateless `POST` (one TCP connection,
//! `Connection: close`), with the `Mcp-Method` header and `Mcp-Name` (the tool name of
//! `tools/call`, the `taskId` of `tasks/*`). A response is a JSON body or a `text/event-stream`
//! body whose events' `data` are JSON-RPC messages (a `tasks/stream`: its events, then its
//! response).
//!
//! It presents itself to [`Connection`](super::conn::Connection) as a line pipe, so routing,
//! deadlines and streams are the same code as on stdio: [`HttpWriter`] takes the lines the
//! connection writes and posts each on a thread of its own; every message of every response is
//! written, as one compact line, into the [`Inbox`] the connection's reader reads.
//!
//! - **Cancellation** is the transport's: `notifications/cancelled` for a request still in
//!   flight is not posted; its response is closed instead, which is what cancels a stream on
//!   2026-07-28 HTTP (the task runs on).
//! - **A request that cannot be sent** (connection refused) fails at once with
//!   [`ClientError::Io`](super::ClientError::Io); the client stays usable.
//! - **A transport failure once sent** (a response cut before its end, a malformed response,
//!   an HTTP answer without a JSON-RPC message for a request) ends the client, as a broken pipe
//!   ends a stdio connection: every waiter gets
//!   [`ClientError::Closed`](super::ClientError::Closed) with the reason.
//! - [`HttpLink::sever`] cuts every open response at once without cancelling anything, as a
//!   network failure would: for hosts and tests that exercise reconnects.
//!
//! Plain `http://` only (loopback or a trusted network, or behind a TLS-terminating proxy);
//! no 2025-11-25 sessions.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::error::ClientError;

/// The longest response head (status line and headers) read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What the inbox carries: a line, or why the transport failed.
type Item = Result<Vec<u8>, String>;

/// A parsed `http://host:port/path` URL.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// `host:port`, as connected to and sent in `Host`.
    authority: String,
    path: String,
}

impl Endpoint {
    /// Parses `http://HOST[:PORT][/PATH]` (port 80 and path `/` by default).
    pub(crate) fn parse(url: &str) -> Result<Endpoint, ClientError> {
        let bad = |why: &str| ClientError::Unsupported {
            what: format!("URL {url:?}: {why}"),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("no host, or user info in the URL"));
        }
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && !authority.ends_with(']');
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad("the path has spaces or control characters"));
        }
        Ok(Endpoint {
            authority,
            path: path.to_owned(),
        })
    }
}

/// One request in flight.
struct Inflight {
    socket: TcpStream,
    /// Set before the socket is shut down on purpose (cancel, close, sever): the request's
    /// thread then ends silently.
    quiet: Arc<AtomicBool>,
}

/// What an [`HttpLink`] and its request threads share: the endpoint, the settings, the
/// requests in flight.
struct HttpLinkState {
    endpoint: Endpoint,
    token: Option<String>,
    connect_timeout: Duration,
    max_message_bytes: usize,
    /// In-flight requests by key; `ids` maps a JSON-RPC id to its key.
    inflight: Mutex<HashMap<u64, Inflight>>,
    ids: Mutex<HashMap<String, u64>>,
    next_key: AtomicU64,
    /// Set by [`HttpLink::sever`] and by closing: nothing more is sent.
    closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HttpLinkState {
    /// Shuts down every open response quietly.
    fn abort_all(&self) {
        for (_, f) in lock(&self.inflight).drain() {
            f.quiet.store(true, Ordering::Release);
            let _ = f.socket.shutdown(Shutdown::Both);
        }
        lock(&self.ids).clear();
    }
}

/// A handle on the transport, kept by the client.
#[derive(Clone)]
pub(crate) struct HttpLink {
    shared: Arc<HttpLinkState>,
    fail: Sender<Item>,
}

impl HttpLink {
    /// Cuts every open response without cancelling anything and ends the client (its waiters
    /// get `Closed` with "connection lost").
    pub(crate) fn sever(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.abort_all();
        let _ = self
            .fail
            .send(Err("connection lost (severed by the client)".into()));
    }
}

/// The read side: lines from every response, in the order they were read.
pub(crate) struct Inbox {
    rx: Receiver<Item>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for Inbox {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(Ok(line)) => {
                    self.buf = line;
                    self.pos = 0;
                }
                Ok(Err(reason)) => return Err(io::Error::other(reason)),
                // Every sender is gone: the writer closed and no request is in flight.
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The write side: each complete line is one `POST`.
pub(crate) struct HttpWriter {
    shared: Arc<HttpLinkState>,
    tx: Sender<Item>,
    pending: Vec<u8>,
}

impl Write for HttpWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the HTTP connection was severed",
            ));
        }
        self.pending.extend_from_slice(data);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.dispatch(&line[..end])?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for HttpWriter {
    fn drop(&mut self) {
        // The client closes: no response is waited for any more.
        self.shared.closed.store(true, Ordering::Release);
        self.shared.abort_all();
    }
}

/// Builds the transport: the inbox for the connection's reader, the writer, and the link.
pub(crate) fn open(
    url: &str,
    token: Option<&str>,
    connect_timeout: Duration,
    max_message_bytes: usize,
) -> Result<(Inbox, HttpWriter, HttpLink), ClientError> {
    let endpoint = Endpoint::parse(url)?;
    if token.is_some_and(|t| t.bytes().any(|b| b.is_ascii_control() || b == b' ')) {
        return Err(ClientError::Unsupported {
            what: "a bearer token with spaces or control characters".into(),
        });
    }
    let shared = Arc::new(HttpLinkState {
        endpoint,
        token: token.map(str::to_owned),
        connect_timeout,
        max_message_bytes,
        inflight: Mutex::new(HashMap::new()),
        ids: Mutex::new(HashMap::new()),
        next_key: AtomicU64::new(1),
        closed: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel();
    let link = HttpLink {
        shared: Arc::clone(&shared),
        fail: tx.clone(),
    };
    Ok((
        Inbox {
            rx,
            buf: Vec::new(),
            pos: 0,
        },
        HttpWriter {
            shared,
            tx,
            pending: Vec::new(),
        },
        link,
    ))
}

impl HttpWriter {
    fn dispatch(&mut self, line: &[u8]) -> io::Result<()> {
        let message: Value = serde_json::from_slice(line).map_err(io::Error::other)?;
        let method = message.get("method").and_then(Value::as_str);
        // Cancelling a request in flight is closing its response.
        if method == Some("notifications/cancelled") {
            let target = message
                .get("params")
                .and_then(|p| p.get("requestId"))
                .map(Value::to_string);
            let key = target.and_then(|t| lock(&self.shared.ids).remove(&t));
            if let Some(f) = key.and_then(|k| lock(&self.shared.inflight).remove(&k)) {
                f.quiet.store(true, Ordering::Release);
                let _ = f.socket.shutdown(Shutdown::Both);
                return Ok(());
            }
        }
        let mut headers = Vec::new();
        if let Some(m) = method {
            headers.push(("Mcp-Method", m.to_owned()));
            let params = message.get("params");
            let name = if m == "tools/call" {
                params.and_then(|p| p.get("name"))
            } else if m.starts_with("tasks/") {
                params.and_then(|p| p.get("taskId"))
            } else {
                None
            };
            if let Some(name) = name.and_then(Value::as_str) {
                if !name.bytes().any(|b| b.is_ascii_control()) {
                    headers.push(("Mcp-Name", name.to_owned()));
                }
            }
        }
        let id = message.get("id").filter(|_| method.is_some()).cloned();
        let socket = connect(&self.shared)?;
        let key = self.shared.next_key.fetch_add(1, Ordering::Relaxed);
        let quiet = Arc::new(AtomicBool::new(false));
        lock(&self.shared.inflight).insert(
            key,
            Inflight {
                socket: socket.try_clone()?,
                quiet: Arc::clone(&quiet),
            },
        );
        if let Some(id) = &id {
            lock(&self.shared.ids).insert(id.to_string(), key);
        }
        let shared = Arc::clone(&self.shared);
        let tx = self.tx.clone();
        let body = line.to_vec();
        let spawned = std::thread::Builder::new()
            .name("taskstream-client-http".into())
            .spawn(move || {
                let result = exchange(&shared, socket, &headers, &body, id.is_some(), &quiet, &tx);
                lock(&shared.inflight).remove(&key);
                if let Some(id) = &id {
                    let mut ids = lock(&shared.ids);
                    if ids.get(&id.to_string()) == Some(&key) {
                        ids.remove(&id.to_string());
                    }
                }
                if let Err(reason) = result {
                    if !quiet.load(Ordering::Acquire) {
                        let _ = tx.send(Err(reason));
                    }
                }
            });
        if let Err(e) = spawned {
            lock(&self.shared.inflight).remove(&key);
            return Err(e);
        }
        Ok(())
    }
}

fn connect(shared: &HttpLinkState) -> io::Result<TcpStream> {
    let addrs = shared.endpoint.authority.to_socket_addrs()?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, shared.connect_timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(io::Error::new(
        last.kind(),
        format!("connecting to {}: {last}", shared.endpoint.authority),
    ))
}

/// One POST and its response, every message of which goes to the inbox.
fn exchange(
    shared: &HttpLinkState,
    mut socket: TcpStream,
    headers: &[(&str, String)],
    body: &[u8],
    is_request: bool,
    quiet: &AtomicBool,
    tx: &Sender<Item>,
) -> Result<(), String> {
    let ep = &shared.endpoint;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        ep.path,
        ep.authority,
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(t) = &shared.token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    let io_err = |e: io::Error| format!("HTTP: {e}");
    socket.write_all(head.as_bytes()).map_err(io_err)?;
    socket.write_all(body).map_err(io_err)?;
    let mut reader = BufReader::new(socket);
    let response = read_head(&mut reader).map_err(io_err)?;
    let mut body = Body {
        inner: reader,
        framing: response.framing,
        chunk_left: 0,
        done: false,
    };
    let emit = |message: &[u8]| -> Result<bool, String> {
        let Ok(value) = serde_json::from_slice::<Value>(message) else {
            return Err(format!(
                "HTTP {}: a message that is not JSON",
                response.status
            ));
        };
        if quiet.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut line = serde_json::to_vec(&value).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(tx.send(Ok(line)).is_ok())
    };
    if response.event_stream {
        let mut any = false;
        let mut lines = BufReader::new(&mut body);
        let mut data: Vec<u8> = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            let limit = u64::try_from(shared.max_message_bytes).unwrap_or(u64::MAX);
            let n = (&mut lines)
                .take(limit.saturating_add(2))
                .read_until(b'\n', &mut line)
                .map_err(io_err)?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') && line.len() as u64 > limit {
                return Err("HTTP: an SSE line over the message limit".into());
            }
            let l = line.strip_suffix(b"\n").unwrap_or(&line);
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            if l.is_empty() {
                if !data.is_empty() {
                    any = true;
                    if !emit(&data)? {
                        return Ok(());
                    }
                    data.clear();
                }
            } else if let Some(d) = l.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(d.strip_prefix(b" ").unwrap_or(d));
                if data.len() > shared.max_message_bytes {
                    return Err("HTTP: an SSE event over the message limit".into());
                }
            }
            // Comments (keep-alives), `id:`, `event:`, `retry:` carry no message here.
        }
        drop(lines);
        if !body.done && body.framing != Framing::ToEof {
            return Err("HTTP: the server closed the event stream before its end".into());
        }
        if is_request && !any {
            return Err(format!(
                "HTTP {}: an event stream without a message",
                response.status
            ));
        }
        return Ok(());
    }
    let mut text = Vec::new();
    let limit = u64::try_from(shared.max_message_bytes).unwrap_or(u64::MAX);
    (&mut body)
        .take(limit.saturating_add(1))
        .read_to_end(&mut text)
        .map_err(io_err)?;
    if text.len() as u64 > limit {
        return Err("HTTP: a response over the message limit".into());
    }
    if text.iter().all(u8::is_ascii_whitespace) {
        if is_request {
            return Err(format!(
                "HTTP {} without a JSON-RPC answer",
                response.status
            ));
        }
        return Ok(());
    }
    if !is_request && !(200..300).contains(&response.status) {
        return Err(format!("HTTP {} for a notification", response.status));
    }
    emit(&text).map(|_| ())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Chunked,
    Length(u64),
    ToEof,
}

struct Head {
    status: u16,
    event_stream: bool,
    framing: Framing,
}

fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut read = 0usize;
    let mut line = String::new();
    let mut next = |line: &mut String| -> io::Result<()> {
        line.clear();
        let n = reader
            .by_ref()
            .take((MAX_HEAD_BYTES - read.min(MAX_HEAD_BYTES)) as u64)
            .read_line(line)?;
        if n == 0 || !line.ends_with('\n') {
            return Err(bad("a response head cut short or too long"));
        }
        read += n;
        Ok(())
    };
    next(&mut line)?;
    let status: u16 = line
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("a malformed status line"))?;
    let mut event_stream = false;
    let mut framing = Framing::ToEof;
    loop {
        next(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(bad("a malformed header"));
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "content-type" => {
                event_stream = v
                    .split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"));
            }
            "transfer-encoding" if v.eq_ignore_ascii_case("chunked") => framing = Framing::Chunked,
            "content-length" if framing != Framing::Chunked => {
                framing = Framing::Length(v.parse().map_err(|_| bad("a bad Content-Length"))?);
            }
            _ => {}
        }
    }
    Ok(Head {
        status,
        event_stream,
        framing,
    })
}

/// A response body: chunked, of a known length, or to the end of the connection.
struct Body<R> {
    inner: R,
    framing: Framing,
    /// Bytes left in the current chunk (chunked framing).
    chunk_left: u64,
    done: bool,
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.done || out.is_empty() {
            return Ok(0);
        }
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let left = match self.framing {
            Framing::ToEof => {
                let n = self.inner.read(out)?;
                self.done = n == 0;
                return Ok(n);
            }
            Framing::Length(0) => {
                self.done = true;
                return Ok(0);
            }
            Framing::Length(n) => n,
            Framing::Chunked if self.chunk_left > 0 => self.chunk_left,
            Framing::Chunked => {
                let mut size = String::new();
                self.inner.by_ref().take(1024).read_line(&mut size)?;
                if !size.ends_with('\n') {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                let hex = size.trim().split(';').next().unwrap_or("");
                let n = u64::from_str_radix(hex, 16).map_err(|_| bad("a bad chunk size"))?;
                if n == 0 {
                    self.done = true;
                    return Ok(0);
                }
                n
            }
        };
        let want = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut out[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let rest = left - n as u64;
        match self.framing {
            Framing::Length(_) => self.framing = Framing::Length(rest),
            Framing::Chunked => {
                self.chunk_left = rest;
                if rest == 0 {
                    let mut crlf = [0u8; 2];
                    self.inner.read_exact(&mut crlf)?;
                }
            }
            Framing::ToEof => {}
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_port_and_path() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp").expect("valid");
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:8080", "/mcp")
        );
        let e = Endpoint::parse("http://localhost").expect("valid");
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("localhost:80", "/")
        );
        let e = Endpoint::parse("http://[::1]:9/x").expect("valid");
        assert_eq!(e.authority, "[::1]:9");
        for bad in [
            "https://h/mcp",
            "h:1/mcp",
            "http:///mcp",
            "http://u@h/mcp",
            "http://h/a b",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    fn body(framing: Framing, bytes: &[u8]) -> Body<&[u8]> {
        Body {
            inner: bytes,
            framing,
            chunk_left: 0,
            done: false,
        }
    }

    #[test]
    fn chunked_bodies_decode_across_small_reads() {
        let mut b = body(Framing::Chunked, b"5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\n\r\n");
        let mut out = Vec::new();
        let mut buf = [0u8; 2];
        loop {
            let n = b.read(&mut buf).expect("valid");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"hello!");
        assert!(b.done);
        // Cut inside a chunk: an error, never a short success.
        let mut b = body(Framing::Chunked, b"5\r\nhel");
        let mut out = Vec::new();
        assert!(b.read_to_end(&mut out).is_err());
        let mut b = body(Framing::Chunked, b"zz\r\n");
        assert!(b.read_to_end(&mut Vec::new()).is_err());
    }

    #[test]
    fn length_bodies_stop_at_their_length() {
        let mut b = body(Framing::Length(3), b"abcdef");
        let mut out = Vec::new();
        b.read_to_end(&mut out).expect("valid");
        assert_eq!(out, b"abc");
        let mut b = body(Framing::Length(9), b"abc");
        assert!(b.read_to_end(&mut Vec::new()).is_err());
    }

    #[test]
    fn response_heads_parse() {
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        let h = read_head(&mut r).expect("valid");
        assert_eq!(
            (h.status, h.event_stream, h.framing),
            (200, true, Framing::Chunked)
        );
        let mut r: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n";
        let h = read_head(&mut r).expect("valid");
        assert_eq!(
            (h.status, h.event_stream, h.framing),
            (400, false, Framing::Length(12))
        );
        for bad in [
            &b"SMTP 220\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nbroken\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            let mut r = bad;
            assert!(read_head(&mut r).is_err());
        }
    }
}
