//! The side-by-side comparison (`benches/compare.sh` builds and runs it): the same workloads
//! against the machine's bounds and against the official MCP TypeScript SDK, interleaved in
//! rounds (each round runs every workload once, in an order rotated per round), then medians
//! and the ratios the performance targets speak of.
//!
//! `compare [--rounds R] [--events N] [--fsync-events M] [--appenders K] [--payload B]
//!          [--durable-live-events D] [--ts-dir DIR] [--node NODE] [--no-ts]`
//!
//! `compare pipe-writer line|serialise N B` is the writing side of the pipe bound (run as a
//! child, like a server).

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use taskstream_benches::http::HttpSession;
use taskstream_benches::raw::{self, PipeMode};
use taskstream_benches::stats::{median, range, rate, secs};
use taskstream_benches::stdio::{Received, StdioServer};
use taskstream_benches::store::{
    append_concurrently, create_task, emit_concurrently, fill, open, task_id,
};
use taskstream_benches::{emit_data_len, payload_of, scratch_dir, taskstream_bin};
use taskstream_core::{rpc, RetentionPolicy, Seq};
use taskstream_store::Durability;

struct Options {
    rounds: usize,
    events: u64,
    fsync_events: usize,
    appenders: usize,
    payload: usize,
    durable_live_events: u64,
    ts_dir: PathBuf,
    node: String,
    ts: bool,
    /// A PostgreSQL database for the `--store` workloads (compare.sh starts a cluster).
    store_url: Option<String>,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 5,
        events: 100_000,
        fsync_events: 500,
        appenders: 64,
        payload: taskstream_benches::PAYLOAD_BYTES,
        durable_live_events: 1000,
        ts_dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("compare/ts"),
        node: "node".to_owned(),
        ts: true,
        store_url: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().unwrap_or_default();
        let num = |v: String| -> usize {
            v.parse()
                .unwrap_or_else(|_| panic!("{a} wants a number, not {v:?}"))
        };
        match a.as_str() {
            "--rounds" => o.rounds = num(value()).max(1),
            "--events" => o.events = num(value()) as u64,
            "--fsync-events" => o.fsync_events = num(value()),
            "--appenders" => o.appenders = num(value()).max(1),
            "--payload" => o.payload = num(value()),
            "--durable-live-events" => o.durable_live_events = num(value()) as u64,
            "--ts-dir" => o.ts_dir = PathBuf::from(value()),
            "--node" => o.node = value(),
            "--no-ts" => o.ts = false,
            "--store-url" => o.store_url = Some(value()),
            other => panic!("unknown argument {other:?}"),
        }
    }
    o
}

/// One measurement: events per second, and for streams the time to the first event.
#[derive(Clone, Copy)]
struct Sample {
    rate: f64,
    first: Option<Duration>,
    /// Group commit's mean batch (events per fdatasync).
    batch: Option<f64>,
    /// Events that arrived after an event with a higher seq.
    disorder: u64,
}

impl Sample {
    fn rate(events: u64, took: Duration) -> Sample {
        Sample {
            rate: events as f64 / took.as_secs_f64(),
            first: None,
            batch: None,
            disorder: 0,
        }
    }

    fn stream(r: Received) -> Sample {
        Sample {
            rate: r.rate(),
            first: Some(r.first),
            batch: None,
            disorder: r.out_of_order,
        }
    }
}

/// A long-lived peer or server the workloads talk to.
struct Peers {
    replay: StdioServer,
    replay_task: String,
    /// The same finished task on a data dir: replay reads sled, not memory.
    replay_disk: StdioServer,
    replay_disk_task: String,
    _replay_disk_dir: tempfile::TempDir,
    /// The same finished task in PostgreSQL (`serve --store`), with `--store-url`.
    replay_pg: Option<(StdioServer, String)>,
    sdk_stdio: Option<StdioServer>,
    sdk_http: Option<(Child, HttpSession, String)>,
    /// `taskstream serve --http` holding the same finished task, and its session.
    http: (Child, HttpSession, String),
}

/// Starts `taskstream serve --http 127.0.0.1:0` with `flags` and opens a 2025-11-25 session.
fn taskstream_http(flags: &[&str]) -> (Child, HttpSession) {
    let mut child = Command::new(taskstream_bin())
        .arg("serve")
        .args(flags)
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn taskstream serve --http");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    // The listening line, then the rest of the log drained so the server never blocks on it.
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = line
                .split("listening on http://127.0.0.1:")
                .nth(1)
                .and_then(|r| r.trim_end_matches("/mcp").parse::<u16>().ok())
            {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(port);
                }
            }
        }
    });
    let port = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the listening line");
    let session = HttpSession::open(port).expect("open a session");
    (child, session)
}

/// `emit {count: n}` as a task over HTTP; its id.
fn http_emit(s: &mut HttpSession, n: u64, data: usize) -> String {
    let r = s
        .call(
            "tools/call",
            &serde_json::json!({"name": "emit", "arguments": {"count": n, "payload_bytes": data}, "task": {}}),
        )
        .expect("tools/call");
    r.pointer("/result/task/taskId")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_else(|| panic!("no task in {r}"))
        .to_owned()
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn taskstream(extra: &[&str]) -> StdioServer {
    let mut cmd = Command::new(taskstream_bin());
    cmd.arg("serve").args(extra);
    let mut s = StdioServer::spawn(&mut cmd).expect("spawn taskstream serve");
    s.initialize("2025-11-25").expect("initialize taskstream");
    s
}

fn start_peers(o: &Options) -> Peers {
    let max = (o.events + 10).to_string();
    let data = emit_data_len(o.payload);
    let mem = [
        "--in-memory",
        "--durability",
        "none",
        "--max-events-per-task",
        &max,
    ];
    let (replay, replay_task) = with_finished_task(&mem, o.events, data);
    let replay_disk_dir = scratch_dir();
    let disk_path = replay_disk_dir.path().to_string_lossy().into_owned();
    let disk = [
        "--data-dir",
        &disk_path,
        "--durability",
        "none",
        "--max-events-per-task",
        &max,
    ];
    let (replay_disk, replay_disk_task) = with_finished_task(&disk, o.events, data);
    let replay_pg = o.store_url.as_deref().map(|url| {
        let pg = ["--store", url, "--max-events-per-task", &max];
        with_finished_task(&pg, o.events, data)
    });
    let (sdk_stdio, sdk_http) = if o.ts {
        let mut cmd = Command::new(&o.node);
        cmd.arg(o.ts_dir.join("stdio-server.mjs"));
        let mut stdio = StdioServer::spawn(&mut cmd).expect("spawn the SDK's stdio server");
        stdio.initialize("2025-11-25").expect("initialize the SDK");
        (Some(stdio), Some(start_http(o)))
    } else {
        (None, None)
    };
    let (child, mut session) = taskstream_http(&mem);
    let task = http_emit(&mut session, o.events, data);
    loop {
        let r = session
            .call("tasks/get", &serde_json::json!({"taskId": task}))
            .expect("tasks/get");
        if r.pointer("/result/status")
            .and_then(serde_json::Value::as_str)
            != Some("working")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Peers {
        replay,
        replay_task,
        replay_disk,
        replay_disk_task,
        _replay_disk_dir: replay_disk_dir,
        replay_pg,
        sdk_stdio,
        sdk_http,
        http: (child, session, task),
    }
}

/// Starts the SDK's Streamable HTTP server, opens a session and fills its event store with one
/// stream of `events` notifications; returns the cursor that replays them all.
fn start_http(o: &Options) -> (Child, HttpSession, String) {
    let mut child = Command::new(&o.node)
        .arg(o.ts_dir.join("http-server.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the SDK's HTTP server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the port");
    let port: u16 = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected {line:?}"));
    let mut session = HttpSession::open(port).expect("open an HTTP session");
    let (cursor, live) = session
        .emit(o.events, emit_data_len(o.payload))
        .expect("fill the event store");
    assert_eq!(live, o.events, "events received live over HTTP");
    (child, session, cursor)
}

/// `tasks/stream {after: 0}` on a finished task of `n` events, from the request to its last
/// event (seqs 1 ..= n + 1), in order.
fn replay_all(server: &mut StdioServer, task: &str, n: u64) -> Sample {
    let start = Instant::now();
    let id = server.open_stream(task, Some(0)).expect("stream");
    let got = server.events(start, n + 1).expect("events");
    assert_eq!((got.events, got.out_of_order), (n + 1, 0));
    server.response(id).expect("stream result");
    Sample::stream(got)
}

/// `emit {count: n}` as a task on a fresh `server` (started untimed: no earlier task's cleanup
/// runs during the measurement), streamed live: from the call to its last event (n + 2 with
/// the status events); then the server is closed.
fn live_emit(mut server: StdioServer, n: u64, data: usize) -> Sample {
    let start = Instant::now();
    let task = server.emit_task(n, data).expect("emit");
    let id = server.open_stream(&task, None).expect("stream");
    let got = server.events(start, n + 2).expect("events");
    assert_eq!((got.events, got.out_of_order), (n + 2, 0));
    server.response(id).expect("stream result");
    assert!(server.close().expect("close").success());
    Sample::stream(got)
}

/// A server started with `flags`, holding one finished `emit` task of `n` events.
fn with_finished_task(flags: &[&str], n: u64, data: usize) -> (StdioServer, String) {
    let mut server = taskstream(flags);
    let task = server.emit_task(n, data).expect("emit");
    server.wait_terminal(&task).expect("wait");
    (server, task)
}

type Workload<'a> = Box<dyn FnMut() -> Vec<(&'static str, Sample)> + 'a>;

fn workloads<'a>(o: &'a Options, peers: &'a mut Peers) -> Vec<Workload<'a>> {
    let payload = payload_of(o.payload);
    let record = vec![b'r'; taskstream_benches::store::record_len(&payload)];
    let k = o.appenders;
    let group_events = o.fsync_events * k / 4;
    let data = emit_data_len(o.payload);
    let Peers {
        replay,
        replay_task,
        replay_disk,
        replay_disk_task,
        replay_pg,
        sdk_stdio,
        sdk_http,
        http,
        ..
    } = peers;
    let mut w: Vec<Workload<'a>> = Vec::new();

    let p = payload.clone();
    w.push(Box::new(move || {
        let ev = rpc::EventNotification {
            task_id: "0f9e8d7c6b5a49382716051423324150",
            seq: Seq::new(12_345).expect("seq"),
            event_type: taskstream_benches::TICK,
            payload: &p,
        };
        let mut out = vec![0u8; rpc::event_len(&ev)];
        let n = 2_000_000u64;
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(rpc::write_event(std::hint::black_box(&ev), &mut out).ok());
        }
        vec![("serialise_event_300B", Sample::rate(n, start.elapsed()))]
    }));

    let rec = record.clone();
    let m = o.fsync_events;
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let took = raw::fsync_appends(dir.path(), &rec, m, 1).expect("raw fsync");
        vec![("raw_fdatasync_per_event", Sample::rate(m as u64, took))]
    }));

    let p = payload.clone();
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let store = open(
            Some(dir.path()),
            Durability::Event,
            RetentionPolicy::DEFAULT,
        );
        let id = task_id(0);
        create_task(&store, &id);
        let start = Instant::now();
        fill(&store, &id, m, &p);
        vec![(
            "store_append_event",
            Sample::rate(m as u64, start.elapsed()),
        )]
    }));

    let rec = record.clone();
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let took = raw::fsync_appends(dir.path(), &rec, group_events, k).expect("raw fsync");
        vec![(
            "raw_fdatasync_batch_K",
            Sample::rate(group_events as u64, took),
        )]
    }));

    let p = payload.clone();
    let rec = record.clone();
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let store = open(
            Some(dir.path()),
            Durability::Group,
            RetentionPolicy::DEFAULT,
        );
        let tasks: Vec<String> = (0..k).map(task_id).collect();
        for id in &tasks {
            create_task(&store, id);
        }
        let before = store.stats().wal.syncs;
        let took = append_concurrently(&store, &tasks, group_events as u64, &p);
        let syncs = store.stats().wal.syncs - before;
        let batch = group_events as f64 / syncs.max(1) as f64;
        let mut group = Sample::rate(group_events as u64, took);
        group.batch = Some(batch);
        drop(store);
        // The raw bound at the batch size group commit reached, right after it.
        let matched = (batch.round() as usize).max(1);
        let took = raw::fsync_appends(dir.path(), &rec, group_events, matched).expect("raw");
        vec![
            ("store_append_group_K", group),
            (
                "raw_fdatasync_batch_matched",
                Sample::rate(group_events as u64, took),
            ),
        ]
    }));

    // Group commit as the pipelined path has it: K tasks emitting at once, none waiting for
    // the device before its share is out; one flush covers whatever all of them emitted.
    let p = payload.clone();
    let rec = record.clone();
    let emitted = o.events;
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let store = open(
            Some(dir.path()),
            Durability::Group,
            taskstream_benches::store::retention_for(
                usize::try_from(emitted).unwrap_or(usize::MAX),
            ),
        );
        let tasks: Vec<String> = (0..k).map(task_id).collect();
        for id in &tasks {
            create_task(&store, id);
        }
        let before = store.stats().wal.syncs;
        let took = emit_concurrently(&store, &tasks, emitted, &p);
        let syncs = store.stats().wal.syncs - before;
        let batch = emitted as f64 / syncs.max(1) as f64;
        let mut group = Sample::rate(emitted, took);
        group.batch = Some(batch);
        drop(store);
        let matched = (batch.round() as usize).max(1);
        let n = usize::try_from(emitted).unwrap_or(usize::MAX);
        let took = raw::fsync_appends(dir.path(), &rec, n, matched).expect("raw");
        vec![
            ("store_emit_group_K", group),
            (
                "raw_fdatasync_batch_matched_emit",
                Sample::rate(emitted, took),
            ),
        ]
    }));

    // The scheduler's part of group commit with K waiting appenders: waking K parked threads.
    w.push(Box::new(move || {
        let cycles = 500;
        let took = raw::wake_parked(k, cycles);
        vec![("wake_K_parked_threads", Sample::rate(cycles, took))]
    }));

    for (name, mode) in [
        ("pipe_write_per_line", "line"),
        ("pipe_serialise_write_per_line", "serialise"),
    ] {
        let events = o.events;
        let payload = o.payload;
        w.push(Box::new(move || {
            let mut cmd = Command::new(std::env::current_exe().expect("exe"));
            cmd.args([
                "pipe-writer",
                mode,
                &events.to_string(),
                &payload.to_string(),
            ]);
            let start = Instant::now();
            let mut child = StdioServer::spawn(&mut cmd).expect("spawn the pipe writer");
            let got = child.events(start, events).expect("read");
            assert_eq!(got.events, events);
            let status = child.close().expect("close");
            assert!(status.success());
            vec![(name, Sample::stream(got))]
        }));
    }

    let n = o.events;
    w.push(Box::new(move || {
        vec![(
            "taskstream_stdio_replay",
            replay_all(replay, replay_task, n),
        )]
    }));
    w.push(Box::new(move || {
        let got = replay_all(replay_disk, replay_disk_task, n);
        vec![("taskstream_stdio_replay_data_dir", got)]
    }));

    if let Some((server, task)) = replay_pg {
        w.push(Box::new(move || {
            let got = replay_all(server, task, n);
            vec![("taskstream_stdio_replay_postgres", got)]
        }));
    }
    if let Some(url) = o.store_url.clone() {
        let max = (o.events + 10).to_string();
        w.push(Box::new(move || {
            let live = taskstream(&["--store", &url, "--max-events-per-task", &max]);
            vec![("taskstream_stdio_live_postgres", live_emit(live, n, data))]
        }));
    }

    // Live emits get a fresh server each time.
    let max = (o.events + 10).to_string();
    let max_live = max.clone();
    w.push(Box::new(move || {
        let flags = ["--in-memory", "--durability", "none"];
        let live = taskstream(&[&flags[..], &["--max-events-per-task", &max_live]].concat());
        vec![("taskstream_stdio_live", live_emit(live, n, data))]
    }));

    w.push(Box::new(move || {
        let dir = scratch_dir();
        let data_dir = dir.path().to_string_lossy().into_owned();
        let flags = ["--data-dir", &data_dir, "--durability", "none"];
        let live = taskstream(&[&flags[..], &["--max-events-per-task", &max]].concat());
        vec![("taskstream_stdio_live_data_dir", live_emit(live, n, data))]
    }));

    let d = o.durable_live_events;
    // Every event retained, as in the other live workloads (the default limit, 10 000, would
    // end the stream with events_gone once the reader fell that far behind).
    let max_durable = (d + 10).to_string();
    w.push(Box::new(move || {
        let dir = scratch_dir();
        let data_dir = dir.path().to_string_lossy().into_owned();
        let server = taskstream(&[
            "--data-dir",
            &data_dir,
            "--durability",
            "group",
            "--max-events-per-task",
            &max_durable,
        ]);
        vec![(
            "taskstream_stdio_live_durable_group",
            live_emit(server, d, data),
        )]
    }));

    {
        let (_, session, task) = http;
        w.push(Box::new(move || {
            // tasks/stream {after: 0} over HTTP (SSE), in a 2025-11-25 session.
            let got = session.stream(task, Some(0), n + 1).expect("stream");
            assert_eq!((got.events, got.out_of_order), (n + 1, 0));
            vec![("taskstream_http_replay", Sample::stream(got))]
        }));
    }
    {
        let max = (n + 10).to_string();
        w.push(Box::new(move || {
            let (child, mut session) = taskstream_http(&[
                "--in-memory",
                "--durability",
                "none",
                "--max-events-per-task",
                &max,
            ]);
            let task = http_emit(&mut session, n, data);
            let got = session.stream(&task, None, n + 2).expect("stream");
            assert_eq!((got.events, got.out_of_order), (n + 2, 0));
            stop(child);
            vec![("taskstream_http_live", Sample::stream(got))]
        }));
    }

    if let Some(sdk) = sdk_stdio {
        w.push(Box::new(move || {
            let start = Instant::now();
            let id = sdk
                .request(
                    "tools/call",
                    &serde_json::json!({"name": "emit", "arguments": {"count": n, "payload_bytes": data}}),
                )
                .expect("call");
            let got = sdk.events(start, n).expect("events");
            assert_eq!(got.events, n);
            sdk.response(id).expect("tool result");
            vec![("sdk_stdio_notify", Sample::stream(got))]
        }));
    }
    if let Some((_, session, cursor)) = sdk_http {
        let cursor = cursor.clone();
        w.push(Box::new(move || {
            let got = session.replay(&cursor, n).expect("replay");
            assert_eq!(got.events, n, "events replayed over HTTP");
            // Its live stream over Streamable HTTP in the same session (the server keeps one):
            // `emit` answered as SSE, from the call to its end (each round adds n events to
            // its in-memory event store).
            let start = Instant::now();
            let (_, events) = session.emit(n, data).expect("emit");
            assert_eq!(events, n, "events received live over HTTP");
            vec![
                ("sdk_http_replay", Sample::stream(got)),
                ("sdk_http_live", Sample::rate(events, start.elapsed())),
            ]
        }));
    }
    w
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "cpus {} | {cpu} | kernel {} | loadavg {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        kernel.trim(),
        load.trim()
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("pipe-writer") {
        let mode = match args.get(2).map(String::as_str) {
            Some("line") => PipeMode::Line,
            _ => PipeMode::Serialise,
        };
        let n = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(0);
        let b = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(300);
        if let Err(e) = raw::pipe_writer(mode, n, b) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("pipe-writer: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let o = options();
    println!("machine: {}", machine());
    println!(
        "rounds {} | stream events {} | payload {} B | fsync events {} | appenders {} | durable live events {}",
        o.rounds, o.events, o.payload, o.fsync_events, o.appenders, o.durable_live_events
    );
    let mut peers = start_peers(&o);
    let mut samples: BTreeMap<&'static str, Vec<Sample>> = BTreeMap::new();
    {
        let mut w = workloads(&o, &mut peers);
        let count = w.len();
        for round in 0..o.rounds {
            let started = Instant::now();
            for i in 0..count {
                for (name, s) in (w[(i + round) % count])() {
                    samples.entry(name).or_default().push(s);
                }
            }
            eprintln!(
                "round {}/{} done in {:.1} s",
                round + 1,
                o.rounds,
                started.elapsed().as_secs_f64()
            );
        }
    }
    report(&o, &samples);
    println!("machine after: {}", machine());
    if let Some((mut child, _, _)) = peers.sdk_http.take() {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    let Peers { http, .. } = peers;
    stop(http.0);
}

/// The median batch of a workload's samples (NaN without any).
fn median_batch(samples: &BTreeMap<&'static str, Vec<Sample>>, name: &str) -> f64 {
    samples.get(name).map_or(f64::NAN, |v| {
        let batches: Vec<f64> = v.iter().filter_map(|s| s.batch).collect();
        if batches.is_empty() {
            f64::NAN
        } else {
            median(&batches)
        }
    })
}

fn report(o: &Options, samples: &BTreeMap<&'static str, Vec<Sample>>) {
    let med = |name: &str| -> f64 {
        samples.get(name).map_or(f64::NAN, |v| {
            median(&v.iter().map(|s| s.rate).collect::<Vec<_>>())
        })
    };
    println!();
    println!(
        "{:<38} {:>14} {:>24} {:>12} {:>8} {:>12}",
        "workload", "median rate", "min .. max", "1st event", "batch", "out of order"
    );
    for (name, v) in samples {
        let rates: Vec<f64> = v.iter().map(|s| s.rate).collect();
        let (lo, hi) = range(&rates);
        let firsts: Vec<f64> = v
            .iter()
            .filter_map(|s| s.first.map(|d| d.as_secs_f64()))
            .collect();
        let first = if firsts.is_empty() {
            String::new()
        } else {
            secs(median(&firsts))
        };
        let batches: Vec<f64> = v.iter().filter_map(|s| s.batch).collect();
        let batch = if batches.is_empty() {
            String::new()
        } else {
            format!("{:.1}", median(&batches))
        };
        let disorder: u64 = v.iter().map(|s| s.disorder).sum();
        println!(
            "{name:<38} {:>14} {:>24} {first:>12} {batch:>8} {disorder:>12}",
            rate(median(&rates)),
            format!("{} .. {}", rate(lo), rate(hi)),
        );
    }
    let k = o.appenders;
    println!();
    println!(
        "{:<72} {:>9} {:>9}  verdict",
        "target (medians of this run)", "measured", "target"
    );
    let target = |what: String, measured: f64, goal: f64, higher_is_better: bool| {
        let ok = if higher_is_better {
            measured >= goal
        } else {
            measured <= goal
        };
        println!(
            "{what:<72} {measured:>9.2} {goal:>9.2}  {}",
            if measured.is_nan() {
                "n/a"
            } else if ok {
                "met"
            } else {
                "MISSED"
            }
        );
    };
    target(
        format!("group commit ({k} appenders) / raw fdatasync batch {k}"),
        med("store_append_group_K") / med("raw_fdatasync_batch_K"),
        0.5,
        true,
    );
    target(
        "group commit / raw fdatasync at the batch size group commit reached".to_owned(),
        med("store_append_group_K") / med("raw_fdatasync_batch_matched"),
        0.5,
        true,
    );
    target(
        format!("group commit, {k} pipelined appenders (emit) / raw fdatasync at its batch"),
        med("store_emit_group_K") / med("raw_fdatasync_batch_matched_emit"),
        0.8,
        true,
    );
    target(
        format!("the batch {k} pipelined appenders reach (events per fdatasync)"),
        median_batch(samples, "store_emit_group_K"),
        k as f64,
        true,
    );
    // With K appenders that each wait, a batch of K means the device and the K wake-ups take
    // turns: the best ratio is the flush's time over the flush's plus the wake-ups' time.
    let flush = k as f64 / med("raw_fdatasync_batch_K");
    let wake = 1.0 / med("wake_K_parked_threads");
    target(
        format!("group commit, {k} waiting appenders / raw fdatasync at its batch"),
        med("store_append_group_K") / med("raw_fdatasync_batch_matched"),
        0.8,
        true,
    );
    target(
        format!("  its bound here: flush / (flush + waking {k} parked threads)"),
        flush / (flush + wake),
        0.8,
        true,
    );
    target(
        "per-event durable append / raw fdatasync per event".to_owned(),
        med("store_append_event") / med("raw_fdatasync_per_event"),
        0.8,
        true,
    );
    target(
        "one task live, group, data dir: k events/s".to_owned(),
        med("taskstream_stdio_live_durable_group") / 1e3,
        200.0,
        true,
    );
    if o.store_url.is_some() {
        target(
            "one task live, PostgreSQL (serve --store): k events/s".to_owned(),
            med("taskstream_stdio_live_postgres") / 1e3,
            100.0,
            true,
        );
        target(
            "stdio replay, PostgreSQL / the same from a data dir".to_owned(),
            med("taskstream_stdio_replay_postgres") / med("taskstream_stdio_replay_data_dir"),
            0.8,
            true,
        );
    }
    target(
        "one task live, none, data dir / raw pipe, serialise+write per line".to_owned(),
        med("taskstream_stdio_live_data_dir") / med("pipe_serialise_write_per_line"),
        0.5,
        true,
    );
    target(
        "one task live, in memory / raw pipe, serialise+write per line".to_owned(),
        med("taskstream_stdio_live") / med("pipe_serialise_write_per_line"),
        0.5,
        true,
    );
    target(
        "stdio replay of a finished task / raw pipe, serialise+write per line".to_owned(),
        med("taskstream_stdio_replay") / med("pipe_serialise_write_per_line"),
        0.5,
        true,
    );
    target(
        "the same, replayed from a data dir (sled) / raw pipe".to_owned(),
        med("taskstream_stdio_replay_data_dir") / med("pipe_serialise_write_per_line"),
        0.5,
        true,
    );
    let first_ms = samples.get("taskstream_http_replay").map_or(f64::NAN, |v| {
        median(
            &v.iter()
                .filter_map(|s| s.first.map(|d| d.as_secs_f64() * 1e3))
                .collect::<Vec<_>>(),
        )
    });
    target(
        format!(
            "ms to the first replayed event over HTTP, {} events retained",
            o.events
        ),
        first_ms,
        1.0,
        false,
    );
    target(
        "ns to write one notifications/tasks/event (300 B payload)".to_owned(),
        1e9 / med("serialise_event_300B"),
        100.0,
        false,
    );
    if o.ts {
        target(
            "taskstream stdio replay / SDK Streamable HTTP replay (InMemoryEventStore)".to_owned(),
            med("taskstream_stdio_replay") / med("sdk_http_replay"),
            20.0,
            true,
        );
        target(
            "taskstream HTTP replay (tasks/stream over SSE) / SDK Streamable HTTP replay"
                .to_owned(),
            med("taskstream_http_replay") / med("sdk_http_replay"),
            20.0,
            true,
        );
        target(
            "taskstream HTTP live (tasks/stream over SSE) / SDK Streamable HTTP live".to_owned(),
            med("taskstream_http_live") / med("sdk_http_live"),
            5.0,
            true,
        );
        target(
            "taskstream stdio live emit / SDK stdio notifications".to_owned(),
            med("taskstream_stdio_live") / med("sdk_stdio_notify"),
            3.0,
            true,
        );
        target(
            "the same, live on a data dir (sled, no flush) / SDK stdio notifications".to_owned(),
            med("taskstream_stdio_live_data_dir") / med("sdk_stdio_notify"),
            3.0,
            true,
        );
        target(
            "taskstream stdio replay / SDK stdio notifications".to_owned(),
            med("taskstream_stdio_replay") / med("sdk_stdio_notify"),
            3.0,
            true,
        );
        target(
            "one task live, group, data dir / SDK stdio notifications (persists nothing)"
                .to_owned(),
            med("taskstream_stdio_live_durable_group") / med("sdk_stdio_notify"),
            1.0,
            true,
        );
    }
}
