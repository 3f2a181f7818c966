//! The two storage backends side by side, in one run: the embedded data dir (`--durability
//! group`, its default) and PostgreSQL (`--store`, `synchronous_commit = on`), through the
//! storage interface the server uses ([`TaskStore`]).
//!
//! ```sh
//! cargo run --release -p taskstream-benches --bin store_backends -- [--rounds N] [--url postgres://…] [--writers N] [--cache-mb N] [--only WORKLOAD]
//! ```
//!
//! Without `--url` it starts a throwaway cluster with `scripts/postgres` (and stops it). Each
//! round measures, for each backend: durable appends per second with 1 and with 64 appenders
//! (each on a task of its own), the replay rate of a 100 000-event task (reads of 256, as
//! delivery reads; for PostgreSQL on the replica that wrote it, from its cache, and on another
//! replica, whose cache starts cold), and the latency from the start of an append to its delivery to a reader
//! woken by the change signal: in the same process for the data dir, on **another replica**
//! (a second store on the same database, woken by `LISTEN/NOTIFY`) for PostgreSQL, alone and
//! while 16 tasks emit; events per second of live tasks as a tool emits them (pipelined, the
//! last one waited for): one task of 100 000 events, 16 tasks of 20 000 at once; and, once a
//! round, PostgreSQL's own bound on this machine (one `INSERT … SELECT` of 100 000 rows of
//! 300 bytes). Prints one line per figure and round, then the medians and their ratios.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use taskstream_core::{Millis, RetentionPolicy, Seq};
use taskstream_store::{
    Durability, PgConfig, PgStore, RawEvent, Store, StoreConfig, TaskRecord, TaskStatus, TaskStore,
    DEFAULT_INDEX_CACHE_BYTES, DEFAULT_MAX_STORE_BYTES,
};

const PAYLOAD_BYTES: usize = 300;
const ONE_APPENDER: usize = 300;
const APPENDERS: usize = 64;
const PER_APPENDER: usize = 50;
const REPLAY_EVENTS: usize = 100_000;
const LATENCY_SAMPLES: usize = 400;
const LIVE_EVENTS: usize = 100_000;
const LIVE_TASKS: usize = 16;
const PER_LIVE_TASK: usize = 20_000;
const BOUND_ROWS: usize = 100_000;

fn retention() -> RetentionPolicy {
    RetentionPolicy {
        max_events: u32::MAX,
        ..RetentionPolicy::DEFAULT
    }
}

fn record(id: &str) -> TaskRecord {
    let now = taskstream_store::clock::now();
    TaskRecord {
        task_id: id.to_owned(),
        principal: "bench".into(),
        tool: "emit".into(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: now,
        last_updated_at: now,
        ttl_ms: None,
        poll_interval_ms: 1000,
        result: None,
        error: None,
    }
}

fn payload(i: usize) -> Vec<u8> {
    let head = format!(r#"{{"i":{i},"data":""#);
    let fill = PAYLOAD_BYTES.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "x".repeat(fill)).into_bytes()
}

fn append(store: &dyn TaskStore, task: &str, i: usize) {
    if let Err(e) = store.append(task, "dev.taskstream.tick", &payload(i), Millis(0)) {
        eprintln!("append failed: {e:?}");
        std::process::exit(1);
    }
}

fn create(store: &dyn TaskStore, task: &str) {
    if let Err(e) = store.create_task(record(task), taskstream_store::clock::now()) {
        eprintln!("create failed: {e:?}");
        std::process::exit(1);
    }
}

/// Appends per second with one appender.
fn append_one(store: &dyn TaskStore, round: usize) -> f64 {
    let task = format!("one-{round}");
    create(store, &task);
    let started = Instant::now();
    for i in 0..ONE_APPENDER {
        append(store, &task, i);
    }
    ONE_APPENDER as f64 / started.elapsed().as_secs_f64()
}

/// Appends per second with [`APPENDERS`] appenders, each on a task of its own.
fn append_many(store: &Arc<dyn TaskStore>, round: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(APPENDERS + 1));
    let threads: Vec<_> = (0..APPENDERS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let task = format!("many-{round}-{t}");
                create(&*store, &task);
                barrier.wait();
                for i in 0..PER_APPENDER {
                    append(&*store, &task, i);
                }
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for t in threads {
        let _ = t.join();
    }
    (APPENDERS * PER_APPENDER) as f64 / started.elapsed().as_secs_f64()
}

fn emit(store: &dyn TaskStore, task: &str, i: usize) {
    if let Err(e) = store.emit(task, "dev.taskstream.tick", &payload(i), Millis(0)) {
        eprintln!("emit failed: {e:?}");
        std::process::exit(1);
    }
}

/// A live task as a tool writes one: `n` events emitted (pipelined), the last one appended
/// (so the time counts until every event is durable and visible).
fn emit_task(store: &dyn TaskStore, task: &str, n: usize) {
    for i in 0..n - 1 {
        emit(store, task, i);
    }
    append(store, task, n - 1);
}

/// Events per second of one live task ([`LIVE_EVENTS`] emitted).
fn emit_one(store: &dyn TaskStore, round: usize) -> f64 {
    let task = format!("live-{round}");
    create(store, &task);
    let started = Instant::now();
    emit_task(store, &task, LIVE_EVENTS);
    LIVE_EVENTS as f64 / started.elapsed().as_secs_f64()
}

/// Events per second, in total, of [`LIVE_TASKS`] live tasks at once ([`PER_LIVE_TASK`] each).
fn emit_many(store: &Arc<dyn TaskStore>, round: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(LIVE_TASKS + 1));
    let threads: Vec<_> = (0..LIVE_TASKS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let task = format!("fleet-{round}-{t}");
                create(&*store, &task);
                barrier.wait();
                emit_task(&*store, &task, PER_LIVE_TASK);
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for t in threads {
        let _ = t.join();
    }
    (LIVE_TASKS * PER_LIVE_TASK) as f64 / started.elapsed().as_secs_f64()
}

/// [`LIVE_TASKS`] tasks emitting (as fast as they can, bounded by the store's backpressure)
/// until the returned flag is set; join the threads after setting it.
fn background_load(
    store: &Arc<dyn TaskStore>,
    round: usize,
) -> (Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = (0..LIVE_TASKS)
        .map(|t| {
            let (store, stop) = (Arc::clone(store), Arc::clone(&stop));
            std::thread::spawn(move || {
                let task = format!("load-{round}-{t}");
                create(&*store, &task);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    emit(&*store, &task, i);
                    i += 1;
                    if i % 64 == 0 {
                        // A fleet of agents, not a flood: about 10 k events/s in all.
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
        })
        .collect();
    (stop, threads)
}

/// The bound PostgreSQL itself sets on this machine: rows of [`PAYLOAD_BYTES`] per second
/// inserted by one `INSERT … SELECT` of [`BOUND_ROWS`] rows into a table of the events'
/// shape, committed (`synchronous_commit = on`).
fn bulk_bound(url: &str) -> f64 {
    let mut c = match postgres::Client::connect(url, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bound: {e}");
            std::process::exit(1);
        }
    };
    let setup = "DROP TABLE IF EXISTS bench_bound; \
        CREATE TABLE bench_bound (task_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, \
        payload text NOT NULL, at bigint NOT NULL, PRIMARY KEY (task_id, seq))";
    if let Err(e) = c.batch_execute(setup) {
        eprintln!("bound: {e}");
        std::process::exit(1);
    }
    let started = Instant::now();
    let sql = format!(
        "INSERT INTO bench_bound SELECT 'bound', g, 'dev.taskstream.tick', \
         repeat('x', {PAYLOAD_BYTES}), 0 FROM generate_series(1, {BOUND_ROWS}) g"
    );
    if let Err(e) = c.batch_execute(&sql) {
        eprintln!("bound: {e}");
        std::process::exit(1);
    }
    let rate = BOUND_ROWS as f64 / started.elapsed().as_secs_f64();
    let _ = c.batch_execute("DROP TABLE bench_bound");
    rate
}

/// Fills a task with [`REPLAY_EVENTS`] events (64 appenders on it), then reads it all, on
/// the same store and then on `other` (another replica); events per second of each read.
fn replay(store: &Arc<dyn TaskStore>, other: &Arc<dyn TaskStore>, round: usize) -> (f64, f64) {
    let task = format!("replay-{round}");
    create(&**store, &task);
    let threads: Vec<_> = (0..APPENDERS)
        .map(|t| {
            let (store, task) = (Arc::clone(store), task.clone());
            std::thread::spawn(move || {
                for i in (t..REPLAY_EVENTS - 1).step_by(APPENDERS) {
                    append(&*store, &task, i);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    (read_all(&**store, &task), read_all(&**other, &task))
}

/// Reads a task of [`REPLAY_EVENTS`] events from seq 0, 256 at a time; events per second.
fn read_all(store: &dyn TaskStore, task: &str) -> f64 {
    let started = Instant::now();
    let mut next = 0u64;
    let mut bytes = 0usize;
    loop {
        let mut got = 0;
        let read = store.read_raw_from(
            task,
            Seq::new(next).unwrap_or(Seq::ZERO),
            256,
            &mut |e: RawEvent| {
                bytes += e.payload().len();
                got += 1;
            },
        );
        if read.is_err() || got == 0 {
            break;
        }
        next += got as u64;
    }
    std::hint::black_box(bytes);
    if next as usize != REPLAY_EVENTS {
        eprintln!("replay read {next} events, not {REPLAY_EVENTS}");
        std::process::exit(1);
    }
    next as f64 / started.elapsed().as_secs_f64()
}

/// The latency from the start of an append on `writer` to a reader on `reader` (woken by its
/// change signal) having read the event: median and p99, in ms.
fn latency(writer: &dyn TaskStore, reader: &Arc<dyn TaskStore>, round: usize) -> (f64, f64) {
    let task = format!("latency-{round}");
    create(writer, &task);
    let starts: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let reading = {
        let (reader, starts, done, task) = (
            Arc::clone(reader),
            Arc::clone(&starts),
            Arc::clone(&done),
            task.clone(),
        );
        std::thread::spawn(move || {
            let mut lat = Vec::new();
            let mut next = 1u64;
            let mut epoch = reader.changes().epoch();
            while lat.len() < LATENCY_SAMPLES && !done.load(Ordering::Relaxed) {
                let mut seen = Vec::new();
                let _ = reader.read_raw_from(
                    &task,
                    Seq::new(next).unwrap_or(Seq::ZERO),
                    64,
                    &mut |e: RawEvent| seen.push(e.seq().get()),
                );
                let now = Instant::now();
                for s in seen {
                    let i = usize::try_from(s - 1).unwrap_or(0);
                    if let Some(t0) = starts.lock().ok().and_then(|v| v.get(i).copied()) {
                        lat.push(now.duration_since(t0).as_secs_f64() * 1000.0);
                    }
                    next = s + 1;
                }
                epoch = reader
                    .changes()
                    .wait_past(epoch, Duration::from_millis(200));
            }
            lat
        })
    };
    for i in 0..LATENCY_SAMPLES {
        if let Ok(mut v) = starts.lock() {
            v.push(Instant::now());
        }
        append(writer, &task, i);
        std::thread::sleep(Duration::from_millis(2));
    }
    // The reader has its last samples within a moment; then it is told to stop.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !reading.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, Ordering::Relaxed);
    let mut lat = reading.join().unwrap_or_default();
    lat.sort_by(f64::total_cmp);
    let at = |q: f64| {
        lat.get(((lat.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (at(0.5), at(0.99))
}

/// A backend's name, the store appended to, and the store its reader reads.
type Backend<'a> = (&'a str, &'a Arc<dyn TaskStore>, &'a Arc<dyn TaskStore>);

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres"))
}

fn pg(args: &[&str]) -> Option<String> {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut rounds = 3;
    let mut url = None;
    let mut writers = taskstream_store::pg::DEFAULT_WRITERS;
    let mut cache_bytes = taskstream_store::pg::DEFAULT_CACHE_BYTES;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(3),
            "--url" => url = it.next().cloned(),
            "--writers" => {
                writers = it.next().and_then(|v| v.parse().ok()).unwrap_or(writers);
            }
            "--only" => only = it.next().cloned(),
            "--cache-mb" => {
                cache_bytes = it
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .map_or(cache_bytes, |mb| mb << 20);
            }
            _ => {
                eprintln!(
                    "usage: store_backends [--rounds N] [--url postgres://…] [--writers N] \
                     [--cache-mb N] [--only WORKLOAD]"
                );
                std::process::exit(2);
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap_or_else(|e| {
        eprintln!("no temp dir: {e}");
        std::process::exit(1)
    });
    let cluster_dir = tmp.path().join("pg");
    let cluster = cluster_dir.display().to_string();
    let started_cluster = url.is_none();
    let url = match url {
        Some(u) => u,
        None => {
            if pg(&["start", &cluster]).is_none() {
                eprintln!("scripts/postgres start failed");
                std::process::exit(1);
            }
            pg(&["createdb", &cluster, "bench"]).unwrap_or_else(|| {
                eprintln!("createdb failed");
                std::process::exit(1)
            })
        }
    };
    let open_pg = || -> Arc<dyn TaskStore> {
        match PgStore::open(PgConfig {
            url: url.clone(),
            retention: retention(),
            lease_timeout: Duration::from_secs(600),
            pool_size: taskstream_store::pg::DEFAULT_POOL_SIZE,
            writers,
            cache_bytes,
        }) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    };
    let pg_a = open_pg();
    let pg_b = open_pg();
    let data: Arc<dyn TaskStore> = match Store::open(
        StoreConfig {
            data_dir: Some(tmp.path().join("data")),
            durability: Durability::Group,
            retention: retention(),
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
        },
        taskstream_store::clock::now(),
    ) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };

    let mut figures: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let wanted = |w: &str| only.as_deref().is_none_or(|o| o == w);
    let mut put = |name: String, v: f64| {
        println!("{name} {v:.1}");
        figures.entry(name).or_default().push(v);
    };
    for round in 0..rounds {
        // The order alternates, so a slow phase of the disk spreads over both.
        let order: [Backend<'_>; 2] = if round % 2 == 0 {
            [("data_dir", &data, &data), ("postgres", &pg_a, &pg_b)]
        } else {
            [("postgres", &pg_a, &pg_b), ("data_dir", &data, &data)]
        };
        for (name, store, reader) in order {
            if wanted("append_1") {
                put(
                    format!("{name}/append_1/per_s"),
                    append_one(&**store, round),
                );
            }
            if wanted("append_64") {
                put(format!("{name}/append_64/per_s"), append_many(store, round));
            }
            if wanted("replay") {
                let (same, other) = replay(store, reader, round);
                put(format!("{name}/replay_100k/events_per_s"), same);
                if name == "postgres" {
                    put(
                        format!("{name}/replay_100k_other_replica/events_per_s"),
                        other,
                    );
                }
            }
            if wanted("latency") {
                let (p50, p99) = latency(&**store, reader, round);
                put(format!("{name}/latency/median_ms"), p50);
                put(format!("{name}/latency/p99_ms"), p99);
            }
            if wanted("emit_1") {
                put(format!("{name}/emit_1/per_s"), emit_one(&**store, round));
            }
            if wanted("emit_16") {
                put(format!("{name}/emit_16/per_s"), emit_many(store, round));
            }
            if wanted("latency_16_running") {
                let (stop, load) = background_load(store, round);
                let (p50, p99) = latency(&**store, reader, round + 1000);
                stop.store(true, Ordering::Relaxed);
                for t in load {
                    let _ = t.join();
                }
                put(format!("{name}/latency_16_running/median_ms"), p50);
                put(format!("{name}/latency_16_running/p99_ms"), p99);
            }
        }
        if wanted("emit_1") || wanted("emit_16") {
            put(
                "postgres/bulk_insert_bound/rows_per_s".into(),
                bulk_bound(&url),
            );
        }
    }
    println!("# medians of {rounds} rounds");
    let mut medians = BTreeMap::new();
    for (name, mut v) in figures {
        let m = median(&mut v);
        println!("median {name} {m:.2}");
        medians.insert(name, m);
    }
    let ratio = |a: &str, b: &str| {
        medians.get(a).copied().unwrap_or(f64::NAN) / medians.get(b).copied().unwrap_or(f64::NAN)
    };
    println!("# ratios of the medians");
    println!(
        "ratio postgres/emit_1 / bulk_insert_bound {:.2}",
        ratio(
            "postgres/emit_1/per_s",
            "postgres/bulk_insert_bound/rows_per_s"
        )
    );
    println!(
        "ratio postgres/emit_16 / bulk_insert_bound {:.2}",
        ratio(
            "postgres/emit_16/per_s",
            "postgres/bulk_insert_bound/rows_per_s"
        )
    );
    println!(
        "ratio postgres/replay / data_dir/replay {:.2}",
        ratio(
            "postgres/replay_100k/events_per_s",
            "data_dir/replay_100k/events_per_s"
        )
    );
    println!(
        "ratio postgres/replay on another replica / data_dir/replay {:.2}",
        ratio(
            "postgres/replay_100k_other_replica/events_per_s",
            "data_dir/replay_100k/events_per_s"
        )
    );
    drop((pg_a, pg_b, data));
    if started_cluster {
        let _ = pg(&["stop", &cluster]);
    }
}
