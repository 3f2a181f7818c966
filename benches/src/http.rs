//! A minimal HTTP/1.1 + SSE client for the TypeScript SDK's Streamable HTTP server: one
//! connection per request (`Connection: close`), chunked bodies decoded, SSE `id:` and `data:`
//! fields read through [`Lines`]. Loopback only: the address is always `127.0.0.1`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::Instant;

use serde_json::Value;

use crate::lines::{is_event, seq_of, Lines};
use crate::stdio::Received;

/// The body of a response: chunked or read to the end of the connection.
pub struct Body {
    inner: BufReader<TcpStream>,
    chunked: bool,
    /// Bytes left in the current chunk.
    left: usize,
    done: bool,
}

impl Read for Body {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.done || out.is_empty() {
            return Ok(0);
        }
        if !self.chunked {
            return self.inner.read(out);
        }
        if self.left == 0 {
            let mut size = String::new();
            self.inner.read_line(&mut size)?;
            let hex = size.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(hex, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = out.len().min(self.left);
        let n = self.inner.read(&mut out[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// A response: status, the headers the client needs, and the body as SSE lines.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// `mcp-session-id`, if sent.
    pub session: Option<String>,
    /// The body, line by line.
    pub body: Lines<Body>,
}

/// Sends one request to `127.0.0.1:port` and reads the head of the response.
///
/// # Errors
/// Any socket error or a malformed response head.
pub fn request(
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> io::Result<Response> {
    let mut stream = TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    stream.set_nodelay(true)?;
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nAccept: application/json, text/event-stream\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    stream.write_all(head.as_bytes())?;
    let mut inner = BufReader::with_capacity(256 * 1024, stream);
    let mut line = String::new();
    inner.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("bad status {line:?}"))
        })?;
    let mut session = None;
    let mut chunked = false;
    loop {
        line.clear();
        inner.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "mcp-session-id" {
                session = Some(v.to_owned());
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    Ok(Response {
        status,
        session,
        body: Lines::new(Body {
            inner,
            chunked,
            left: 0,
            done: false,
        }),
    })
}

/// One SSE event's fields that matter here.
#[derive(Debug, Default)]
pub struct SseEvent {
    /// `id:`.
    pub id: Option<String>,
    /// `data:` (the JSON-RPC message, possibly empty for a priming event).
    pub data: Vec<u8>,
}

/// Reads the next SSE event (up to its blank line); `None` at the end of the body.
///
/// # Errors
/// The body's error.
pub fn next_event<R: Read>(body: &mut Lines<R>) -> io::Result<Option<SseEvent>> {
    let mut ev = SseEvent::default();
    let mut any = false;
    while let Some(line) = body.next_line()? {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if any {
                return Ok(Some(ev));
            }
            continue;
        }
        any = true;
        if let Some(id) = line.strip_prefix(b"id:") {
            ev.id = Some(String::from_utf8_lossy(id).trim().to_owned());
        } else if let Some(data) = line.strip_prefix(b"data:") {
            ev.data = data.strip_prefix(b" ").unwrap_or(data).to_vec();
        }
    }
    Ok(any.then_some(ev))
}

/// A session with the SDK's Streamable HTTP server.
pub struct HttpSession {
    port: u16,
    session: String,
    next_id: u64,
}

const VERSION: &str = "2025-11-25";

impl HttpSession {
    /// `initialize` (2025-11-25, so streams get priming events) and `notifications/initialized`.
    ///
    /// # Errors
    /// Any HTTP or protocol failure.
    pub fn open(port: u16) -> io::Result<HttpSession> {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"taskstream-benches","version":"0"}}}"#;
        let mut r = request(port, "POST", &[], Some(init))?;
        let session = r
            .session
            .clone()
            .ok_or_else(|| io::Error::other(format!("no session id (status {})", r.status)))?;
        while next_event(&mut r.body)?.is_some() {}
        let s = HttpSession {
            port,
            session,
            next_id: 2,
        };
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let r = request(port, "POST", &s.headers(), Some(note))?;
        if r.status / 100 != 2 {
            return Err(io::Error::other(format!(
                "initialized: status {}",
                r.status
            )));
        }
        Ok(s)
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        vec![
            ("mcp-session-id", self.session.as_str()),
            ("mcp-protocol-version", VERSION),
        ]
    }

    /// Calls `emit {count, payload_bytes}`, reads its SSE response to the end, and returns the
    /// stream's first event id (its priming event: the cursor that replays everything) and the
    /// number of event notifications received live.
    ///
    /// # Errors
    /// Any HTTP or protocol failure.
    pub fn emit(&mut self, count: u64, payload_bytes: usize) -> io::Result<(String, u64)> {
        let id = self.next_id;
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"emit","arguments":{{"count":{count},"payload_bytes":{payload_bytes}}}}}}}"#
        );
        let mut r = request(self.port, "POST", &self.headers(), Some(&body))?;
        let mut first = None;
        let mut events = 0;
        while let Some(ev) = next_event(&mut r.body)? {
            if first.is_none() {
                first.clone_from(&ev.id);
            }
            if is_event(&ev.data) {
                events += 1;
            } else {
                error_answer(&ev.data)?;
            }
        }
        let first = first.ok_or_else(|| io::Error::other("the stream carried no event id"))?;
        Ok((first, events))
    }

    /// Reconnects with `Last-Event-ID: cursor` (a GET) and counts the replayed event
    /// notifications until `expected` arrived or a JSON-RPC response (the tool's result, which
    /// the example store orders last) ends the replay; then drops the connection.
    ///
    /// # Errors
    /// Any HTTP failure.
    pub fn replay(&self, cursor: &str, expected: u64) -> io::Result<Received> {
        let mut headers = self.headers();
        headers.push(("Last-Event-ID", cursor));
        let start = Instant::now();
        let mut r = request(self.port, "GET", &headers, None)?;
        if r.status != 200 {
            return Err(io::Error::other(format!("replay: status {}", r.status)));
        }
        let mut got = Received::default();
        let mut prev = None;
        while got.events < expected {
            let Some(ev) = next_event(&mut r.body)? else {
                break;
            };
            if is_event(&ev.data) {
                if got.events == 0 {
                    got.first = start.elapsed();
                }
                got.events += 1;
                got.bytes += ev.data.len() as u64 + 1;
                let seq = seq_of(&ev.data);
                if let (Some(p), Some(s)) = (prev, seq) {
                    if s < p {
                        got.out_of_order += 1;
                    }
                }
                prev = seq.or(prev);
            } else if serde_json::from_slice::<Value>(&ev.data)
                .ok()
                .is_some_and(|m| m.get("id").is_some())
            {
                error_answer(&ev.data)?;
                break;
            }
        }
        got.last = start.elapsed();
        Ok(got)
    }
}

impl HttpSession {
    /// The port of the server.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A request in the session, answered as JSON or as SSE: its response message.
    ///
    /// # Errors
    /// Any HTTP failure, or no response in the body.
    pub fn call(&mut self, method: &str, params: &Value) -> io::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                .to_string();
        let mut r = request(self.port, "POST", &self.headers(), Some(&body))?;
        while let Some(line) = r.body.next_line()? {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let data = line.strip_prefix(b"data: ").unwrap_or(line);
            if let Ok(v) = serde_json::from_slice::<Value>(data) {
                if v.get("id").is_some() {
                    return Ok(v);
                }
            }
        }
        Err(io::Error::other(format!(
            "{method}: no response (status {})",
            r.status
        )))
    }

    /// `tasks/stream {taskId, after?}` answered as SSE, from the request to the last of
    /// `expected` events (then the response ends it).
    ///
    /// # Errors
    /// Any HTTP failure.
    pub fn stream(
        &mut self,
        task: &str,
        after: Option<u64>,
        expected: u64,
    ) -> io::Result<Received> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = serde_json::json!({"taskId": task});
        if let Some(a) = after {
            params["after"] = a.into();
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream", "params": params})
            .to_string();
        let start = Instant::now();
        let mut r = request(self.port, "POST", &self.headers(), Some(&body))?;
        let mut got = Received::default();
        let mut prev = None;
        while let Some(ev) = next_event(&mut r.body)? {
            if is_event(&ev.data) {
                if got.events == 0 {
                    got.first = start.elapsed();
                }
                got.events += 1;
                got.bytes += ev.data.len() as u64 + 1;
                let seq = seq_of(&ev.data);
                if let (Some(p), Some(s)) = (prev, seq) {
                    if s < p {
                        got.out_of_order += 1;
                    }
                }
                prev = seq.or(prev);
                if got.events == expected {
                    got.last = start.elapsed();
                }
            } else if !ev.data.is_empty() {
                error_answer(&ev.data)?;
                break;
            }
        }
        if got.events < expected {
            got.last = start.elapsed();
        }
        Ok(got)
    }
}

/// An SSE message that is a JSON-RPC error answer (a stream ended with `events_gone`, say) as
/// an error, so that counting events stops with it instead of reporting a short stream.
fn error_answer(data: &[u8]) -> io::Result<()> {
    match serde_json::from_slice::<Value>(data) {
        Ok(v) if v.get("error").is_some() => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("an error answer while events were expected: {v}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::error_answer;

    #[test]
    fn an_error_answer_ends_the_count_with_an_error_and_nothing_else_does() {
        let gone = br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32010,"message":"events_gone"}}"#;
        let err = error_answer(gone).expect_err("an error answer");
        assert!(err.to_string().contains("-32010"), "{err}");
        assert!(error_answer(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#).is_ok());
        assert!(error_answer(b"not json").is_ok());
    }
}
