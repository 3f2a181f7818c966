//! A fault for Streamable HTTP servers: a proxy in front of a correct server that kills a task
//! when the connection that streamed it closes, as a server whose tasks belong to their
//! connection would. It passes every request on unchanged; when a client closes a
//! `tasks/stream` response before the server has ended it, the proxy sends `tasks/cancel` for
//! that task upstream (with the stream request's own headers and `_meta`, so in the same era,
//! session and principal). The long-lived group of the suite must catch it (TS-08); the proxy
//! exists for the suite's own tests of that group, against a real HTTP server.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
        thread::spawn(move || {
            for downstream in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(downstream) = downstream else {
                    continue;
                };
                let authority = authority.clone();
                thread::spawn(move || {
                    let _ = serve(downstream, &authority);
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

/// One request: read it whole, pass it on, copy the answer back.
fn serve(downstream: TcpStream, upstream_authority: &str) -> io::Result<()> {
    let mut reader = BufReader::new(downstream.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = Vec::new();
        let n = reader
            .by_ref()
            .take(MAX_REQUEST_BYTES as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line);
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0).min(MAX_REQUEST_BYTES);
            }
        }
        let end = text.trim().is_empty();
        let is_host = text
            .split_once(':')
            .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("host"));
        if is_host {
            // The server checks `Host` against its own address.
            head.push(format!("Host: {upstream_authority}\r\n"));
            continue;
        }
        head.push(text.into_owned());
        if end {
            break;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let stream_request = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("tasks/stream"));

    let mut upstream = TcpStream::connect(upstream_authority)?;
    upstream.write_all(head.concat().as_bytes())?;
    upstream.write_all(&body)?;
    let done = Arc::new(AtomicBool::new(false));
    if let Some(request) = stream_request {
        // The client closing its end (a read that ends) before the answer ended: kill the task.
        let watch = downstream.try_clone()?;
        let done = Arc::clone(&done);
        let upstream_side = upstream.try_clone()?;
        let authority = upstream_authority.to_owned();
        thread::spawn(move || {
            let mut byte = [0u8; 1];
            let mut watch = watch;
            let closed = !matches!(watch.read(&mut byte), Ok(n) if n > 0);
            if closed && !done.load(Ordering::Acquire) {
                let _ = upstream_side.shutdown(Shutdown::Both);
                let _ = cancel_task(&authority, &head, &request);
            }
        });
    }
    let mut downstream_out = downstream;
    let copied = io::copy(&mut upstream, &mut downstream_out);
    done.store(true, Ordering::Release);
    let _ = downstream_out.shutdown(Shutdown::Both);
    copied.map(|_| ())
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
