//! Storage tests through the `Store` API: round trips, restart recovery, retention on disk,
//! the data dir lock and permissions, durability counters, concurrency.

// Helpers outside `#[test]` functions unwrap as the tests do (clippy.toml allows it in tests).
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use taskstream_core::{Millis, RetentionPolicy, Seq};
use taskstream_store::{
    AppendError, Durability, Store, StoreConfig, StoreError, StoredEvent, TaskRecord, TaskStatus,
    RESTART_FAILURE_MESSAGE, STATUS_EVENT_TYPE, TASK_OVERHEAD_BYTES,
};

use crate::files;
use files::{copy_dir, files_containing};

const TICK: &str = "dev.taskstream.tick";

fn config(dir: Option<&Path>, durability: Durability, retention: RetentionPolicy) -> StoreConfig {
    StoreConfig {
        data_dir: dir.map(Path::to_owned),
        durability,
        retention,
        max_store_bytes: taskstream_store::DEFAULT_MAX_STORE_BYTES,
        index_cache_bytes: taskstream_store::DEFAULT_INDEX_CACHE_BYTES,
    }
}

fn open(dir: &Path) -> Store {
    open_with(dir, RetentionPolicy::DEFAULT)
}

fn open_with(dir: &Path, retention: RetentionPolicy) -> Store {
    open_at(dir, retention, Millis(1))
}

fn open_at(dir: &Path, retention: RetentionPolicy, now: Millis) -> Store {
    Store::open(config(Some(dir), Durability::Group, retention), now).unwrap()
}

fn record(id: &str, now: Millis) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        principal: "local".to_owned(),
        tool: "emit".to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: now,
        last_updated_at: now,
        ttl_ms: None,
        poll_interval_ms: 100,
        result: None,
        error: None,
    }
}

fn seq(n: u64) -> Seq {
    Seq::new(n).unwrap()
}

fn tick(i: u64) -> Vec<u8> {
    format!(r#"{{"i":{i}}}"#).into_bytes()
}

/// Every retained event of a task, read in batches of `batch`.
fn all_events(store: &Store, task: &str, batch: usize) -> Vec<StoredEvent> {
    let mut out = Vec::new();
    let mut from = Seq::ZERO;
    loop {
        let before = out.len();
        store.read_from(task, from, batch, &mut out);
        if out.len() == before {
            return out;
        }
        from = out.last().unwrap().seq.next().unwrap();
    }
}

fn seqs(events: &[StoredEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq.get()).collect()
}

fn status_payload(events: &[StoredEvent]) -> serde_json::Value {
    let last = events.last().unwrap();
    assert_eq!(last.event_type, STATUS_EVENT_TYPE);
    serde_json::from_slice(&last.payload).unwrap()
}

#[test]
fn append_and_read_round_trip_in_memory_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    for data_dir in [None, Some(dir.path())] {
        let store = Store::open(
            config(data_dir, Durability::Event, RetentionPolicy::DEFAULT),
            Millis(5),
        )
        .unwrap();
        store
            .create_task(record("t", Millis(5)), Millis(5))
            .unwrap();
        // White space in the payload is dropped: the compact form is stored.
        assert_eq!(
            store
                .append("t", TICK, b"{ \"i\" : 0 }", Millis(6))
                .unwrap(),
            seq(1)
        );
        assert_eq!(
            store.append("t", TICK, &tick(1), Millis(7)).unwrap(),
            seq(2)
        );
        let events = all_events(&store, "t", 2);
        assert_eq!(
            events,
            [
                StoredEvent {
                    seq: seq(0),
                    event_type: STATUS_EVENT_TYPE.to_owned(),
                    payload: br#"{"status":"working"}"#.to_vec(),
                    at: Millis(5),
                },
                StoredEvent {
                    seq: seq(1),
                    event_type: TICK.to_owned(),
                    payload: br#"{"i":0}"#.to_vec(),
                    at: Millis(6),
                },
                StoredEvent {
                    seq: seq(2),
                    event_type: TICK.to_owned(),
                    payload: br#"{"i":1}"#.to_vec(),
                    at: Millis(7),
                },
            ]
        );
        assert_eq!(store.event("t", seq(2)).as_ref(), events.get(2));
        assert_eq!(store.event("t", seq(3)), None);
        let view = store.task("t").unwrap();
        assert_eq!(
            (view.retained.earliest(), view.retained.next()),
            (seq(0), seq(3))
        );
        assert_eq!(store.tasks().len(), 1);
    }
}

#[test]
fn refusals_append_nothing() {
    let store = Store::open(
        config(
            None,
            Durability::None,
            RetentionPolicy {
                max_payload_bytes: 10,
                ..RetentionPolicy::DEFAULT
            },
        ),
        Millis(0),
    )
    .unwrap();
    store
        .create_task(record("t", Millis(0)), Millis(0))
        .unwrap();
    assert!(matches!(
        store.append("nope", TICK, b"{}", Millis(0)),
        Err(AppendError::UnknownTask)
    ));
    assert!(matches!(
        store.append("t", "tick", b"{}", Millis(0)),
        Err(AppendError::InvalidType(_))
    ));
    assert!(matches!(
        store.append("t", TICK, b"[1]", Millis(0)),
        Err(AppendError::InvalidPayload(_))
    ));
    assert!(matches!(
        store.append("t", TICK, br#"{"data":"0123456789"}"#, Millis(0)),
        Err(AppendError::PayloadTooLarge {
            size: 21,
            limit: 10
        })
    ));
    // The store's own status events are not tool payloads and are never refused for size.
    assert!(matches!(
        store.create_task(record("t", Millis(0)), Millis(0)),
        Err(AppendError::Storage(StoreError::DuplicateTask(_)))
    ));
    assert!(matches!(
        store.create_task(record("", Millis(0)), Millis(0)),
        Err(AppendError::Storage(StoreError::Record(_)))
    ));
    assert_eq!(store.task("").map(|v| v.record), None);
    let seq = store
        .finish("t", TaskStatus::Completed, None, None, None, Millis(1))
        .unwrap();
    assert_eq!(seq.get(), 1);
    assert!(matches!(
        store.append("t", TICK, b"{}", Millis(0)),
        Err(AppendError::Terminal)
    ));
    assert!(matches!(
        store.finish("t", TaskStatus::Failed, None, None, None, Millis(1)),
        Err(AppendError::Terminal)
    ));
    assert_eq!(
        store.task("t").unwrap().retained.next(),
        Seq::new(2).unwrap()
    );
}

#[test]
fn a_restart_recovers_tasks_results_and_seqs_and_fails_running_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let result = serde_json::json!({"content": [{"type": "text", "text": "done"}]});
    {
        let store = open(dir.path());
        store
            .create_task(record("done", Millis(10)), Millis(10))
            .unwrap();
        store.append("done", TICK, &tick(0), Millis(11)).unwrap();
        store
            .finish(
                "done",
                TaskStatus::Completed,
                None,
                Some(result.clone()),
                None,
                Millis(12),
            )
            .unwrap();
        store
            .create_task(record("running", Millis(20)), Millis(20))
            .unwrap();
        for i in 0..3 {
            store.append("running", TICK, &tick(i), Millis(21)).unwrap();
        }
    }
    let store = open(dir.path());
    assert_eq!(store.recovery().failed_tasks, ["running"]);
    assert_eq!(store.recovery().tasks, 2);

    let done = store.task("done").unwrap();
    assert_eq!(done.record.status, TaskStatus::Completed);
    assert_eq!(done.record.result, Some(result));
    assert_eq!(done.record.last_updated_at, Millis(12));
    assert_eq!(
        (done.retained.earliest(), done.retained.next()),
        (seq(0), seq(3))
    );

    let running = store.task("running").unwrap();
    assert_eq!(running.record.status, TaskStatus::Failed);
    assert_eq!(
        running.record.status_message.as_deref(),
        Some(RESTART_FAILURE_MESSAGE)
    );
    let events = all_events(&store, "running", 100);
    assert_eq!(seqs(&events), [0, 1, 2, 3, 4]);
    assert_eq!(
        status_payload(&events),
        serde_json::json!({"status": "failed", "message": RESTART_FAILURE_MESSAGE})
    );
    assert!(matches!(
        store.append("running", TICK, b"{}", Millis(30)),
        Err(AppendError::Terminal)
    ));
    // New tasks go on as usual; a second restart changes nothing.
    store
        .create_task(record("new", Millis(40)), Millis(40))
        .unwrap();
    assert_eq!(
        store.append("new", TICK, &tick(0), Millis(41)).unwrap(),
        seq(1)
    );
    store
        .finish("new", TaskStatus::Cancelled, None, None, None, Millis(42))
        .unwrap();
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.recovery().failed_tasks, Vec::<String>::new());
    let ids: Vec<String> = store
        .tasks()
        .into_iter()
        .map(|t| t.record.task_id)
        .collect();
    assert_eq!(ids, ["done", "running", "new"]);
    assert_eq!(seqs(&all_events(&store, "running", 2)), [0, 1, 2, 3, 4]);
    assert_eq!(seqs(&all_events(&store, "new", 2)), [0, 1, 2]);
}

#[test]
fn retention_by_count_deletes_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let small = RetentionPolicy {
        max_events: 5,
        ..RetentionPolicy::DEFAULT
    };
    {
        let store = open_with(dir.path(), small);
        store
            .create_task(record("t", Millis(1)), Millis(1))
            .unwrap();
        for i in 0..20 {
            store.append("t", TICK, &tick(i), Millis(1)).unwrap();
        }
        let view = store.task("t").unwrap();
        assert_eq!(
            (view.retained.earliest(), view.retained.next()),
            (seq(16), seq(21))
        );
        assert_eq!(seqs(&all_events(&store, "t", 3)), [16, 17, 18, 19, 20]);
        assert_eq!(store.event("t", seq(15)), None);
    }
    // Reopened with a larger limit, the dropped events stay dropped: they are gone from disk.
    let store = open(dir.path());
    let view = store.task("t").unwrap();
    // Seq 21 is the terminal status event of the recovered (running) task.
    assert_eq!(
        (view.retained.earliest(), view.retained.next()),
        (seq(16), seq(22))
    );
    assert_eq!(
        seqs(&all_events(&store, "t", 100)),
        [16, 17, 18, 19, 20, 21]
    );
    drop(store);
    // Reopened with a smaller limit, the log is cut to it at once.
    let store = open_with(
        dir.path(),
        RetentionPolicy {
            max_events: 2,
            ..RetentionPolicy::DEFAULT
        },
    );
    assert_eq!(seqs(&all_events(&store, "t", 100)), [20, 21]);
}

#[test]
fn sweep_drops_old_events_and_expired_tasks_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let policy = RetentionPolicy {
        max_event_age: Millis(1_000),
        terminal_retention: Millis(5_000),
        ..RetentionPolicy::DEFAULT
    };
    {
        let store = open_with(dir.path(), policy);
        store
            .create_task(record("old", Millis(0)), Millis(0))
            .unwrap();
        for i in 0..10 {
            store
                .append("old", TICK, &tick(i), Millis(i * 100))
                .unwrap();
        }
        store
            .finish(
                "old",
                TaskStatus::Completed,
                None,
                None,
                None,
                Millis(1_200),
            )
            .unwrap();
        store
            .create_task(record("live", Millis(0)), Millis(0))
            .unwrap();
        store.append("live", TICK, &tick(0), Millis(0)).unwrap();
        // At 1 450 ms, events at or before 450 ms are older than 1 000 ms.
        let epoch = store.changes().epoch();
        assert_eq!(store.sweep(Millis(1_450)), 0);
        assert!(store.changes().epoch() > epoch);
        let old = store.task("old").unwrap();
        assert_eq!(old.retained.earliest(), seq(6));
        assert_eq!(seqs(&all_events(&store, "old", 100)), [6, 7, 8, 9, 10, 11]);
        // Every event of "live" expired: nothing retained, earliest = next (MCP-DIGEST A-03).
        let live = store.task("live").unwrap();
        assert_eq!(
            (live.retained.earliest(), live.retained.next()),
            (seq(2), seq(2))
        );
        assert_eq!(
            store.append("live", TICK, &tick(1), Millis(1_500)).unwrap(),
            seq(2)
        );
    }
    {
        let store = open_at(dir.path(), policy, Millis(1_450));
        assert_eq!(store.task("old").unwrap().retained.earliest(), seq(6));
        // "live" was failed by the restart at 1 450 ms.
        assert_eq!(seqs(&all_events(&store, "live", 100)), [2, 3]);
        // Terminal retention: "old" ended at 1 200 ms, so at 6 300 ms it is removed; "live"
        // ended at 1 450 ms and stays.
        assert_eq!(store.sweep(Millis(6_300)), 1);
        assert_eq!(store.task("old").map(|v| v.record), None);
        let mut out = Vec::new();
        store.read_from("old", Seq::ZERO, 10, &mut out);
        assert_eq!(out, []);
    }
    let store = open_with(dir.path(), policy);
    assert_eq!(store.task("old").map(|v| v.record), None);
    assert!(store.task("live").is_some());
}

#[test]
fn a_data_dir_held_by_another_server_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    first
        .create_task(record("t", Millis(1)), Millis(1))
        .unwrap();
    let err = Store::open(
        config(
            Some(dir.path()),
            Durability::Group,
            RetentionPolicy::DEFAULT,
        ),
        Millis(1),
    )
    .err()
    .unwrap();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("in use by another taskstream server"),
        "{message}"
    );
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    // The first store is untouched and the dir opens again once it is closed.
    first.append("t", TICK, &tick(0), Millis(2)).unwrap();
    drop(first);
    let again = open(dir.path());
    assert_eq!(again.task("t").unwrap().retained.next(), seq(3));
}

#[test]
fn the_data_dir_and_its_files_are_private() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let store = open(&dir);
    store
        .create_task(record("t", Millis(1)), Millis(1))
        .unwrap();
    store.append("t", TICK, &tick(0), Millis(1)).unwrap();
    store.checkpoint().unwrap();
    let mut seen = 0;
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", entry.path().display());
                seen += 1;
            }
        }
    }
    assert!(seen >= 4, "LOCK, a log segment and sled's files: {seen}");
}

#[test]
fn device_flushes_follow_the_durability_mode() {
    for (mode, min_syncs, max_syncs) in [
        (Durability::Event, 21, u64::MAX),
        (Durability::Group, 21, u64::MAX),
        (Durability::None, 0, 0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            config(Some(dir.path()), mode, RetentionPolicy::DEFAULT),
            Millis(1),
        )
        .unwrap();
        let before = store.stats().wal;
        store
            .create_task(record("t", Millis(1)), Millis(1))
            .unwrap();
        for i in 0..20 {
            store.append("t", TICK, &tick(i), Millis(1)).unwrap();
        }
        let after = store.stats().wal;
        let syncs = after.syncs - before.syncs;
        // One thread appending: every append waits for its own flush.
        assert!(
            (min_syncs..=max_syncs).contains(&syncs),
            "{mode:?}: {syncs} syncs"
        );
        assert_eq!(after.writes - before.writes, 21, "{mode:?}");
    }
}

#[test]
fn a_thousand_concurrent_tasks_keep_their_order_and_share_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    let tasks = 1000;
    let events = 5;
    let threads = 50;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for k in (t..tasks).step_by(threads) {
                    let id = format!("task-{k}");
                    store
                        .create_task(record(&id, Millis(1)), Millis(1))
                        .unwrap();
                    for i in 0..events {
                        let seq = store.append(&id, TICK, &tick(i), Millis(2)).unwrap();
                        assert_eq!(seq.get(), i + 1);
                    }
                    store
                        .finish(&id, TaskStatus::Completed, None, None, None, Millis(3))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let appended = tasks as u64 * (events + 2);
    let syncs = store.stats().wal.syncs;
    assert!(syncs < appended, "{syncs} flushes for {appended} appends");
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.tasks().len(), tasks);
    for k in 0..tasks {
        let id = format!("task-{k}");
        let got = all_events(&store, &id, 3);
        assert_eq!(seqs(&got), (0..events + 2).collect::<Vec<_>>(), "{id}");
        for (i, e) in got[1..=events as usize].iter().enumerate() {
            assert_eq!(e.payload, tick(i as u64));
        }
    }
}

/// Waiting appenders are woken one by one when a drain covers them (and one that it does not
/// cover leads the next): with 64 threads each waiting for every append, in both pipelined
/// modes, every `append` returns with its event already readable, mixed with pipelined
/// `emit`s, and the flushes are shared.
#[test]
fn every_waiting_appender_returns_with_its_event_visible() {
    for mode in [Durability::Group, Durability::None] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            Store::open(
                config(Some(dir.path()), mode, RetentionPolicy::DEFAULT),
                Millis(1),
            )
            .unwrap(),
        );
        let threads = 64;
        let events = 40;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    let id = format!("task-{t}");
                    store
                        .create_task(record(&id, Millis(1)), Millis(1))
                        .unwrap();
                    for i in 0..events {
                        let seq = if i % 4 == 3 {
                            let seq = store.emit(&id, TICK, &tick(i), Millis(2)).unwrap();
                            store.wait_durable(&id, seq).unwrap();
                            seq
                        } else {
                            store.append(&id, TICK, &tick(i), Millis(2)).unwrap()
                        };
                        let got = store.event(&id, seq);
                        assert_eq!(
                            got.map(|e| e.payload),
                            Some(tick(i)),
                            "{mode:?} {id} {seq:?}"
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let appended = threads as u64 * (events + 1);
        if mode == Durability::Group {
            let syncs = store.stats().wal.syncs;
            assert!(
                syncs < appended / 4,
                "{syncs} flushes for {appended} appends"
            );
        }
        for t in 0..threads {
            let got = all_events(&store, &format!("task-{t}"), 16);
            assert_eq!(seqs(&got), (0..=events).collect::<Vec<_>>(), "{mode:?}");
        }
    }
}

#[test]
fn replay_reads_a_long_log_in_batches() {
    let store = Store::open(
        config(None, Durability::None, RetentionPolicy::DEFAULT),
        Millis(0),
    )
    .unwrap();
    store
        .create_task(record("t", Millis(0)), Millis(0))
        .unwrap();
    for i in 0..5_000 {
        store.append("t", TICK, &tick(i), Millis(0)).unwrap();
    }
    let mut out = Vec::new();
    store.read_from("t", seq(4_000), 600, &mut out);
    assert_eq!(seqs(&out), (4_000..4_600).collect::<Vec<_>>());
    assert_eq!(out[0].payload, tick(3_999));
    let all = all_events(&store, "t", 1_000);
    assert_eq!(all.len(), 5_001);
}

#[test]
fn reads_agree_whether_served_by_the_cache_or_by_sled() {
    // Payloads of 0 B to 40 KiB: a running task's read cache (16 KiB) holds a few of the
    // newest, none of the largest; every read must still see the whole log, in order.
    let store = Store::open(
        config(None, Durability::None, RetentionPolicy::DEFAULT),
        Millis(0),
    )
    .unwrap();
    store
        .create_task(record("t", Millis(0)), Millis(0))
        .unwrap();
    let mut expected = vec![br#"{"status":"working"}"#.to_vec()];
    for i in 0..40u64 {
        let p = format!(
            r#"{{"i":{i},"data":"{}"}}"#,
            "y".repeat((i as usize * 997) % 41_000)
        )
        .into_bytes();
        store.append("t", TICK, &p, Millis(i)).unwrap();
        expected.push(p);
        // Each read both right after the append (cache) and of the whole log (sled, then cache).
        let last = store.event("t", seq(i + 1)).unwrap();
        assert_eq!(last.payload, expected[i as usize + 1]);
        let all = all_events(&store, "t", 7);
        let payloads: Vec<Vec<u8>> = all.into_iter().map(|e| e.payload).collect();
        assert_eq!(payloads, expected, "after {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// Index rebuilds: what retention removed is gone from every file of the data dir

/// A payload no other part of a test writes, to look for in the files of a data dir.
fn marked(task: &str, i: u64) -> Vec<u8> {
    format!(r#"{{"marker":"removed-{task}-payload-{i}"}}"#).into_bytes()
}

/// The index directories of a data dir, by name.
fn index_dirs(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("index"))
        .collect();
    out.sort();
    out
}

const REMOVED_MARK: &[u8] = b"removed-gone-payload";

/// Terminal retention of 5 s; "gone" (ended at 100 ms, with marked payloads) is removed by a
/// sweep from 5 100 ms on, "done" (ended at 4 000 ms) and "running" stay.
fn rebuild_policy() -> RetentionPolicy {
    RetentionPolicy {
        terminal_retention: Millis(5_000),
        ..RetentionPolicy::DEFAULT
    }
}

fn fill_for_rebuild(store: &Store) {
    store
        .create_task(record("gone", Millis(0)), Millis(0))
        .unwrap();
    for i in 0..50 {
        store
            .append("gone", TICK, &marked("gone", i), Millis(10))
            .unwrap();
    }
    store
        .finish("gone", TaskStatus::Completed, None, None, None, Millis(100))
        .unwrap();
    for id in ["done", "running"] {
        store.create_task(record(id, Millis(0)), Millis(0)).unwrap();
        for i in 0..300 {
            store.append(id, TICK, &tick(i), Millis(10)).unwrap();
        }
    }
    store
        .finish(
            "done",
            TaskStatus::Completed,
            None,
            None,
            None,
            Millis(4_000),
        )
        .unwrap();
}

#[test]
fn an_index_rebuild_keeps_live_events_byte_for_byte_and_removed_ones_leave_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_at(dir.path(), rebuild_policy(), Millis(0));
    fill_for_rebuild(&store);
    store.checkpoint().unwrap();
    assert!(!files_containing(dir.path(), REMOVED_MARK).is_empty());
    let done = all_events(&store, "done", 64);
    let running = all_events(&store, "running", 64);
    assert_eq!(store.sweep(Millis(6_000)), 1);
    store.rebuild_index().unwrap();
    assert!(store.stats().index_rebuilds >= 1);
    assert_eq!(
        files_containing(dir.path(), REMOVED_MARK),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(index_dirs(dir.path()), ["index.1"]);
    assert_eq!(all_events(&store, "done", 64), done);
    assert_eq!(all_events(&store, "running", 7), running);
    assert_eq!(store.event("running", seq(5)), Some(running[5].clone()));
    assert_eq!(store.task("gone"), None);
    // The store goes on on the new index, and a second rebuild on a third one.
    assert_eq!(
        store
            .append("running", TICK, &tick(300), Millis(10))
            .unwrap(),
        seq(301)
    );
    store.rebuild_index().unwrap();
    assert_eq!(index_dirs(dir.path()), ["index.2"]);
    drop(store);
    // A restart opens the rebuilt index: every event is there, byte for byte.
    let store = open_at(dir.path(), rebuild_policy(), Millis(6_000));
    assert_eq!(all_events(&store, "done", 64), done);
    let after = all_events(&store, "running", 64);
    assert_eq!(after[..running.len()], running[..]);
    assert_eq!(after[301].payload, tick(300));
    assert_eq!(status_payload(&after)["status"], "failed");
    assert_eq!(store.task("gone"), None);
    assert_eq!(
        files_containing(dir.path(), REMOVED_MARK),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn events_dropped_by_the_count_limit_leave_the_disk_once_they_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let small = RetentionPolicy {
        max_events: 10,
        ..RetentionPolicy::DEFAULT
    };
    let store = open_with(dir.path(), small);
    store
        .create_task(record("t", Millis(1)), Millis(1))
        .unwrap();
    for i in 0..10 {
        store
            .append("t", TICK, &marked("early", i), Millis(1))
            .unwrap();
    }
    store.checkpoint().unwrap();
    let mark = b"removed-early-payload";
    assert!(!files_containing(dir.path(), mark).is_empty());
    // 10 000 more events push those out, and 1.4 MB with them: more than 1 MiB, and more than
    // half of what is retained, so the next checkpoint rebuilds the index.
    let filler = format!(r#"{{"data":"{}"}}"#, "x".repeat(100)).into_bytes();
    for _ in 0..10_000 {
        store.append("t", TICK, &filler, Millis(1)).unwrap();
    }
    assert_eq!(store.task("t").unwrap().retained.earliest(), seq(10_001));
    store.checkpoint().unwrap();
    assert!(store.stats().index_rebuilds >= 1);
    assert_eq!(
        files_containing(dir.path(), mark),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(all_events(&store, "t", 100).len(), 10);
}

#[test]
fn an_interrupted_rebuild_recovers_whichever_side_of_the_switch_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let saved = tempfile::tempdir().unwrap();
    let (done, running) = {
        let store = open_at(dir.path(), rebuild_policy(), Millis(0));
        fill_for_rebuild(&store);
        store
            .finish(
                "running",
                TaskStatus::Completed,
                None,
                None,
                None,
                Millis(4_000),
            )
            .unwrap();
        (
            all_events(&store, "done", 64),
            all_events(&store, "running", 64),
        )
    };
    copy_dir(&dir.path().join("index"), saved.path());

    // Before the switch: a half-built new directory (here a copy of the old one, so a valid
    // sled that still holds the removed task) and a pointer replacement never renamed. The
    // old index is used and the rest deleted.
    copy_dir(saved.path(), &dir.path().join("index.1"));
    std::fs::write(dir.path().join("INDEX.tmp"), "index.1\n").unwrap();
    {
        let store = open_at(dir.path(), rebuild_policy(), Millis(1_000));
        assert_eq!(store.recovery().stale_index_dirs, 1);
        assert_eq!(index_dirs(dir.path()), ["index"]);
        assert!(!dir.path().join("INDEX.tmp").exists());
        assert_eq!(all_events(&store, "done", 64), done);
        assert_eq!(all_events(&store, "running", 64), running);
        assert!(store.task("gone").is_some());
    }

    // A restart past the terminal retention removes "gone" and rebuilds at once.
    {
        let store = open_at(dir.path(), rebuild_policy(), Millis(6_000));
        assert_eq!(store.task("gone"), None);
        assert_eq!(store.stats().index_rebuilds, 1);
        assert_eq!(index_dirs(dir.path()), ["index.1"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("INDEX")).unwrap(),
            "index.1\n"
        );
    }
    assert_eq!(
        files_containing(dir.path(), REMOVED_MARK),
        Vec::<std::path::PathBuf>::new()
    );

    // After the switch, before the old directory was deleted: `INDEX` names the new one, the
    // old one (which still holds the removed task) is still there, and so is a half-built
    // next one. The new one is used and both others are deleted.
    copy_dir(saved.path(), &dir.path().join("index"));
    copy_dir(saved.path(), &dir.path().join("index.2"));
    assert_eq!(index_dirs(dir.path()), ["index", "index.1", "index.2"]);
    {
        let store = open_at(dir.path(), rebuild_policy(), Millis(6_000));
        assert_eq!(store.recovery().stale_index_dirs, 2);
        assert_eq!(index_dirs(dir.path()), ["index.1"]);
        assert_eq!(store.task("gone"), None);
        assert_eq!(all_events(&store, "done", 64), done);
        assert_eq!(all_events(&store, "running", 64), running);
    }
    assert_eq!(
        files_containing(dir.path(), REMOVED_MARK),
        Vec::<std::path::PathBuf>::new()
    );

    // A pointer naming no index directory is refused, not guessed around.
    std::fs::write(dir.path().join("INDEX"), "index.7\n").unwrap();
    let opened = Store::open(
        config(Some(dir.path()), Durability::Group, rebuild_policy()),
        Millis(6_000),
    );
    assert!(
        matches!(opened, Err(StoreError::Corrupt(_))),
        "{:?}",
        opened.err()
    );
}

#[test]
fn appends_and_reads_during_rebuilds_lose_nothing_and_see_no_gap() {
    const WRITERS: u64 = 4;
    const EVENTS: u64 = 1_500;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open_at(dir.path(), rebuild_policy(), Millis(0)));
    let ids: Vec<String> = (0..WRITERS).map(|w| format!("w{w}")).collect();
    for id in &ids {
        store.create_task(record(id, Millis(0)), Millis(0)).unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = ids
        .iter()
        .map(|id| {
            let (store, id) = (Arc::clone(&store), id.clone());
            std::thread::spawn(move || {
                for i in 0..EVENTS {
                    assert_eq!(
                        store.append(&id, TICK, &tick(i), Millis(10)).unwrap(),
                        seq(i + 1)
                    );
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (store, ids, stop) = (Arc::clone(&store), ids.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for id in &ids {
                        // Whatever was visible before the read is read, in order, with its
                        // content: nothing a rebuild does shows as a gap.
                        let visible = store.task(id).unwrap().retained.next().get();
                        let events = all_events(&store, id, 1 + 97 * r);
                        assert!(
                            events.len() as u64 >= visible,
                            "{id}: {} < {visible}",
                            events.len()
                        );
                        for (k, e) in events.iter().enumerate().skip(1) {
                            assert_eq!(e.seq.get(), k as u64);
                            assert_eq!(e.payload, tick(k as u64 - 1), "{id} seq {k}");
                        }
                        if visible > 1 {
                            let last = store.event(id, seq(visible - 1)).unwrap();
                            assert_eq!(last.payload, tick(visible - 2));
                        }
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    // Rebuild over and over while they run, with removed tasks to leave out each time.
    let mut rebuilds = 0;
    let mut t = 0;
    while !writers.iter().all(std::thread::JoinHandle::is_finished) || rebuilds < 3 {
        let id = format!("filler-{t}");
        store
            .create_task(record(&id, Millis(0)), Millis(0))
            .unwrap();
        store
            .append(&id, TICK, &marked("gone", t), Millis(0))
            .unwrap();
        store
            .finish(&id, TaskStatus::Completed, None, None, None, Millis(0))
            .unwrap();
        assert_eq!(store.sweep(Millis(5_001)), 1);
        store.rebuild_index().unwrap();
        rebuilds += 1;
        t += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(store.stats().index_rebuilds >= 3);
    let expected: Vec<u64> = (0..=EVENTS).collect();
    for id in &ids {
        assert_eq!(seqs(&all_events(&store, id, 256)), expected, "{id}");
    }
    drop(store);
    let store = open_at(dir.path(), rebuild_policy(), Millis(20));
    for id in &ids {
        let events = all_events(&store, id, 256);
        assert_eq!(events.len() as u64, EVENTS + 2, "{id}");
        for (k, e) in events.iter().enumerate().skip(1).take(EVENTS as usize) {
            assert_eq!(e.payload, tick(k as u64 - 1), "{id} seq {k}");
        }
    }
    assert_eq!(index_dirs(dir.path()).len(), 1);
    assert_eq!(
        files_containing(dir.path(), REMOVED_MARK),
        Vec::<std::path::PathBuf>::new()
    );
}

// ---------------------------------------------------------------------------------------------
// The store-wide budget

/// What the budget counts for the tasks of `store`: each one's stored record plus
/// `TASK_OVERHEAD_BYTES`, and the types and payloads of its retained events.
fn counted(store: &Store) -> u64 {
    store
        .tasks()
        .iter()
        .map(|t| {
            let events: u64 = all_events(store, &t.record.task_id, 100)
                .iter()
                .map(|e| (e.event_type.len() + e.payload.len()) as u64)
                .sum();
            TASK_OVERHEAD_BYTES + serde_json::to_vec(&t.record).unwrap().len() as u64 + events
        })
        .sum()
}

#[test]
fn the_store_budget_refuses_events_and_tasks_beyond_it_and_retention_frees_it() {
    let dir = tempfile::tempdir().unwrap();
    let policy = RetentionPolicy {
        terminal_retention: Millis(1_000),
        max_events: 10,
        ..RetentionPolicy::DEFAULT
    };
    let task_bytes =
        TASK_OVERHEAD_BYTES + serde_json::to_vec(&record("a", Millis(0))).unwrap().len() as u64;
    let status_bytes = (STATUS_EVENT_TYPE.len() + r#"{"status":"working"}"#.len()) as u64;
    let big = format!(r#"{{"data":"{}"}}"#, "x".repeat(181)).into_bytes();
    let big_bytes = (TICK.len() + big.len()) as u64;
    assert_eq!(big_bytes, 211);
    // Room for "a" with 10 big events, "b" with its first (status) event, and 100 bytes more.
    let limit = 2 * task_bytes + 10 * big_bytes + status_bytes + 100;
    let open_limited = |now: Millis| {
        let mut c = config(Some(dir.path()), Durability::Group, policy);
        c.max_store_bytes = limit;
        Store::open(c, now).unwrap()
    };
    let store = open_limited(Millis(0));
    // "a" may keep 10 events. Its 10th big event pushes the status event out; from then on
    // each pushes out one as big as itself, so it always fits.
    store
        .create_task(record("a", Millis(0)), Millis(0))
        .unwrap();
    assert_eq!(store.stored_bytes(), task_bytes + status_bytes);
    for _ in 0..20 {
        store.append("a", TICK, &big, Millis(0)).unwrap();
    }
    assert_eq!(store.stored_bytes(), task_bytes + 10 * big_bytes);
    // "b" fits with its status event, but not one big event.
    store
        .create_task(record("b", Millis(0)), Millis(0))
        .unwrap();
    let full = 2 * task_bytes + 10 * big_bytes + status_bytes;
    assert_eq!(store.stored_bytes(), full);
    let refused = store.append("b", TICK, &big, Millis(0));
    assert!(
        matches!(refused, Err(AppendError::StoreFull { limit: l, stored }) if l == limit && stored == full),
        "{refused:?}"
    );
    // Small events fill the rest; then a new task is refused too.
    while store.append("b", TICK, b"{}", Millis(0)).is_ok() {}
    let stored = store.stored_bytes();
    assert!(
        stored <= limit && stored + (TICK.len() as u64 + 2) > limit,
        "{stored}"
    );
    assert!(matches!(
        store.create_task(record("c", Millis(0)), Millis(0)),
        Err(AppendError::StoreFull { .. })
    ));
    assert!(store.task("c").is_none());
    // A task can always end, even beyond the budget.
    store
        .finish("b", TaskStatus::Completed, None, None, None, Millis(10))
        .unwrap();
    assert!(store.stored_bytes() > limit);
    // What is counted is what is kept, and a restart (which fails "a", pushing out its oldest
    // event) counts it again.
    assert_eq!(store.stored_bytes(), counted(&store));
    drop(store);
    let store = open_limited(Millis(20));
    assert_eq!(store.stored_bytes(), counted(&store));
    // Terminal retention removes "a" and "b" and gives their bytes back.
    assert_eq!(store.sweep(Millis(5_000)), 2);
    assert_eq!(store.stored_bytes(), 0);
    store
        .create_task(record("c", Millis(5_000)), Millis(5_000))
        .unwrap();
    store.append("c", TICK, &big, Millis(5_000)).unwrap();
    assert_eq!(store.stored_bytes(), counted(&store));
}

#[test]
fn in_memory_reads_during_appends_and_truncation_see_no_wrong_event() {
    // In memory the index is an ordered map read one entry at a time: a read that races
    // appends and the count limit's truncation returns events in order, each with its own
    // content, from the earliest retained on.
    const EVENTS: u64 = 3_000;
    let small = RetentionPolicy {
        max_events: 50,
        ..RetentionPolicy::DEFAULT
    };
    let store = Arc::new(Store::open(config(None, Durability::None, small), Millis(0)).unwrap());
    store
        .create_task(record("t", Millis(0)), Millis(0))
        .unwrap();
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            for i in 0..EVENTS {
                store.append("t", TICK, &tick(i), Millis(0)).unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() || reads < 100 {
        let mut out = Vec::new();
        store.read_from("t", Seq::ZERO, 1 + reads % 60, &mut out);
        for pair in out.windows(2) {
            assert_eq!(pair[1].seq.get(), pair[0].seq.get() + 1);
        }
        for e in out.iter().filter(|e| e.seq.get() > 0) {
            assert_eq!(e.payload, tick(e.seq.get() - 1));
        }
        reads += 1;
    }
    writer.join().unwrap();
    assert_eq!(
        seqs(&all_events(&store, "t", 7)),
        (EVENTS - 49..=EVENTS).collect::<Vec<_>>()
    );
    assert_eq!(
        store.stored_bytes(),
        TASK_OVERHEAD_BYTES
            + serde_json::to_vec(&store.task("t").unwrap().record)
                .unwrap()
                .len() as u64
            + all_events(&store, "t", 100)
                .iter()
                .map(|e| (e.event_type.len() + e.payload.len()) as u64)
                .sum::<u64>()
    );
}
