//! The harness: the real binary serving `--http 127.0.0.1:0`, and a real HTTP client
//! (reqwest on hyper) speaking both eras. Every wait has a deadline.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

/// The longest any single wait in these tests may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

pub(crate) const MODERN: &str = "2026-07-28";

/// A running `taskstream serve --http`.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    pub(crate) port: u16,
}

impl Server {
    /// Starts the server in memory with `args` added, and waits for its `listening on` line.
    pub(crate) fn start(args: &[&str]) -> Server {
        Server::start_on(&["--in-memory"], args)
    }

    /// Starts the server on the store `store` says (`--in-memory`, `--store URL`, …) with
    /// `args` added, and waits for its `listening on` line.
    pub(crate) fn start_on(store: &[&str], args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_taskstream"))
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(store)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn taskstream");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(rest) = line.split("listening on ").nth(1) {
                        let _ = tx.send(rest.trim().to_owned());
                        sent = true;
                    }
                }
            }
        });
        let url = rx.recv_timeout(DEADLINE).expect("the listening line");
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .expect("a port");
        Server { child, url, port }
    }
}

impl Server {
    /// The server's process id (for its memory in `/proc`).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client with a deadline on connecting (streams are read with their own deadlines).
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(DEADLINE)
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// The modern `_meta` of a request declaring the Tasks extension.
pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    })
}

/// A modern (2026-07-28) POST with the right `Mcp-Method` / `Mcp-Name` headers.
pub(crate) fn modern(
    c: &reqwest::Client,
    url: &str,
    id: i64,
    method: &str,
    mut params: Value,
) -> reqwest::RequestBuilder {
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    params["_meta"] = modern_meta();
    let mut r = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-method", method);
    if let Some(n) = name {
        r = r.header("mcp-name", n);
    }
    r.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

/// A legacy (2025-11-25) session.
pub(crate) struct Session {
    pub(crate) c: reqwest::Client,
    pub(crate) url: String,
    pub(crate) id: String,
    pub(crate) token: Option<String>,
}

impl Session {
    /// `initialize` + `notifications/initialized`.
    pub(crate) async fn open(url: &str, token: Option<&str>) -> Session {
        let c = http();
        let mut r = c
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "http-test", "version": "1"}}})
                .to_string(),
            )
            .send()
            .await
            .expect("initialize");
        assert_eq!(r.status(), 200);
        let id = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("Mcp-Session-Id")
            .to_owned();
        let s = Session {
            c,
            url: url.to_owned(),
            id,
            token: token.map(str::to_owned),
        };
        let n = s
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .expect("initialized");
        assert_eq!(n.status(), 202);
        s
    }

    pub(crate) fn post(&self, body: Value) -> reqwest::RequestBuilder {
        let mut r = self
            .c
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        r.body(body.to_string())
    }

    /// A request answered as JSON: its whole response message.
    pub(crate) async fn call(&self, id: i64, method: &str, params: Value) -> Value {
        let r = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200, "{method}");
        r.json().await.expect("json")
    }

    /// Starts `emit` as a task; its id.
    pub(crate) async fn emit(&self, count: u64, interval_ms: u64) -> String {
        let r = self
            .call(
                1000,
                "tools/call",
                json!({"name": "emit", "arguments": {"count": count, "interval_ms": interval_ms},
                       "task": {}}),
            )
            .await;
        r["result"]["task"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned()
    }

    pub(crate) async fn status(&self, task: &str) -> String {
        let r = self.call(1001, "tasks/get", json!({"taskId": task})).await;
        r["result"]["status"].as_str().expect("status").to_owned()
    }

    /// Opens `tasks/stream` as SSE.
    pub(crate) async fn stream(&self, id: i64, task: &str, after: Option<u64>) -> Sse {
        let mut params = json!({"taskId": task});
        if let Some(a) = after {
            params["after"] = json!(a);
        }
        let r = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream", "params": params}))
            .send()
            .await
            .expect("send");
        Sse::new(r)
    }

    /// `GET` with `Last-Event-ID`.
    pub(crate) async fn resume(&self, last: &str) -> Sse {
        let mut r = self
            .c
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("last-event-id", last);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        Sse::new(r.send().await.expect("send"))
    }
}

/// One SSE event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: Option<String>,
    pub(crate) retry: Option<u64>,
    pub(crate) data: String,
}

impl Event {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("event data is JSON")
    }
}

/// An SSE response read event by event, each with a deadline.
pub(crate) struct Sse {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl Sse {
    pub(crate) fn new(r: reqwest::Response) -> Sse {
        Sse {
            status: r.status().as_u16(),
            content_type: r
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
            body: r.bytes_stream().boxed(),
            buf: Vec::new(),
        }
    }

    /// The next event (comments skipped); `None` at the end of the body.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = find(&self.buf, b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8(block).expect("utf-8");
                let mut e = Event {
                    id: None,
                    retry: None,
                    data: String::new(),
                };
                let mut any = false;
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        e.id = Some(v.to_owned());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("retry: ") {
                        e.retry = v.parse().ok();
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        e.data.push_str(v);
                        any = true;
                    } else if line.starts_with("data:") {
                        any = true;
                    }
                }
                if any {
                    return Some(e);
                }
                continue;
            }
            let chunk = tokio::time::timeout(DEADLINE, self.body.next())
                .await
                .expect("an SSE chunk within the deadline")?;
            self.buf.extend_from_slice(&chunk.ok()?);
        }
    }

    /// The next event that carries a JSON-RPC message.
    pub(crate) async fn message(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            let e = self.next().await?;
            if !e.data.is_empty() {
                return Some((e.id.clone(), e.json()));
            }
        }
    }

    /// Reads to the end: every event seq, then the final response.
    pub(crate) async fn rest(&mut self) -> (Vec<u64>, Value) {
        let mut seqs = Vec::new();
        while let Some((_, m)) = self.message().await {
            if m.get("method").is_some() {
                seqs.push(m["params"]["seq"].as_u64().expect("seq"));
            } else {
                return (seqs, m);
            }
        }
        panic!("the stream ended without a response (seqs {seqs:?})");
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Waits (bounded) until `task` has `status`.
pub(crate) async fn wait_status(s: &Session, task: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let got = s.status(task).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task} still {got}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
