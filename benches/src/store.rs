//! Driving `taskstream_store::Store` directly: open one on a data dir, create tasks, append
//! from one thread or several, fill a task.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use taskstream_core::{Millis, RetentionPolicy};
use taskstream_store::{Durability, Store, StoreConfig, TaskRecord, TaskStatus};

use crate::TICK;

/// The wall clock as the store wants it (retention by age compares against it on reopen).
#[must_use]
pub fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Millis(ms)
}

/// The server's defaults, with room for `events` per task.
#[must_use]
pub fn retention_for(events: usize) -> RetentionPolicy {
    let defaults = RetentionPolicy::DEFAULT;
    RetentionPolicy {
        max_events: u32::try_from(events)
            .unwrap_or(u32::MAX)
            .max(defaults.max_events),
        ..defaults
    }
}

/// Opens a store on `dir` (`None`: in memory).
///
/// # Panics
/// If it cannot be opened.
#[must_use]
pub fn open(dir: Option<&Path>, durability: Durability, retention: RetentionPolicy) -> Store {
    Store::open(
        StoreConfig {
            data_dir: dir.map(Path::to_path_buf),
            durability,
            retention,
            max_store_bytes: taskstream_store::DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: taskstream_store::DEFAULT_INDEX_CACHE_BYTES,
        },
        now(),
    )
    .expect("open the store")
}

/// A fresh task id (32 hex digits, like the server's).
#[must_use]
pub fn task_id(n: usize) -> String {
    format!("{:032x}", 0x5eed_0000_0000_0000_u64 as usize + n)
}

/// Creates a running task `id`.
///
/// # Panics
/// If the store refuses.
pub fn create_task(store: &Store, id: &str) {
    let at = now();
    let record = TaskRecord {
        task_id: id.to_owned(),
        principal: "local".to_owned(),
        tool: "emit".to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: at,
        last_updated_at: at,
        ttl_ms: None,
        poll_interval_ms: 1000,
        result: None,
        error: None,
    };
    store.create_task(record, at).expect("create a task");
}

/// Appends `n` events with `payload` to task `id`.
///
/// # Panics
/// If an append fails.
pub fn fill(store: &Store, id: &str, n: usize, payload: &[u8]) {
    for _ in 0..n {
        store.append(id, TICK, payload, now()).expect("append");
    }
}

/// Ends task `id` as completed.
///
/// # Panics
/// If the store refuses.
pub fn complete(store: &Store, id: &str) {
    store
        .finish(id, TaskStatus::Completed, None, None, None, now())
        .expect("finish");
}

/// Appends `total` events spread over `tasks` (one thread per task, all started together);
/// returns the wall time from the start signal until the last append returned.
///
/// # Panics
/// If an append fails.
pub fn append_concurrently(
    store: &Store,
    tasks: &[String],
    total: u64,
    payload: &[u8],
) -> Duration {
    let k = tasks.len().max(1) as u64;
    let barrier = std::sync::Barrier::new(tasks.len() + 1);
    std::thread::scope(|s| {
        for (i, id) in tasks.iter().enumerate() {
            let share = total / k + u64::from((i as u64) < total % k);
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for _ in 0..share {
                    store.append(id, TICK, payload, now()).expect("append");
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every appender before returning.
        start
    })
    .elapsed()
}

/// Emits `total` events spread over `tasks` with [`Store::emit`] (one thread per task, all
/// started together), pipelined: no emitter waits for the device until its share is out,
/// then each waits once ([`Store::wait_durable`]) for its last event, which covers the rest.
/// Returns the wall time from the start signal until every event was durable.
///
/// # Panics
/// If an emit or the wait fails.
pub fn emit_concurrently(store: &Store, tasks: &[String], total: u64, payload: &[u8]) -> Duration {
    let k = tasks.len().max(1) as u64;
    let barrier = std::sync::Barrier::new(tasks.len() + 1);
    std::thread::scope(|s| {
        for (i, id) in tasks.iter().enumerate() {
            let share = total / k + u64::from((i as u64) < total % k);
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                let mut last = None;
                for _ in 0..share {
                    last = Some(store.emit(id, TICK, payload, now()).expect("emit"));
                }
                if let Some(seq) = last {
                    store.wait_durable(id, seq).expect("wait_durable");
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every emitter before returning.
        start
    })
    .elapsed()
}

/// The bytes one event with `payload` adds to the write-ahead log (its encoded record).
///
/// # Panics
/// If the temporary store cannot be used.
#[must_use]
pub fn record_len(payload: &[u8]) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(Some(dir.path()), Durability::None, RetentionPolicy::DEFAULT);
    let id = task_id(0);
    create_task(&store, &id);
    let before = store.stats().wal.bytes;
    fill(&store, &id, 1, payload);
    usize::try_from(store.stats().wal.bytes - before).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskstream_core::record::{self, EventRecord, Record};
    use taskstream_core::Seq;

    #[test]
    fn an_append_below_the_limit_logs_exactly_its_event_record() {
        let payload = crate::payload_of(300);
        let rec = Record::Event(EventRecord {
            task_id: &task_id(0),
            seq: Seq::new(1).expect("seq"),
            at: now(),
            event_type: TICK,
            payload: &payload,
        });
        assert_eq!(
            record_len(&payload),
            record::encoded_len(&rec).expect("len")
        );
    }
}
