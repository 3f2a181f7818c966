//! Log benchmarks, on `taskstream_store::Store` with a scratch data dir (`$TASKSTREAM_BENCH_DIR`
//! picks the disk; the system temp dir otherwise):
//!
//! - `log_append`: one event (300 B payload) appended and durable, per `--durability` mode:
//!   `event` (one `fdatasync` each), `group` with 1 and with K concurrent appenders (each on its
//!   own task, so group commit forms batches; K = `$TASKSTREAM_BENCH_APPENDERS`, 64 by
//!   default), `none` (below the retention limit, and at it: every append then also drops the
//!   oldest event); beside them the raw bound: the same record bytes appended to a plain file
//!   with `fdatasync` per event and per batch of K; and sled's insert alone (`sled_insert_alone`:
//!   the store's key layout, a record-sized value), the part of every append sled takes.
//! - `log_replay`: reading a finished task's N retained events (N = `$TASKSTREAM_BENCH_EVENTS`,
//!   100k by default) from a cursor at 0: by `read_raw_from` in batches of 256 (in place, what
//!   the delivery thread calls), by `read_from` (copied out) and event by event (`Store::event`).
//! - `log_reopen`: `Store::open` of a data dir holding M events (M =
//!   `$TASKSTREAM_BENCH_REOPEN_EVENTS`, 1M by default) in tasks of 10 000 (the default
//!   retention), after a clean close and after a crash that left the last T events (10% of M,
//!   at most 50 000) in the log only, to be replayed into sled.
//!
//! - `log_rebuild`: rebuilding the index of a data dir holding N retained events in 100 tasks
//!   (what a checkpoint does after retention removed tasks, so removed payloads leave the
//!   disk), with 4 appenders writing meanwhile; the slowest of their appends is printed.
//!
//! Sizes shrink under `cargo test` and in smoke runs (see `taskstream_benches::scale`).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use taskstream_benches::scale::Scale;
use taskstream_benches::store::{
    append_concurrently, complete, create_task, fill, now, open, record_len, retention_for, task_id,
};
use taskstream_benches::{payload_of, raw, scratch_dir, PAYLOAD_BYTES, TICK};
use taskstream_core::{RetentionPolicy, Seq};
use taskstream_store::{Durability, Store};

fn log_append(c: &mut Criterion) {
    let scale = Scale::current();
    let payload = payload_of(PAYLOAD_BYTES);
    let record = vec![b'r'; record_len(&payload)];
    let appenders = scale.appenders();
    let mut group = c.benchmark_group("log_append");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(4)));

    // `none` twice: below the retention limit, and at it (the task already holds the default
    // 10 000 events, so every append also drops the oldest).
    let limit = RetentionPolicy::DEFAULT.max_events as usize;
    let at_limit = scale.pick("TASKSTREAM_BENCH_RETAINED", 50, limit, limit);
    for (name, durability, retention, prefill) in [
        ("event", Durability::Event, RetentionPolicy::DEFAULT, 0),
        (
            "group_1_appender",
            Durability::Group,
            RetentionPolicy::DEFAULT,
            0,
        ),
        ("none", Durability::None, retention_for(1 << 24), 0),
        (
            "none_at_retention_limit",
            Durability::None,
            RetentionPolicy {
                max_events: u32::try_from(at_limit).unwrap_or(u32::MAX),
                ..RetentionPolicy::DEFAULT
            },
            at_limit,
        ),
    ] {
        let dir = scratch_dir();
        let store = open(Some(dir.path()), durability, retention);
        let id = task_id(0);
        create_task(&store, &id);
        fill(&store, &id, prefill, &payload);
        group.bench_function(name, |b| {
            b.iter(|| black_box(store.append(&id, TICK, &payload, now()).expect("append")))
        });
    }

    // In memory (`--in-memory`): `Store::emit` puts the event into the in-memory index and
    // publishes it at once; what an emitting tool pays per event. At the default retention
    // (after the first 10 000, every append also drops the oldest), so memory stays flat.
    {
        let store = open(None, Durability::None, RetentionPolicy::DEFAULT);
        let id = task_id(0);
        create_task(&store, &id);
        group.bench_function("in_memory_emit", |b| {
            b.iter(|| black_box(store.emit(&id, TICK, &payload, now()).expect("emit")))
        });
    }

    // Pipelined (`Store::emit`, group mode): one task appends without waiting; each event is
    // published once a flush covers it, one flush per batch of whatever is pending. Measured
    // from the first emit to the last one durable and visible (`wait_durable`).
    {
        let dir = scratch_dir();
        let store = open(
            Some(dir.path()),
            Durability::Group,
            // Below the retention limit, as `none` (at it every append also drops the oldest).
            retention_for(1 << 24),
        );
        let id = task_id(0);
        create_task(&store, &id);
        group.bench_function("group_1_emitter_pipelined", |b| {
            b.iter_custom(|iters| {
                let before = store.stats().wal.syncs;
                let started = Instant::now();
                let mut last = Seq::ZERO;
                for _ in 0..iters {
                    last = store.emit(&id, TICK, &payload, now()).expect("emit");
                }
                store.wait_durable(&id, last).expect("durable");
                let took = started.elapsed();
                let syncs = store.stats().wal.syncs - before;
                if iters >= 1000 {
                    println!(
                        "log_append/group_1_emitter_pipelined: {iters} events in {syncs} \
                         fdatasyncs, mean batch {:.1}",
                        iters as f64 / syncs.max(1) as f64
                    );
                }
                took
            })
        });
    }

    // What sled's insert alone costs, as the store calls it on every append: the same key
    // layout (id length, id, big-endian seq), a value the size of the event's record, and the
    // store's sled configuration. The rest of `none` is everything else an append does.
    let dir = scratch_dir();
    let db = sled::Config::new()
        .path(dir.path().join("sled"))
        .cache_capacity(64 << 20)
        .flush_every_ms(None)
        .open()
        .expect("sled");
    let tree = db.open_tree("events").expect("tree");
    let id = task_id(0);
    let mut seq = 0u64;
    group.bench_function("sled_insert_alone", |b| {
        b.iter(|| {
            let mut key = Vec::with_capacity(1 + id.len() + 8);
            key.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
            key.extend_from_slice(id.as_bytes());
            key.extend_from_slice(&seq.to_be_bytes());
            seq += 1;
            black_box(tree.insert(key, record.as_slice()).expect("insert"))
        })
    });
    drop((tree, db));

    let dir = scratch_dir();
    let store = open(
        Some(dir.path()),
        Durability::Group,
        RetentionPolicy::DEFAULT,
    );
    let tasks: Vec<String> = (0..appenders).map(task_id).collect();
    for id in &tasks {
        create_task(&store, id);
    }
    let before = store.stats().wal;
    group.bench_function(format!("group_{appenders}_appenders"), |b| {
        b.iter_custom(|iters| append_concurrently(&store, &tasks, iters, &payload))
    });
    let after = store.stats().wal;
    let syncs = after.syncs - before.syncs;
    let events = (after.bytes - before.bytes) / record.len() as u64;
    eprintln!(
        "log_append/group_{appenders}_appenders: about {events} events in {syncs} fdatasyncs, mean batch {:.1}",
        events as f64 / syncs.max(1) as f64
    );
    drop(store);

    let raw_dir = scratch_dir();
    for batch in [1, appenders] {
        group.bench_function(format!("raw_fdatasync_batch_{batch}"), |b| {
            b.iter_custom(|iters| {
                let n = usize::try_from(iters).unwrap_or(usize::MAX);
                let took = raw::fsync_appends(raw_dir.path(), &record, n, batch).expect("raw");
                // Whole batches were written: charge only the events asked for.
                took.mul_f64(iters as f64 / (n.div_ceil(batch) * batch) as f64)
            })
        });
    }
    group.finish();
}

/// A data dir with one finished task of `n` events (plus its two status events).
fn finished_task(dir: &Path, n: usize, payload: &[u8]) -> (Store, String) {
    let store = open(Some(dir), Durability::None, retention_for(n + 2));
    let id = task_id(1);
    create_task(&store, &id);
    fill(&store, &id, n, payload);
    complete(&store, &id);
    (store, id)
}

fn log_replay(c: &mut Criterion) {
    let n = Scale::current().replay_events();
    let payload = payload_of(PAYLOAD_BYTES);
    let dir = scratch_dir();
    let (store, id) = finished_task(dir.path(), n, &payload);
    let total = n + 2;
    let mut group = c.benchmark_group(format!("log_replay_{n}"));
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(5)));
    group.throughput(Throughput::Elements(total as u64));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("read_from_batch_256", |b| {
        let mut out = Vec::with_capacity(256);
        b.iter(|| {
            let mut from = Seq::ZERO;
            let mut got = 0;
            loop {
                out.clear();
                store.read_from(&id, from, 256, &mut out);
                let Some(last) = out.last() else { break };
                got += out.len();
                from = last.seq.next().expect("seq");
            }
            assert_eq!(got, total);
        })
    });
    group.bench_function("read_raw_from_batch_256", |b| {
        // What delivery reads: events in place in sled's values, nothing copied out.
        b.iter(|| {
            let mut from = Seq::ZERO;
            let mut got = 0;
            loop {
                let mut last = None;
                let n = store
                    .read_raw_from(&id, from, 256, |e| {
                        black_box(e.payload());
                        last = Some(e.seq());
                    })
                    .expect("readable");
                let Some(last) = last else { break };
                got += n;
                from = last.next().expect("seq");
            }
            assert_eq!(got, total);
        })
    });
    group.bench_function("event_by_event", |b| {
        b.iter(|| {
            for s in 0..total as u64 {
                let seq = Seq::new(s).expect("seq");
                black_box(store.event(&id, seq).expect("retained"));
            }
        })
    });
    group.finish();
}

/// Builds a data dir of `events` events in finished tasks of 10 000; with `crash_tail`, that
/// many more events appended after the last checkpoint and the dir copied as a crash would
/// leave it (log not yet checkpointed into sled). Returns the dir to copy from.
fn build_reopen_dir(events: usize, crash_tail: usize, payload: &[u8]) -> tempfile::TempDir {
    const PER_TASK: usize = 10_000;
    let dir = scratch_dir();
    let live = dir.path().join("live");
    let store = open(Some(&live), Durability::None, RetentionPolicy::DEFAULT);
    let mut left = events;
    let mut t = 0;
    while left > 0 {
        let id = task_id(1000 + t);
        create_task(&store, &id);
        let n = left.min(PER_TASK);
        fill(&store, &id, n, payload);
        complete(&store, &id);
        left -= n;
        t += 1;
    }
    let snapshot = dir.path().join("snapshot");
    if crash_tail == 0 {
        drop(store);
        std::fs::rename(&live, &snapshot).expect("rename");
        return dir;
    }
    // A crash: the tail is in the log only. The store's own checkpoint thread runs every few
    // seconds, so append in chunks, restart the count whenever a checkpoint is seen, and copy
    // the dir only when `crash_tail` events were appended since the last one.
    let mut seen = store.stats().checkpoints;
    let mut since = 0;
    let mut in_task = PER_TASK;
    let mut id = String::new();
    for _ in 0..1000 {
        // Tasks below the retention limit, so the log holds appends only.
        if in_task + 1000 > PER_TASK {
            id = task_id(900_000 + t);
            t += 1;
            create_task(&store, &id);
            in_task = 0;
        }
        let chunk = 1000.min(crash_tail);
        fill(&store, &id, chunk, payload);
        in_task += chunk;
        since += chunk;
        let now_seen = store.stats().checkpoints;
        if now_seen != seen {
            seen = now_seen;
            since = 0;
            continue;
        }
        if since >= crash_tail {
            copy_dir(&live, &snapshot);
            if store.stats().checkpoints == seen {
                return dir;
            }
            std::fs::remove_dir_all(&snapshot).expect("remove");
            seen = store.stats().checkpoints;
            since = 0;
        }
    }
    panic!("checkpoints kept running while building the crash dir");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("ls") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn log_reopen(c: &mut Criterion) {
    let events = Scale::current().reopen_events();
    let payload = payload_of(PAYLOAD_BYTES);
    let mut group = c.benchmark_group(format!("log_reopen_{events}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(10)));
    let tail = (events / 10).min(50_000);
    for (name, tail) in [
        ("clean".to_owned(), 0),
        (format!("crash_tail_{tail}"), tail),
    ] {
        let built = Instant::now();
        let template = build_reopen_dir(events - tail, tail, &payload);
        eprintln!(
            "log_reopen_{events}/{name}: built in {:.1} s",
            built.elapsed().as_secs_f64()
        );
        let snapshot = template.path().join("snapshot");
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let run = template.path().join("run");
                    // A clean reopen leaves the dir as it found it; a crash reopen does not.
                    if tail > 0 {
                        copy_dir(&snapshot, &run);
                    } else {
                        std::fs::rename(&snapshot, &run).expect("rename");
                    }
                    let start = Instant::now();
                    let store = open(Some(&run), Durability::Group, RetentionPolicy::DEFAULT);
                    total += start.elapsed();
                    let report = store.recovery();
                    assert_eq!(report.replayed_records > 0, tail > 0, "{report:?}");
                    drop(store);
                    if tail > 0 {
                        std::fs::remove_dir_all(&run).expect("remove");
                    } else {
                        std::fs::rename(&run, &snapshot).expect("rename");
                    }
                }
                total
            })
        });
    }
    group.finish();
}

fn log_rebuild(c: &mut Criterion) {
    const TASKS: usize = 100;
    const WRITERS: usize = 4;
    let n = Scale::current().replay_events();
    let payload = payload_of(PAYLOAD_BYTES);
    let dir = scratch_dir();
    let store = open(Some(dir.path()), Durability::Group, retention_for(n + 2));
    for t in 0..TASKS {
        let id = task_id(t);
        create_task(&store, &id);
        fill(&store, &id, n / TASKS, &payload);
        complete(&store, &id);
    }
    let writers: Vec<String> = (0..WRITERS).map(|w| task_id(TASKS + w)).collect();
    for id in &writers {
        create_task(&store, id);
    }
    store.checkpoint().expect("checkpoint");
    let mut group = c.benchmark_group(format!("log_rebuild_{n}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(10)));
    let mut worst = Duration::ZERO;
    let mut appended = 0u64;
    group.bench_function("rebuild_with_4_appenders", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let stop = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|s| {
                    let handles: Vec<_> = writers
                        .iter()
                        .map(|id| {
                            let (store, stop, payload) = (&store, &stop, &payload);
                            s.spawn(move || {
                                let (mut n, mut slowest) = (0u64, Duration::ZERO);
                                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                    let t = Instant::now();
                                    store.append(id, TICK, payload, now()).expect("append");
                                    slowest = slowest.max(t.elapsed());
                                    n += 1;
                                }
                                (n, slowest)
                            })
                        })
                        .collect();
                    let start = Instant::now();
                    store.rebuild_index().expect("rebuild");
                    total += start.elapsed();
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    for h in handles {
                        let (n, slowest) = h.join().expect("appender");
                        appended += n;
                        worst = worst.max(slowest);
                    }
                });
            }
            total
        })
    });
    group.finish();
    eprintln!(
        "log_rebuild_{n}: {appended} events appended during rebuilds; the slowest append took {:.1} ms",
        worst.as_secs_f64() * 1e3
    );
}

criterion_group!(benches, log_append, log_replay, log_reopen, log_rebuild);
criterion_main!(benches);
