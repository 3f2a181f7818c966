//! Bad input and faults over HTTP: each gets its exact status (and JSON-RPC error), and the
//! server keeps serving everyone else.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;

use super::client::{http, modern, Server, Session, DEADLINE};

/// A request every test makes afterwards: the server still answers.
async fn still_serving(url: &str) {
    let c = http();
    let r = modern(&c, url, 99, "tools/list", json!({}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    assert!(v["result"]["tools"].is_array(), "{v}");
}

async fn raw_post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut r = http().post(url);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let r = r.body(body.to_owned()).send().await.expect("send");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_and_content_types() {
    let server = Server::start(&[]);
    let (status, v) = raw_post(&server.url, &[JSON], "{\"jsonrpc\":\"2.0\",").await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], -32700);
    let (status, v) = raw_post(
        &server.url,
        &[JSON],
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
    )
    .await;
    assert_eq!(status, 400, "no batches");
    assert_eq!(v["error"]["code"], -32600);
    let (status, _) = raw_post(
        &server.url,
        &[("content-type", "text/plain")],
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
    )
    .await;
    assert_eq!(status, 415);
    let (status, _) = raw_post(&server.url, &[], "{}").await;
    assert_eq!(status, 415, "no Content-Type");
    // A session-less legacy request other than initialize.
    let (status, v) = raw_post(
        &server.url,
        &[JSON],
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], -32600);
    still_serving(&server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_headers_must_match_the_body() {
    let server = Server::start(&[]);
    let c = http();
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                      "params": {"_meta": super::client::modern_meta()}})
    .to_string();
    for (name, value) in [("mcp-method", "tools/call"), ("x-none", "")] {
        let r = c
            .post(&server.url)
            .header("content-type", "application/json")
            .header(name, value)
            .body(body.clone())
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "{name}");
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["error"]["code"], -32020, "HeaderMismatch");
        assert_eq!(v["id"], 3);
    }
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "emit", "arguments": {"count": 1}, "_meta": super::client::modern_meta()}})
    .to_string();
    let r = c
        .post(&server.url)
        .header("content-type", "application/json")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "run_trace")
        .body(call)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32020);
    // tasks/stream: a wrong Mcp-Name is a mismatch; a missing one is accepted (the revision's
    // table of Mcp-Name sources, and so the official SDK, has no entry for it).
    let task = "0123456789abcdef0123456789abcdef";
    let stream = |name: Option<&str>| {
        let mut r = c
            .post(&server.url)
            .header("content-type", "application/json")
            .header("mcp-method", "tasks/stream");
        if let Some(n) = name {
            r = r.header("mcp-name", n.to_owned());
        }
        r.body(
            json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/stream",
                   "params": {"taskId": task, "_meta": super::client::modern_meta()}})
            .to_string(),
        )
    };
    let wrong = stream(Some("ffffffffffffffffffffffffffffffff"))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 400);
    let v: Value = wrong.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32020);
    for name in [None, Some(task)] {
        let r = stream(name).send().await.expect("send");
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.expect("json");
        assert_eq!(
            v["error"]["code"], -32602,
            "unknown task, past the header check"
        );
    }
    still_serving(&server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_and_methods_without_one() {
    let server = Server::start(&[]);
    let (status, _) = raw_post(
        &server.url,
        &[JSON, ("mcp-session-id", "00000000000000000000000000000000")],
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
    )
    .await;
    assert_eq!(status, 404);
    let c = http();
    assert_eq!(c.get(&server.url).send().await.expect("get").status(), 405);
    assert_eq!(
        c.delete(&server.url).send().await.expect("delete").status(),
        405
    );
    assert_eq!(c.put(&server.url).send().await.expect("put").status(), 405);
    let other = format!("http://127.0.0.1:{}/other", server.port);
    assert_eq!(c.get(&other).send().await.expect("get").status(), 404);
    still_serving(&server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_and_origins_are_forbidden() {
    let server = Server::start(&["--allowed-origin", "https://app.example.com"]);
    let body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    let (status, _) = raw_post(
        &server.url,
        &[JSON, ("origin", "http://evil.example")],
        body,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = raw_post(&server.url, &[JSON, ("host", "evil.example")], body).await;
    assert_eq!(status, 403, "DNS rebinding: a foreign Host");
    let (status, v) = raw_post(
        &server.url,
        &[JSON, ("origin", "https://app.example.com")],
        body,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["result"], json!({}));
    let local = format!("http://localhost:{}", server.port);
    let (status, _) = raw_post(&server.url, &[JSON, ("origin", &local)], body).await;
    assert_eq!(status, 200);
    still_serving(&server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_get_413() {
    let server = Server::start(&["--max-body-bytes", "1024"]);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(2000)
    );
    let (status, v) = raw_post(&server.url, &[JSON], &big).await;
    assert_eq!(status, 413);
    assert_eq!(v["error"]["code"], -32600);
    still_serving(&server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_map_to_principals_and_hide_other_principals_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, "# test tokens\ntok-alice alice\ntok-bob bob\n").expect("write");
    let server = Server::start(&["--auth-token-file", file.to_str().expect("utf-8")]);
    let body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    let (status, _) = raw_post(&server.url, &[JSON], body).await;
    assert_eq!(status, 401, "no token");
    let (status, _) = raw_post(
        &server.url,
        &[JSON, ("authorization", "Bearer tok-mallory")],
        body,
    )
    .await;
    assert_eq!(status, 401, "wrong token");
    let alice = Session::open(&server.url, Some("tok-alice")).await;
    let bob = Session::open(&server.url, Some("tok-bob")).await;
    let task = alice.emit(3, 0).await;
    // SE-01 / SE-03: another principal's task is byte-identical to an unknown one.
    let unknown = "0123456789abcdef0123456789abcdef";
    for method in ["tasks/get", "tasks/cancel"] {
        let foreign = bob
            .post(json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": {"taskId": task}}))
            .send()
            .await
            .expect("send");
        let missing = bob
            .post(
                json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": {"taskId": unknown}}),
            )
            .send()
            .await
            .expect("send");
        assert_eq!(foreign.status(), missing.status());
        let (f, m) = (
            foreign.bytes().await.expect("body"),
            missing.bytes().await.expect("body"),
        );
        assert_eq!(f, m, "{method}");
    }
    let foreign = bob.stream(6, &task, None).await;
    let missing = bob.stream(6, unknown, None).await;
    assert_eq!(foreign.status, missing.status);
    assert_eq!(foreign.content_type, missing.content_type);
    // Bob's token does not open Alice's session either.
    let r = http()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("mcp-session-id", &alice.id)
        .bearer_auth("tok-bob")
        .body(body)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 404);
    // Alice still sees her task.
    assert_ne!(alice.status(&task).await, "");
}

#[test]
fn a_non_loopback_bind_needs_tokens() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskstream"))
        .args(["serve", "--in-memory", "--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs --auth-token-file"), "{err}");
}

/// Clients that open streams and never read, and clients that disconnect in the middle of
/// every response: other clients are served, and the task is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_vanishing_clients_do_not_hold_others_back() {
    let server = Server::start(&["--max-streams", "256"]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(400, 2).await;
    // Twenty modern streams that are never read (held open to the end of the test).
    let c = http();
    let mut stalled = Vec::new();
    for i in 0..20 {
        let r = modern(&c, &server.url, i, "tasks/stream", json!({"taskId": task}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        stalled.push(r);
    }
    // Fifty raw connections that send a stream request, read a little, and vanish.
    let port = server.port;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/stream",
        "params": {"taskId": task, "_meta": super::client::modern_meta()}})
    .to_string();
    let vanish = tokio::task::spawn_blocking(move || {
        for _ in 0..50 {
            let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
            let req = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                 Mcp-Method: tasks/stream\r\nMcp-Name: {task}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len(),
                task = serde_json::from_str::<Value>(&body).expect("json")["params"]["taskId"]
                    .as_str()
                    .expect("task"),
            );
            sock.write_all(req.as_bytes()).expect("write");
            let mut buf = [0u8; 64];
            let n = sock.read(&mut buf).expect("read");
            assert!(n > 0);
            assert!(buf.starts_with(b"HTTP/1.1 200"));
            // Gone mid-response.
        }
    });
    tokio::time::timeout(DEADLINE, vanish)
        .await
        .expect("in time")
        .expect("vanishing clients");
    // A reader on its own connection gets everything.
    let other = Session::open(&server.url, None).await;
    let (seqs, end) = other.stream(2, &task, None).await.rest().await;
    assert_eq!(seqs, (0..=401).collect::<Vec<u64>>());
    assert_eq!(end["result"], json!({}));
    still_serving(&server.url).await;
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_that_cannot_be_echoed_are_refused() {
    let server = Server::start(&[]);
    for id in ["null", "1.5", "{}", "[1]", "true", "18446744073709551615"] {
        let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}");
        let (status, v) = raw_post(&server.url, &[JSON], &body).await;
        assert_eq!(status, 400, "id {id}");
        assert_eq!(v["error"]["code"], -32600, "id {id}");
        assert_eq!(v["id"], Value::Null);
    }
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"{}\",\"method\":\"ping\"}}",
        "x".repeat(200)
    );
    let (status, _) = raw_post(&server.url, &[JSON], &long).await;
    assert_eq!(status, 400, "an id longer than the server keeps");
    still_serving(&server.url).await;
}

/// The process-wide cap on running tasks holds across principals and sessions; the
/// per-principal limit holds across that principal's sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_task_limits_span_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, "ta alice\ntb bob\n").expect("write");
    let server = Server::start(&[
        "--auth-token-file",
        file.to_str().expect("utf-8"),
        "--max-running-tasks",
        "2",
        "--max-total-running-tasks",
        "3",
    ]);
    let a1 = Session::open(&server.url, Some("ta")).await;
    let a2 = Session::open(&server.url, Some("ta")).await;
    let b = Session::open(&server.url, Some("tb")).await;
    let call = json!({"name": "emit", "arguments": {"count": 100, "interval_ms": 100}, "task": {}});
    let ok = |v: &Value| v["result"]["task"]["taskId"].is_string();
    assert!(ok(&a1.call(1, "tools/call", call.clone()).await));
    assert!(ok(&a2.call(1, "tools/call", call.clone()).await));
    // Alice's third, on either session: her limit.
    let refused = a1.call(2, "tools/call", call.clone()).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["reason"], "task_limit");
    assert!(ok(&b.call(1, "tools/call", call.clone()).await));
    // Bob's second: the process's cap (3 running).
    let capped = b.call(2, "tools/call", call.clone()).await;
    assert_eq!(capped["error"]["code"], -32602, "{capped}");
    let message = capped["error"]["message"].as_str().expect("message");
    assert!(message.contains("--max-total-running-tasks"), "{message}");
    still_serving_with(&server.url, "ta").await;
}

async fn still_serving_with(url: &str, token: &str) {
    let s = Session::open(url, Some(token)).await;
    let v = s.call(9, "ping", json!({})).await;
    assert_eq!(v["result"], json!({}));
}

/// Thousands of connections that open and never send a request (or send half a header) do
/// not stop the server from serving a real client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_do_not_starve_others() {
    let server = Server::start(&[]);
    let port = server.port;
    let held = tokio::task::spawn_blocking(move || {
        let mut socks = Vec::new();
        for i in 0..2000 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            if i % 2 == 0 {
                s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                    .expect("write");
            }
            socks.push(s);
        }
        socks
    })
    .await
    .expect("connections");
    assert_eq!(held.len(), 2000);
    still_serving(&server.url).await;
    let s = Session::open(&server.url, None).await;
    let task = s.emit(3, 0).await;
    let (seqs, _) = s.stream(1, &task, None).await.rest().await;
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    drop(held);
}

/// Header limits: a request whose headers exceed hyper's buffer is refused (431) before any
/// handler runs, and the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_refused() {
    let server = Server::start(&[]);
    let port = server.port;
    let status = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let big = "a".repeat(1 << 20);
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Big: {big}\r\nContent-Length: 2\r\n\r\n{{}}"
        );
        // The server may close before reading it all.
        let _ = s.write_all(head.as_bytes());
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .expect("request");
    assert!(status.starts_with("HTTP/1.1 431"), "{status:?}");
    still_serving(&server.url).await;
}
