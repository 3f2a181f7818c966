//! The live status page of `serve --http`: the page and its module are served from the binary
//! without a token; `/status.json` asks for the same token as `/mcp` and lists only the
//! principal's tasks, each with the streams following it and their lag; `/metrics` counts
//! those streams in its lag histogram, modern-era streams as well as legacy ones; and
//! `--no-status-page` turns the page off. (The page itself, in a browser: scripts/browser.)

use std::time::Duration;

use serde_json::{json, Value};

use super::client::{http, modern, Server, Session, DEADLINE};

async fn overview(base: &str, token: &str) -> Value {
    let r = http()
        .get(format!("{base}/status.json"))
        .bearer_auth(token)
        .send()
        .await
        .expect("status.json");
    assert_eq!(r.status(), 200);
    r.json().await.expect("json")
}

async fn metric(base: &str, token: &str, name: &str) -> f64 {
    let text = http()
        .get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Polls `/status.json` until `done` holds of it, for at most [`DEADLINE`].
async fn wait_overview(base: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let v = overview(base, token).await;
        if done(&v) {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "overview still {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn streams_of(v: &Value, task: &str) -> usize {
    v["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["taskId"] == task))
        .and_then(|t| t["streams"].as_array())
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn the_overview_shows_the_principals_tasks_and_the_streams_following_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice-token alice\nbob-token bob\n").expect("token file");
    let server = Server::start(&["--auth-token-file", tokens.to_str().expect("utf-8")]);
    let base = format!("http://127.0.0.1:{}", server.port);

    // The page and its module carry no data: no token needed.
    for (path, kind) in [("/", "text/html"), ("/status.js", "text/javascript")] {
        let r = http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), 200, "{path}");
        let ct = r.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
    }
    // Its data is behind the token.
    let r = http()
        .get(format!("{base}/status.json"))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 401);

    let alice = Session::open(&server.url, Some("alice-token")).await;
    let task = alice.emit(200, 50).await;
    // A legacy stream (held by its session), read past its first events.
    let mut legacy = alice.stream(2, &task, None).await;
    for _ in 0..2 {
        legacy.next().await.expect("an event");
    }
    let v = wait_overview(&base, "alice-token", |v| streams_of(v, &task) == 1).await;
    let t = &v["tasks"][0];
    assert_eq!(t["taskId"], task.as_str(), "{v}");
    assert_eq!(t["tool"], "emit");
    assert_eq!(t["status"], "working");
    assert_eq!(t["earliestSeq"], 0);
    assert!(t["latestSeq"].as_u64().is_some_and(|s| s >= 1), "{v}");
    assert!(t["streams"][0]["lag"].is_u64(), "{v}");
    assert_eq!(v["principal"], "alice");
    assert_eq!(v["taskCount"], 1);

    // A modern stream of the same task (a request of its own): two followers.
    let modern_stream = modern(
        &http(),
        &server.url,
        3,
        "tasks/stream",
        json!({"taskId": task}),
    )
    .bearer_auth("alice-token")
    .send()
    .await
    .expect("modern tasks/stream");
    assert_eq!(modern_stream.status(), 200);
    wait_overview(&base, "alice-token", |v| streams_of(v, &task) == 2).await;
    assert_eq!(
        metric(&base, "alice-token", "taskstream_streams_open").await,
        2.0
    );
    assert_eq!(
        metric(&base, "alice-token", "taskstream_stream_lag_events_count").await,
        2.0
    );

    // Bob sees none of it.
    let b = overview(&base, "bob-token").await;
    assert_eq!(b["taskCount"], 0, "{b}");
    assert_eq!(b["tasks"], json!([]));

    // Both streams end: no follower left.
    drop(modern_stream);
    drop(legacy);
    alice.call(4, "tasks/cancel", json!({"taskId": task})).await;
    wait_overview(&base, "alice-token", |v| streams_of(v, &task) == 0).await;
}

#[tokio::test]
async fn no_status_page_turns_it_off() {
    let server = Server::start(&["--no-status-page"]);
    let base = format!("http://127.0.0.1:{}", server.port);
    for path in ["/", "/status.js", "/status.json"] {
        let r = http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), 404, "{path}");
    }
}
