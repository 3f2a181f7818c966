//! The scale run of `serve --http` (one long-lived server, many connections): one
//! server process with `TASKS` live tasks and `STREAMS` concurrent SSE streams on them; prints
//! the server's resident memory and thread count before, with the tasks, at the peak with
//! the streams and once every task has finished with its events retained, the time to create the tasks, and whether every stream was gap-free.
//!
//! `http_scale [--tasks N] [--streams M] [--events E] [--interval-ms MS] [--bin PATH]
//! [--data-dir DIR [--index-cache-mib MIB]]` (defaults 10000, 1000, 20, 500, the release binary next to this one, in
//! memory; with `--data-dir`, the server keeps its store in `DIR` at `--durability group`). It also prints the
//! fan-out rate: the frames every stream received, together, per second from the first stream
//! opened to the last one done; `--tasks 1 --events 2000 --interval-ms 1` measures it for
//! `M` streams following one live task. Each task lives `E × MS`: on a loaded
//! machine where creating the tasks takes longer than that, raise `--interval-ms` so that
//! every task is still live when the memory is read (the thread count shows it). Loopback only. Memory is read from `/proc/PID/status`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

const EVENTS: u64 = 20;
const INTERVAL_MS: u64 = 500;

fn status_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    })
}

fn request(
    c: &reqwest::Client,
    url: &str,
    id: u64,
    method: &str,
    mut params: Value,
) -> reqwest::RequestBuilder {
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    params["_meta"] = meta();
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

/// Reads one SSE `tasks/stream` response to its end: the seqs, and whether a response came.
async fn read_stream(r: reqwest::Response) -> (Vec<u64>, bool) {
    let mut body = r.bytes_stream();
    let mut buf = Vec::new();
    let mut seqs = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            for line in text.lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if v.get("method").is_some() {
                    seqs.push(v["params"]["seq"].as_u64().unwrap_or(u64::MAX));
                } else {
                    return (seqs, v.get("result").is_some());
                }
            }
        }
    }
    (seqs, false)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut tasks_n: u64 = 10_000;
    let mut streams_n: u64 = 1_000;
    let mut interval_ms: u64 = INTERVAL_MS;
    let mut events: u64 = EVENTS;
    let mut bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("taskstream")))
        .unwrap_or_default();
    let mut data_dir: Option<String> = None;
    let mut index_cache_mib: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tasks" => tasks_n = args.next().and_then(|v| v.parse().ok()).unwrap_or(tasks_n),
            "--streams" => {
                streams_n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(streams_n)
            }
            "--interval-ms" => {
                interval_ms = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(interval_ms)
            }
            "--events" => events = args.next().and_then(|v| v.parse().ok()).unwrap_or(events),
            "--bin" => bin = args.next().map(Into::into).unwrap_or(bin),
            "--data-dir" => data_dir = args.next(),
            "--index-cache-mib" => index_cache_mib = args.next(),
            other => {
                eprintln!("http_scale: unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let cap = (tasks_n + 16).to_string();
    let store: Vec<&str> = match (&data_dir, &index_cache_mib) {
        (Some(dir), Some(mib)) => vec![
            "--data-dir",
            dir,
            "--durability",
            "group",
            "--index-cache-mib",
            mib,
        ],
        (Some(dir), None) => vec!["--data-dir", dir, "--durability", "group"],
        (None, _) => vec!["--in-memory", "--durability", "none"],
    };
    let mut child = Command::new(&bin)
        .arg("serve")
        .args(&store)
        .args(["--http", "127.0.0.1:0"])
        .args([
            "--max-streams",
            "2048",
            "--max-running-tasks",
            &cap,
            "--max-total-running-tasks",
            &cap,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let pid = child.id();
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the listening line, then drains the log so the server never blocks on it.
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on ").nth(1) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(rest.trim().to_owned());
                }
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no listening line in 20 s"));
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"));
    let base_rss = status_field(pid, "VmRSS:");
    let base_threads = status_field(pid, "Threads:");

    let started = Instant::now();
    let ids = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (c, url, ids, next) = (c.clone(), url.clone(), Arc::clone(&ids), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks_n {
                    return;
                }
                let r = request(&c, &url, i, "tools/call",
                    json!({"name": "emit", "arguments": {"count": events, "interval_ms": interval_ms}}))
                    .send()
                    .await;
                let v: Value = match r {
                    Ok(r) => r.json().await.unwrap_or(Value::Null),
                    Err(_) => Value::Null,
                };
                match v["result"]["taskId"].as_str() {
                    Some(t) => ids.lock().await.push(t.to_owned()),
                    None => panic!("task {i} not created: {v}"),
                }
            }
        }));
    }
    for w in workers {
        w.await.unwrap_or_else(|e| panic!("creator: {e}"));
    }
    let created_s = started.elapsed().as_secs_f64();
    let tasks_rss = status_field(pid, "VmRSS:");
    let tasks_threads = status_field(pid, "Threads:");
    let ids = ids.lock().await.clone();

    let peak = Arc::new(AtomicU64::new(0));
    let peak_threads = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (peak, peak_threads) = (Arc::clone(&peak), Arc::clone(&peak_threads));
        tokio::spawn(async move {
            loop {
                peak.fetch_max(status_field(pid, "VmRSS:"), Ordering::Relaxed);
                peak_threads.fetch_max(status_field(pid, "Threads:"), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let streams_started = Instant::now();
    let mut streams = Vec::new();
    for k in 0..streams_n {
        let Some(task) = ids
            .get(usize::try_from(k).unwrap_or(0) % ids.len().max(1))
            .cloned()
        else {
            break;
        };
        let req = request(
            &c,
            &url,
            1_000_000 + k,
            "tasks/stream",
            json!({"taskId": task}),
        );
        streams.push(tokio::spawn(async move {
            match req.send().await {
                Ok(r) => read_stream(r).await,
                Err(_) => (Vec::new(), false),
            }
        }));
    }
    let mut gap_free = 0;
    let mut frames: u64 = 0;
    let want: Vec<u64> = (0..=events + 1).collect();
    for s in streams {
        if let Ok((seqs, answered)) = s.await {
            frames += seqs.len() as u64;
            if answered && seqs == want {
                gap_free += 1;
            }
        }
    }
    let streams_s = streams_started.elapsed().as_secs_f64();
    sampler.abort();
    let peak_rss = peak.load(Ordering::Relaxed).max(tasks_rss);
    // Every task done (a stream ends with its task; the others are asked), so that what is
    // read next is the memory of finished tasks with all their events retained.
    let finished = all_finished(&c, &url, &ids, Duration::from_secs(120)).await;
    // The server's sweep gives freed heap back once a second: read what stays, 3 s on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let retained_rss = status_field(pid, "VmRSS:");
    let retained_threads = status_field(pid, "Threads:");
    let _ = child.kill();
    let _ = child.wait();
    println!("http_scale: {tasks_n} live tasks (emit {events} events, {interval_ms} ms apart), {streams_n} concurrent SSE streams");
    println!(
        "  server at start:        RSS {:>7.1} MiB, {base_threads} threads",
        mib(base_rss)
    );
    println!("  with {tasks_n} live tasks: RSS {:>7.1} MiB, {tasks_threads} threads (created in {created_s:.2} s)", mib(tasks_rss));
    println!(
        "  peak with the streams:  RSS {:>7.1} MiB, {} threads",
        mib(peak_rss),
        peak_threads.load(Ordering::Relaxed)
    );
    println!(
        "  3 s after every task finished, {events} events each retained: RSS {:>7.1} MiB, {retained_threads} threads ({finished}/{tasks_n} finished)",
        mib(retained_rss)
    );
    println!("  streams gap-free, answered: {gap_free}/{streams_n} (all done in {streams_s:.2} s)");
    println!(
        "  fan-out: {frames} event frames to {streams_n} streams in {streams_s:.2} s: {:.0} frames/s",
        frames as f64 / streams_s.max(1e-9)
    );
    if gap_free != streams_n || finished != tasks_n {
        std::process::exit(1);
    }
}

/// Asks `tasks/get` of every task until all are terminal or `limit` has passed; returns how
/// many are.
async fn all_finished(c: &reqwest::Client, url: &str, ids: &[String], limit: Duration) -> u64 {
    let deadline = Instant::now() + limit;
    let mut left: Vec<&String> = ids.iter().collect();
    loop {
        let mut still = Vec::new();
        for (k, id) in left.into_iter().enumerate() {
            let r = request(
                c,
                url,
                2_000_000 + k as u64,
                "tasks/get",
                json!({"taskId": id}),
            )
            .send()
            .await;
            let v: Value = match r {
                Ok(r) => r.json().await.unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            let status = v["result"]["status"].as_str().unwrap_or("");
            if !matches!(status, "completed" | "failed" | "cancelled") {
                still.push(id);
            }
        }
        if still.is_empty() || Instant::now() >= deadline {
            return (ids.len() - still.len()) as u64;
        }
        left = still;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
