//! Hostile clients against `serve --http`, over raw sockets on loopback: requests aborted at
//! every stage of a stream's life, slow and stalled heads and bodies, over-declared bodies, bad
//! chunk framing, invalid protocol versions (HX-01, HX-02), streams that are never read. After
//! each, a canary client must be served at once, the limits must be whole again (nothing
//! leaked), and the server's memory, read from `/proc`, must stay bounded (docs/security.md,
//! "HTTP limits"). Every wait is for a condition, with a deadline.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{http, modern, modern_meta, Server, Session, Sse, DEADLINE};

/// The canary: a modern request that must be answered.
async fn canary(url: &str) {
    let r = modern(&http(), url, 77, "tools/list", json!({}))
        .send()
        .await
        .expect("the canary is answered");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    assert!(v["result"]["tools"].is_array(), "{v}");
}

/// A raw HTTP/1.1 POST to `/mcp` with `headers` and `body`, as bytes (the connection closed
/// after its answer, so a reader sees the end of a refusal).
fn request(port: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// A modern `tasks/stream` request for `task`.
fn modern_stream(port: u16, id: u64, task: &str) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream",
        "params": {"taskId": task, "_meta": modern_meta()}})
    .to_string();
    request(
        port,
        &[("Mcp-Method", "tasks/stream"), ("Mcp-Name", task)],
        &body,
    )
}

/// A legacy `tasks/stream` request for `task` in session `session`.
fn legacy_stream(port: u16, id: u64, task: &str, session: &str) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream",
        "params": {"taskId": task}})
    .to_string();
    request(port, &[("Mcp-Session-Id", session)], &body)
}

/// Sends `req` and abandons it at `stage`: 0 right after sending it, 1 after its head alone, 2
/// half-way through its body, 3 after the first bytes of the answer, 4 a few KiB into the
/// stream, 5 with the write side shut first (a half-close) then the socket dropped.
fn abort_at(port: u16, req: &[u8], stage: usize) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        panic!("connect");
    };
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let head_end = req
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(req.len(), |p| p + 4);
    let mut buf = [0u8; 4096];
    match stage {
        0 => {
            let _ = s.write_all(req);
        }
        1 => {
            let _ = s.write_all(&req[..head_end]);
        }
        2 => {
            let _ = s.write_all(&req[..(head_end + req.len()) / 2]);
        }
        3 => {
            let _ = s.write_all(req);
            let _ = s.read(&mut buf[..16]);
        }
        4 => {
            let _ = s.write_all(req);
            let mut got = 0;
            while got < 1024 {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
        }
        _ => {
            let _ = s.write_all(req);
            let _ = s.shutdown(Shutdown::Write);
        }
    }
    // Dropped: the connection is gone, however far the request got.
}

/// Opens a stream of each of `tasks` at once (modern, or in `session`) and checks that every
/// one was admitted: its first message is an event, not a refusal. The streams are returned
/// open.
async fn open_all(url: &str, tasks: &[&str], session: Option<&Session>) -> Result<Vec<Sse>, Value> {
    let mut open = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let id = 5000 + i64::try_from(i).expect("small");
        let request = match session {
            Some(s) => s.post(json!({"jsonrpc": "2.0", "id": id, "method": "tasks/stream",
                                      "params": {"taskId": task}})),
            None => modern(&http(), url, id, "tasks/stream", json!({"taskId": task})),
        };
        let r = request.send().await.expect("send");
        let json_answer = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        if json_answer {
            // Refused before it began: the answer is a JSON-RPC error, not a stream.
            return Err(r.json().await.expect("json"));
        }
        let mut sse = Sse::new(r);
        let (_, first) = sse.message().await.expect("a first message");
        if first.get("method").is_none() {
            return Err(first);
        }
        open.push(sse);
    }
    Ok(open)
}

/// Waits (bounded) until a stream of each of `tasks` can be open at once: whatever the aborted
/// requests took has been given back.
async fn limit_is_whole(url: &str, tasks: &[&str], session: Option<&Session>) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match open_all(url, tasks, session).await {
            Ok(open) => {
                assert_eq!(open.len(), tasks.len());
                return;
            }
            Err(refusal) => assert!(
                Instant::now() < deadline,
                "after the aborted requests, {} streams cannot be open at once: {refusal}",
                tasks.len()
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Thousands of `tasks/stream` requests abandoned at every stage of their life leak nothing:
/// afterwards the principal opens its whole stream limit (modern era), and the session its
/// whole per-session limit with no task left `stream_active` (2025-11-25).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_stream_requests_leak_no_slot() {
    const LIMIT: usize = 4;
    let server = Server::start(&["--max-principal-streams", "4", "--max-streams", "4"]);
    let port = server.port;
    let s = Session::open(&server.url, None).await;
    // Tasks that produce for longer than the test (the server is killed at its end), slowly
    // enough that their retained windows (10 000 events) never move during the test. A
    // session holds one stream per task (TS-05), so its limit is filled with four tasks.
    let mut tasks = Vec::new();
    for _ in 0..LIMIT {
        tasks.push(s.emit(1_000_000, 10).await);
    }
    let (t, sid) = (tasks.clone(), s.id.clone());
    tokio::task::spawn_blocking(move || {
        for i in 0..3000u64 {
            let req = modern_stream(port, i, &t[0]);
            abort_at(port, &req, usize::try_from(i % 6).expect("small"));
        }
        for i in 0..1200u64 {
            let task = &t[usize::try_from(i / 6 % 4).expect("small")];
            let req = legacy_stream(port, 10_000 + i, task, &sid);
            abort_at(port, &req, usize::try_from(i % 6).expect("small"));
        }
    })
    .await
    .expect("the aborting clients");
    canary(&server.url).await;
    limit_is_whole(&server.url, &[tasks[0].as_str(); LIMIT], None).await;
    // The per-principal count covers the session's streams too: the modern ones just opened
    // are closed (dropped) before the session's are opened.
    let each: Vec<&str> = tasks.iter().map(String::as_str).collect();
    limit_is_whole(&server.url, &each, Some(&s)).await;
}

/// Heads and bodies that never finish are answered 408 within their bounds; a body declared
/// over the limit is refused (413) before it is read; bad chunk framing is a 400, not a 413;
/// and the canary is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_and_bodies_are_bounded_and_refused_for_what_they_are() {
    let server = Server::start(&["--header-timeout", "1", "--body-timeout", "1"]);
    let port = server.port;
    let answer = move |bytes: Vec<u8>, then_wait: bool| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let _ = s.write_all(&bytes);
        let started = Instant::now();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let took = started.elapsed();
        assert!(
            !then_wait || took < DEADLINE,
            "no answer within the deadline"
        );
        (String::from_utf8_lossy(&out).into_owned(), took)
    };
    let cases = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        // A head that stops half-way: 408 after the head bound, and closed.
        let (a, took) = answer(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le".to_vec(),
            true,
        );
        seen.push(("half a head", a, took));
        // A head trickled a byte at a time, slower than its bound allows.
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nonblocking(true).expect("non-blocking");
        let started = Instant::now();
        let mut out = Vec::new();
        // A byte every 100 ms, looking for an answer before each (so that the answer is read
        // before a write after the close could reset the connection and discard it).
        for b in b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
            .iter()
            .cycle()
        {
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            if s.write_all(&[*b]).is_err() || started.elapsed() > DEADLINE {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        seen.push((
            "a trickled head",
            String::from_utf8_lossy(&out).into_owned(),
            started.elapsed(),
        ));
        // A body declared at 1 GiB: refused on its declared length, at once.
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
             Content-Length: 1073741824\r\n\r\n{{"
        );
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let _ = s.write_all(head.as_bytes());
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap_or(0);
        seen.push((
            "an over-declared body",
            String::from_utf8_lossy(&buf[..n]).into_owned(),
            Duration::ZERO,
        ));
        // A body that stops half-way: 408 after the body bound.
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n{{\"jsonrpc\""
        );
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let _ = s.write_all(head.as_bytes());
        let n = s.read(&mut buf).unwrap_or(0);
        seen.push((
            "a stalled body",
            String::from_utf8_lossy(&buf[..n]).into_owned(),
            Duration::ZERO,
        ));
        // Chunk sizes that are not hexadecimal, and one too large to be a number.
        for bad in [
            "zz\r\n{}\r\n0\r\n\r\n",
            "fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        ] {
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                 Transfer-Encoding: chunked\r\n\r\n{bad}"
            );
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(DEADLINE)).expect("timeout");
            let _ = s.write_all(head.as_bytes());
            let n = s.read(&mut buf).unwrap_or(0);
            seen.push((
                "bad chunk framing",
                String::from_utf8_lossy(&buf[..n]).into_owned(),
                Duration::ZERO,
            ));
        }
        seen
    });
    // The canary meanwhile.
    canary(&server.url).await;
    let seen = cases.await.expect("the hostile clients");
    for (case, answer, took) in &seen {
        let want = match *case {
            "half a head" | "a trickled head" | "a stalled body" => "HTTP/1.1 408",
            "an over-declared body" => "HTTP/1.1 413",
            _ => "HTTP/1.1 400",
        };
        assert!(answer.starts_with(want), "{case}: {answer:?}");
        if *case == "a trickled head" {
            // Closed at its bound (1 s), not when the trickle ended.
            assert!(*took < Duration::from_secs(10), "{case} took {took:?}");
        }
    }
    canary(&server.url).await;
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// Three hundred uploads that stop just under the body limit and stall hold at most the
/// bodies-in-memory budget: the others are refused 503 at once, the server's memory stays
/// bounded, and the canary is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_uploads_hold_at_most_the_body_budget() {
    let server = Server::start(&["--max-body-memory-bytes", "33554432"]);
    let port = server.port;
    let before = rss_kib(server.pid());
    let held = tokio::task::spawn_blocking(move || {
        let body = vec![b' '; (1 << 20) - 64];
        let mut socks = Vec::new();
        let mut refused = 0;
        for _ in 0..300 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_write_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            s.set_read_timeout(Some(Duration::from_millis(1)))
                .expect("timeout");
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                1 << 20
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
            let mut buf = [0u8; 32];
            if let Ok(n) = s.read(&mut buf) {
                if buf[..n].starts_with(b"HTTP/1.1 503") {
                    refused += 1;
                }
            }
            socks.push(s);
        }
        (socks, refused)
    })
    .await
    .expect("the uploads");
    canary(&server.url).await;
    let after = rss_kib(server.pid());
    let (socks, refused) = held;
    assert!(refused > 0, "no upload was refused for the body budget");
    // The budget is 32 MiB; everything else the server holds is far below 100 MiB.
    assert!(
        after < before + 100 * 1024,
        "RSS grew from {before} KiB to {after} KiB under stalled uploads"
    );
    drop(socks);
}

/// MCP-Protocol-Version (HX-01, HX-02): a version this server does not speak, one that is
/// not a version at all, or one contradicting the request's own version (another than its
/// `_meta`'s; 2026-07-28 in a session) gets 400 with a JSON-RPC error naming the supported
/// versions, in both eras; the right ones are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_protocol_versions_get_400() {
    let server = Server::start(&[]);
    let c = http();
    for (header, code) in [
        ("1900-01-01", -32022),
        ("not-a-version", -32022),
        ("2025-11-25", -32020),
    ] {
        let r = modern(&c, &server.url, 1, "tools/list", json!({}))
            .header("mcp-protocol-version", header)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "modern, header {header}");
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["error"]["code"], code, "modern, header {header}: {v}");
        let supported = v["error"]["data"]["supported"]
            .as_array()
            .expect("supported");
        assert!(supported.contains(&json!("2026-07-28")), "{v}");
    }
    let r = modern(&c, &server.url, 1, "tools/list", json!({}))
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let s = Session::open(&server.url, None).await;
    for header in ["1900-01-01", "not-a-version", "2026-07-28"] {
        let r = s
            .post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .header("mcp-protocol-version", header)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "legacy, header {header}");
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["error"]["code"], -32600, "legacy, header {header}: {v}");
        let supported = v["error"]["data"]["supported"]
            .as_array()
            .expect("supported");
        assert!(supported.contains(&json!("2025-11-25")), "{v}");
    }
    // The session's own version, and the other revisions of its era that have Streamable
    // HTTP (the official conformance suite names 2025-03-26 in a 2025-11-25 session).
    for header in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let r = s
            .post(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
            .header("mcp-protocol-version", header)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200, "legacy, header {header}");
    }
    canary(&server.url).await;
}

/// One client that opens fifty streams and reads none leaves every other client able to open
/// a stream at once; and a stream whose client reads nothing is ended after the write-stall
/// bound, freeing its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_streams_do_not_take_streaming_from_others() {
    let server = Server::start(&[]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(1_000_000, 5).await;
    let c = http();
    let mut unread = Vec::new();
    for i in 0..50 {
        let r = modern(&c, &server.url, i, "tasks/stream", json!({"taskId": task}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        unread.push(r);
    }
    let open = open_all(&server.url, &[task.as_str()], None)
        .await
        .unwrap_or_else(|refusal| panic!("the other client was refused: {refusal}"));
    drop(open);
    drop(unread);

    // Two slots, both taken by streams that are never read, of a task whose events fill
    // every buffer between them: the write stalls, the connections are closed, the slots
    // come back.
    let server = Server::start(&["--max-principal-streams", "2", "--write-stall-timeout", "1"]);
    let s = Session::open(&server.url, None).await;
    let r = s
        .call(
            1,
            "tools/call",
            json!({"name": "emit", "task": {},
                   "arguments": {"count": 4000, "interval_ms": 0, "payload_bytes": 16384}}),
        )
        .await;
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let port = server.port;
    let t = task.clone();
    let stalled = tokio::task::spawn_blocking(move || {
        let mut stalled = Vec::new();
        for i in 0..2 {
            let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
            sock.write_all(&modern_stream(port, i, &t)).expect("write");
            // Admitted (its answer began), then never read again.
            let mut head = [0u8; 12];
            sock.read_exact(&mut head).expect("the answer's head");
            assert_eq!(&head, b"HTTP/1.1 200");
            stalled.push(sock);
        }
        stalled
    });
    let stalled = stalled.await.expect("the stalled readers");
    // Both slots are taken: a third stream is refused, naming the limit that was hit.
    let refusal = open_all(&server.url, &[task.as_str()], None)
        .await
        .err()
        .expect("a third stream is refused while two unread ones hold the slots");
    assert_eq!(
        refusal["error"]["data"]["reason"], "stream_limit",
        "{refusal}"
    );
    let message = refusal["error"]["message"].as_str().expect("message");
    assert!(message.contains("principal"), "{message}");
    // The stalled streams are ended at the write-stall bound; their slots come back.
    limit_is_whole(&server.url, &[task.as_str()], None).await;
    drop(stalled);
}
