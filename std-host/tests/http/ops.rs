//! The operations endpoints of `serve --http` and `--metrics-addr`: `/metrics` scraped after a
//! workload whose counts are known (an `emit` task of N events, streamed once from the start,
//! then a cursor retention has passed), `/healthz`, `/readyz`, and readiness failing once
//! SIGTERM starts the drain.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use super::client::{wait_status, Server, Session};

/// One sample line of the Prometheus text format: `name{labels} value`.
pub(crate) type Samples = HashMap<String, f64>;

/// Parses the Prometheus text format strictly enough to catch a malformed exposition: every
/// `# TYPE` names a known type before its samples, every sample belongs to the family the last
/// `# TYPE` named, and every value is a number.
fn parse(text: &str) -> Samples {
    let mut samples = Samples::new();
    let mut family: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            assert!(
                ["counter", "gauge", "histogram"].contains(&kind),
                "type {kind}"
            );
            family = Some((name.to_owned(), kind.to_owned()));
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (key, value) = line.rsplit_once(' ').expect("a sample: name value");
        let value: f64 = value.parse().expect("a numeric value");
        let (fam, kind) = family.as_ref().expect("a sample after its # TYPE");
        let name = key.split('{').next().unwrap_or(key);
        let ok = match kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{fam}{s}")),
            _ => name == fam,
        };
        assert!(ok, "sample {name} outside its family {fam}");
        assert!(
            samples.insert(key.to_owned(), value).is_none(),
            "duplicate {key}"
        );
    }
    samples
}

/// The text of `base/metrics`, after checking its status and content type.
pub(crate) async fn metrics_text(base: &str) -> String {
    let r = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("scrape");
    assert_eq!(r.status(), 200);
    assert!(r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain; version=0.0.4")));
    r.text().await.expect("body")
}

/// `base/metrics`, parsed (strictly: see [`parse`]).
pub(crate) async fn scrape(base: &str) -> Samples {
    parse(&metrics_text(base).await)
}

fn get(s: &Samples, key: &str) -> f64 {
    *s.get(key).unwrap_or_else(|| panic!("no {key}"))
}

/// Asserts that every metric family `base/metrics` exposes is in docs/guide.md's table
/// ("Operating it").
pub(crate) async fn assert_documented(base: &str) {
    let text = metrics_text(base).await;
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide.md"),
    )
    .expect("docs/guide.md");
    let undocumented: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .filter(|family| !guide.contains(&format!("`{family}")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/guide.md: {undocumented:?}"
    );
}

fn metrics_line(stderr_line: &str) -> Option<String> {
    stderr_line
        .split("metrics on ")
        .nth(1)
        .map(|s| s.trim().to_owned())
}

#[tokio::test]
async fn metrics_count_a_known_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("d");
    let data = data.to_str().expect("utf-8 path");
    let server = Server::start_on(&["--data-dir", data], &["--max-events-per-task", "8"]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let before = scrape(&base).await;
    assert_eq!(
        get(
            &before,
            "taskstream_events_appended_total{store=\"data_dir\"}"
        ),
        0.0
    );
    assert_eq!(get(&before, "taskstream_ready"), 1.0);

    let s = Session::open(&server.url, None).await;
    const N: u64 = 20;
    let task = s.emit(N, 0).await;
    wait_status(&s, &task, "completed").await;
    // Retention keeps the last 8: a stream from the start replays them.
    let mut stream = s.stream(7, &task, None).await;
    let (seqs, _) = stream.rest().await;
    assert_eq!(seqs.len(), 8, "{seqs:?}");
    // A cursor retention passed: events_gone.
    let gone = s
        .call(8, "tasks/stream", json!({"taskId": task, "after": 0}))
        .await;
    assert_eq!(gone["error"]["code"], -32010, "{gone}");

    let m = scrape(&base).await;
    // The task's events: `working` (seq 0), N emitted, the terminal status: the next seq.
    let appended = seqs.last().copied().expect("a seq") + 1;
    assert_eq!(
        get(&m, "taskstream_events_appended_total{store=\"data_dir\"}"),
        appended as f64
    );
    assert!(
        get(
            &m,
            "taskstream_events_appended_bytes_total{store=\"data_dir\"}"
        ) > 0.0
    );
    assert_eq!(get(&m, "taskstream_replays_total"), 1.0);
    assert_eq!(get(&m, "taskstream_replayed_events_total"), 8.0);
    assert_eq!(get(&m, "taskstream_streams_open"), 0.0);
    assert_eq!(
        get(&m, "taskstream_events_gone_total{reason=\"cursor\"}"),
        1.0
    );
    assert_eq!(
        get(&m, "taskstream_events_gone_total{reason=\"overtaken\"}"),
        0.0
    );
    assert_eq!(get(&m, "taskstream_tasks{status=\"completed\"}"), 1.0);
    assert_eq!(get(&m, "taskstream_tasks{status=\"working\"}"), 0.0);
    assert!(get(&m, "taskstream_store_used_bytes") > 0.0);
    // Every record of the log went through a group commit: the batches hold them all.
    let batches = get(&m, "taskstream_commit_batch_records_count");
    assert!(batches >= 1.0);
    assert!(get(&m, "taskstream_commit_batch_records_sum") >= appended as f64);
    assert_eq!(
        get(&m, "taskstream_commit_batch_records_bucket{le=\"+Inf\"}"),
        batches
    );
    assert_eq!(get(&m, "taskstream_append_durable_seconds_count"), batches);
    // initialize, tools/call, tasks/get…, tasks/stream ×2, the first scrape: all 2xx.
    assert!(get(&m, "taskstream_http_responses_total{code=\"2xx\"}") >= 5.0);
    assert_eq!(
        get(&m, "taskstream_http_responses_total{code=\"5xx\"}"),
        0.0
    );

    assert_documented(&base).await;

    for (path, want) in [("/healthz", 200), ("/readyz", 200), ("/nothing", 404)] {
        let r = reqwest::get(format!("{base}{path}")).await.expect("probe");
        assert_eq!(r.status(), want, "{path}");
    }
}

#[tokio::test]
async fn metrics_need_the_bearer_token_when_the_server_has_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "secret-token alice\n").expect("token file");
    let server = Server::start(&["--auth-token-file", tokens.to_str().expect("utf-8")]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let c = reqwest::Client::new();
    let r = c.get(format!("{base}/metrics")).send().await.expect("get");
    assert_eq!(r.status(), 401);
    let r = c
        .get(format!("{base}/metrics"))
        .bearer_auth("secret-token")
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    // Probes stay open: an orchestrator has no token.
    let r = c.get(format!("{base}/readyz")).send().await.expect("get");
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn readiness_fails_on_sigterm_before_the_process_exits() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    // `--http` with `--metrics-addr`: the probe is asked on the address that stays up through
    // the drain (the `--http` listener stops accepting at once).
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskstream"))
        .args([
            "serve",
            "--in-memory",
            "--http",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--drain-secs",
            "2",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Duration::from_secs(20);
    let (mut ops, mut mcp) = (None, None);
    while ops.is_none() || mcp.is_none() {
        let line = rx.recv_timeout(deadline).expect("the start lines");
        if let Some(m) = metrics_line(&line) {
            ops = Some(m.trim_end_matches("/metrics").to_owned());
        }
        if let Some(u) = line.split("listening on ").nth(1) {
            mcp = Some(u.trim().to_owned());
        }
    }
    let (ops, mcp) = (ops.expect("ops"), mcp.expect("mcp"));
    let r = reqwest::get(format!("{ops}/readyz")).await.expect("readyz");
    assert_eq!(r.status(), 200);
    // A stream held open on a long task keeps the drain going for a moment.
    let s = Session::open(&mcp, None).await;
    let task = s.emit(100_000, 50).await;
    let mut stream = s.stream(9, &task, None).await;
    assert!(stream.next().await.is_some(), "a first event");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    // Readiness fails (503) while the process still serves (--drain-secs)…
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let r = reqwest::get(format!("{ops}/readyz")).await.expect("readyz");
        if r.status() == 503 {
            let why = r.text().await.expect("body");
            assert!(why.contains("shutting down"), "{why}");
            // …and the stream is still served meanwhile…
            assert!(stream.next().await.is_some(), "an event while draining");
            let m = scrape(&ops).await;
            assert_eq!(get(&m, "taskstream_ready"), 0.0);
            assert_eq!(get(&m, "taskstream_streams_open"), 1.0);
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "still ready after SIGTERM"
        );
    }
    // …then the stream ends and the process exits.
    let ended =
        tokio::time::timeout(deadline, async { while stream.next().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the stream ended");
    let until = std::time::Instant::now() + deadline;
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the process did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
