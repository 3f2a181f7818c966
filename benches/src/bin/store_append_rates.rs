//! The data dir's durable append rates per `--durability` mode, against raw `write` +
//! `fdatasync` on the same disk at the batch size the store reached.
//!
//! ```sh
//! cargo run --release -p taskstream-benches --bin store_append_rates -- [--scale N] [--rounds R]
//! ```
//!
//! Each configuration (mode, appending threads, events per thread, times `--scale`, default
//! 20) runs `--rounds` times (default 3), alternating store and raw runs since the disk is
//! shared, and prints the medians: appends per second, the batch (appends per log flush), the
//! raw rate at that batch and the store's share of it.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use taskstream_core::{Millis, RetentionPolicy};
use taskstream_store::{
    Durability, Store, StoreConfig, TaskRecord, TaskStatus, DEFAULT_INDEX_CACHE_BYTES,
    DEFAULT_MAX_STORE_BYTES,
};

const TICK: &str = "dev.taskstream.tick";
const NOW: Millis = Millis(1_000_000);

fn record(id: &str) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        principal: "local".to_owned(),
        tool: "emit".to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: NOW,
        last_updated_at: NOW,
        ttl_ms: None,
        poll_interval_ms: 100,
        result: None,
        error: None,
    }
}

fn payload(task: &str, i: u64) -> Vec<u8> {
    format!(r#"{{"i":{i},"task":"{task}","data":"{}"}}"#, "x".repeat(40)).into_bytes()
}

fn mode_name(mode: Durability) -> &'static str {
    match mode {
        Durability::Event => "event",
        Durability::Group => "group",
        _ => "none",
    }
}

/// `threads` threads append `per_thread` events each, one task per thread, to a new data dir
/// in `dir`: (appends, seconds, log flushes).
fn measure(dir: &Path, mode: Durability, threads: u64, per_thread: u64) -> (u64, f64, u64) {
    let store = Arc::new(
        Store::open(
            StoreConfig {
                data_dir: Some(dir.to_owned()),
                durability: mode,
                retention: RetentionPolicy::DEFAULT,
                max_store_bytes: DEFAULT_MAX_STORE_BYTES,
                index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            },
            NOW,
        )
        .expect("open the data dir"),
    );
    for t in 0..threads {
        store
            .create_task(record(&format!("m{t}")), NOW)
            .expect("create");
    }
    let before = store.stats().wal;
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let id = format!("m{t}");
                for i in 0..per_thread {
                    store
                        .append(&id, TICK, &payload(&id, i), NOW)
                        .expect("append");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("appender");
    }
    let secs = started.elapsed().as_secs_f64();
    let syncs = store.stats().wal.syncs - before.syncs;
    (threads * per_thread, secs, syncs)
}

/// Raw baseline: `batches` times, write `batch` records of the size a tick takes in the log
/// with one `write`, then `fdatasync`.
fn raw_rate(dir: &Path, batch: u64, batches: u64) -> f64 {
    let path = dir.join("raw.log");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("raw file");
    let one = payload("m0", 0).len() + 60;
    let buf = vec![b'x'; one * usize::try_from(batch).expect("batch")];
    let started = Instant::now();
    for _ in 0..batches {
        file.write_all(&buf).expect("write");
        file.sync_data().expect("fdatasync");
    }
    let rate = (batch * batches) as f64 / started.elapsed().as_secs_f64();
    std::fs::remove_file(&path).expect("remove");
    rate
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let scale = arg("--scale", 20);
    let rounds = arg("--rounds", 3).max(1);
    let scratch = tempfile::tempdir().expect("tempdir");
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (mode, threads, per_thread) in [
        (Durability::Event, 1, 100 * scale),
        (Durability::Group, 1, 100 * scale),
        (Durability::Group, 16, 25 * scale),
        (Durability::Group, 64, 10 * scale),
        (Durability::None, 1, 500 * scale),
    ] {
        let (mut rates, mut raws, mut ratios, mut batches) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let dir = scratch
                .path()
                .join(format!("{}-{threads}-{round}", mode_name(mode)));
            let (appends, secs, syncs) = measure(&dir, mode, threads, per_thread);
            let rate = appends as f64 / secs;
            rates.push(rate);
            if let Some(batch) = appends.checked_div(syncs) {
                let batch = batch.max(1);
                let raw = raw_rate(scratch.path(), batch, syncs.clamp(50, 2_000));
                raws.push(raw);
                ratios.push(rate / raw);
                batches.push(batch as f64);
            }
        }
        let rate = median(&mut rates);
        if ratios.is_empty() {
            println!(
                "{:>5} {threads:>3} threads: {rate:>7.0} appends/s, no fdatasync",
                mode_name(mode)
            );
        } else {
            println!(
                "{:>5} {threads:>3} threads: {rate:>7.0} appends/s, batch {:>3.0}; raw write+fdatasync \
                 at that batch: {:>7.0} records/s; store/raw {:.0}% (medians of {rounds})",
                mode_name(mode),
                median(&mut batches),
                median(&mut raws),
                100.0 * median(&mut ratios)
            );
        }
    }
}
