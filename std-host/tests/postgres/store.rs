//! The storage interface ([`TaskStore`]) against both implementations in one process: the
//! same checks on a data dir and on PostgreSQL, then what only a shared store has (two
//! replicas' stores racing on one task, a lease taken over while its old owner appends).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use taskstream_core::{Millis, RetentionPolicy, Seq};
use taskstream_store::{
    AppendError, Durability, PgConfig, PgStore, RawEvent, Store, StoreConfig, StoreError,
    TaskRecord, TaskStatus, TaskStore, DEFAULT_INDEX_CACHE_BYTES, DEFAULT_MAX_STORE_BYTES,
};

use taskstream_store::pg::DEFAULT_CACHE_BYTES;

use super::cluster::{self, Cluster};

const NOW: Millis = Millis(1_000_000);

fn retention() -> RetentionPolicy {
    RetentionPolicy {
        max_events: 4,
        ..RetentionPolicy::DEFAULT
    }
}

fn record(id: &str) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        principal: "p".into(),
        tool: "emit".into(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: NOW,
        last_updated_at: NOW,
        ttl_ms: None,
        poll_interval_ms: 1000,
        result: None,
        error: None,
    }
}

/// Every event from `from` on, reading again after a short read (a read may hand fewer than
/// are there) until a read hands none.
fn read_all(store: &dyn TaskStore, id: &str, from: u64) -> Vec<(u64, String, String)> {
    let mut out: Vec<(u64, String, String)> = Vec::new();
    loop {
        let next = out.last().map_or(from, |e| e.0 + 1);
        let n = store
            .read_raw_from(
                id,
                Seq::new(next).expect("seq"),
                1000,
                &mut |e: RawEvent| {
                    out.push((
                        e.seq().get(),
                        e.event_type().to_owned(),
                        String::from_utf8_lossy(e.payload()).into_owned(),
                    ));
                },
            )
            .expect("read");
        if n == 0 {
            return out;
        }
    }
}

fn range(store: &dyn TaskStore, id: &str) -> (u64, u64) {
    let v = store.task(id).expect("task");
    (v.retained.earliest().get(), v.retained.next().get())
}

/// The interface's contract, the same for every implementation.
fn contract(store: &(dyn TaskStore + Sync)) {
    store.create_task(record("t1"), NOW).expect("create");
    assert_eq!(
        range(store, "t1"),
        (0, 1),
        "the working status event is seq 0"
    );
    assert!(matches!(
        store.create_task(record("t1"), NOW),
        Err(AppendError::Storage(StoreError::DuplicateTask(_)))
    ));
    for i in 1..=2u64 {
        let seq = store
            .append("t1", "dev.taskstream.tick", br#"{ "i" : 1 }"#, NOW)
            .expect("append");
        assert_eq!(seq.get(), i, "seqs are dense");
    }
    assert!(matches!(
        store.append("t1", "dev.taskstream.tick", b"[1]", NOW),
        Err(AppendError::InvalidPayload(_))
    ));
    assert!(matches!(
        store.append("t1", "tick", b"{}", NOW),
        Err(AppendError::InvalidType(_))
    ));
    assert!(matches!(
        store.append("nope", "dev.taskstream.tick", b"{}", NOW),
        Err(AppendError::UnknownTask)
    ));
    let end = store
        .finish("t1", TaskStatus::Completed, None, None, None, NOW)
        .expect("finish");
    assert_eq!(end.get(), 3);
    assert!(matches!(
        store.finish("t1", TaskStatus::Failed, None, None, None, NOW),
        Err(AppendError::Terminal)
    ));
    assert!(matches!(
        store.append("t1", "dev.taskstream.tick", b"{}", NOW),
        Err(AppendError::Terminal)
    ));
    let events = read_all(store, "t1", 0);
    let want = [
        (0, "dev.taskstream.task.status", r#"{"status":"working"}"#),
        (1, "dev.taskstream.tick", r#"{"i":1}"#),
        (2, "dev.taskstream.tick", r#"{"i":1}"#),
        (3, "dev.taskstream.task.status", r#"{"status":"completed"}"#),
    ];
    let want: Vec<(u64, String, String)> = want
        .iter()
        .map(|(s, t, p)| (*s, (*t).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(events, want, "compact payloads, in seq order");
    assert_eq!(
        store.task("t1").expect("task").record.status,
        TaskStatus::Completed
    );

    // Retention by count: the earliest seq is exact (the server decides `events_gone` by it,
    // and reads from it on).
    store.create_task(record("t2"), NOW).expect("create");
    for _ in 0..6 {
        store
            .append("t2", "dev.taskstream.tick", b"{}", NOW)
            .expect("append");
    }
    assert_eq!(range(store, "t2"), (3, 7));
    assert_eq!(
        read_all(store, "t2", 3)
            .iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        [3, 4, 5, 6]
    );

    // Concurrent appends to one task (one group commit may take several of them) keep the
    // count limit exact too.
    store.create_task(record("t3"), NOW).expect("create");
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..20 {
                    store
                        .append("t3", "dev.taskstream.tick", b"{}", NOW)
                        .expect("append");
                }
            });
        }
    });
    assert_eq!(range(store, "t3"), (157, 161));
    assert_eq!(
        read_all(store, "t3", 157)
            .iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        [157, 158, 159, 160]
    );
    store
        .finish("t3", TaskStatus::Cancelled, None, None, None, NOW)
        .expect("finish");
    assert_eq!(range(store, "t3"), (158, 162));

    // Terminal retention, then retention by age.
    let later = Millis(NOW.0 + retention().terminal_retention.0 + 1);
    assert_eq!(store.sweep(later), 2, "t1 and t3 (terminal) expired");
    assert!(store.task("t1").is_none());
    assert_eq!(range(store, "t2"), (3, 7), "young events stay");
    let much_later = Millis(NOW.0 + retention().max_event_age.0 + 1);
    assert_eq!(store.sweep(much_later), 0);
    assert_eq!(range(store, "t2"), (7, 7), "every event aged out");
    assert!(store.task("t2").is_some(), "a running task stays");
    assert_eq!(store.tasks().len(), 1);
}

#[test]
fn the_storage_interface_holds_on_a_data_dir_and_on_postgresql() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = Store::open(
        StoreConfig {
            data_dir: Some(dir.path().join("data")),
            durability: Durability::Group,
            retention: retention(),
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
        },
        NOW,
    )
    .expect("open");
    contract(&data_dir);
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let store = open(&pg.db("contract"), retention(), DEFAULT_CACHE_BYTES);
    contract(&store);
}

/// A replica of the store on `url`: a lease of 60 s, the default pool and writers, a cache of
/// `cache_bytes` (0: every read goes to the database).
fn open(url: &str, retention: RetentionPolicy, cache_bytes: usize) -> PgStore {
    PgStore::open(PgConfig {
        url: url.to_owned(),
        retention,
        lease_timeout: Duration::from_secs(60),
        pool_size: taskstream_store::pg::DEFAULT_POOL_SIZE,
        writers: taskstream_store::pg::DEFAULT_WRITERS,
        cache_bytes,
    })
    .expect("open")
}

#[test]
fn racing_writers_and_a_lease_taken_over_never_duplicate_or_gap() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("race");
    let a = Arc::new(open(&url, RetentionPolicy::DEFAULT, DEFAULT_CACHE_BYTES));
    let b = Arc::new(open(&url, RetentionPolicy::DEFAULT, DEFAULT_CACHE_BYTES));
    a.create_task(record("race"), NOW).expect("create");

    // Eight appenders on the owner, while the other replica tries too (refused: it does not
    // hold the lease) and then takes the task over once the owner's lease looks expired.
    let start = Arc::new(Barrier::new(10));
    let mut writers = Vec::new();
    for w in 0..8u32 {
        let (a, start) = (Arc::clone(&a), Arc::clone(&start));
        writers.push(std::thread::spawn(move || {
            start.wait();
            let mut mine = Vec::new();
            for i in 0..10_000u32 {
                let payload = format!(r#"{{"w":{w},"i":{i}}}"#);
                match a.append("race", "dev.taskstream.tick", payload.as_bytes(), NOW) {
                    Ok(seq) => mine.push((seq.get(), payload)),
                    Err(AppendError::Terminal) => break,
                    Err(e) => panic!("append: {e:?}"),
                }
            }
            mine
        }));
    }
    let intruder = {
        let (b, start) = (Arc::clone(&b), Arc::clone(&start));
        std::thread::spawn(move || {
            start.wait();
            for _ in 0..50 {
                assert!(
                    matches!(
                        b.append("race", "dev.taskstream.tick", br#"{"intruder":1}"#, NOW),
                        Err(AppendError::Terminal)
                    ),
                    "a replica that does not hold the lease may not append"
                );
            }
        })
    };
    start.wait();
    intruder.join().expect("intruder");
    // Wait until the owner has appended a good many, then age its heartbeat and reap.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while range(&*b, "race").1 < 300 {
        assert!(std::time::Instant::now() < deadline, "appends progress");
        std::thread::yield_now();
    }
    pg.psql(
        "race",
        &format!(
            "UPDATE taskstream_replicas SET heartbeat = now() - interval '1 hour' \
             WHERE id = '{}'",
            a.replica_id()
        ),
    );
    assert_eq!(b.reap().expect("reap"), 1, "B ends A's task");

    let mut appended: Vec<(u64, String)> = Vec::new();
    for w in writers {
        appended.extend(w.join().expect("writer"));
    }
    let events = read_all(&*b, "race", 0);
    let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
    let want: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(seqs, want, "dense, no duplicate");
    // Every acknowledged append is there, at its seq; nothing else but the two status events.
    assert_eq!(appended.len() + 2, events.len());
    for (seq, payload) in &appended {
        let e = &events[usize::try_from(*seq).expect("seq")];
        assert_eq!(&e.2, payload, "seq {seq}");
    }
    let last = events.last().expect("events");
    assert!(last.2.contains(r#""status":"failed""#), "{last:?}");
    assert!(!events.iter().any(|e| e.2.contains("intruder")));
    // The old owner is fenced for good.
    assert!(matches!(
        a.append("race", "dev.taskstream.tick", b"{}", NOW),
        Err(AppendError::Terminal)
    ));
}

/// The replica's cache of committed events: a read never hands out an event below the floor
/// the task's row says (the lookup the server decides `events_gone` from raises it, on a
/// replica whose cache held the dropped events too), and never one that did not commit (a
/// deposed writer's late append takes the seq another replica's end committed; the old
/// owner then reads that end, as every replica does).
#[test]
fn the_cache_serves_nothing_below_the_floor_and_nothing_uncommitted() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("cache");
    let retention = RetentionPolicy {
        max_events: 10,
        retain_from_checkpoint: true,
        ..RetentionPolicy::DEFAULT
    };
    let open_with = |cache_bytes: usize| open(&url, retention, cache_bytes);
    let a = open_with(DEFAULT_CACHE_BYTES);
    let b = open_with(DEFAULT_CACHE_BYTES);
    // No cache: every read goes to the database, the reference.
    let plain = open_with(0);
    a.create_task(record("c"), NOW).expect("create");
    for i in 1..=30u32 {
        let seq = a
            .append(
                "c",
                "dev.taskstream.tick",
                format!(r#"{{"i":{i}}}"#).as_bytes(),
                NOW,
            )
            .expect("append");
        assert_eq!(seq.get(), u64::from(i));
    }
    // The count limit moved the floor to 21 as the writer committed.
    assert_eq!(range(&a, "c"), (21, 31));
    assert!(a.cache_usage().bytes > 0, "the writer filled its cache");
    assert!(read_all(&a, "c", 0).is_empty(), "nothing below the floor");
    assert!(read_all(&a, "c", 20).is_empty(), "nothing below the floor");
    let a_tail = read_all(&a, "c", 21);
    assert_eq!(a_tail.len(), 10);
    assert_eq!(
        a_tail,
        read_all(&plain, "c", 21),
        "the cache holds what committed"
    );
    // B reads the tail from the database and caches it.
    assert_eq!(read_all(&b, "c", 21), a_tail);
    assert!(b.cache_usage().bytes > 0, "the read filled B's cache");

    // A checkpoint on A drops everything before it. B's cache still holds 21..30, but B's
    // lookup of the row (which the server decides from) raises B's floor first.
    let cp = a
        .append(
            "c",
            "dev.taskstream.checkpoint",
            br#"{"coversThrough":30,"state":{}}"#,
            NOW,
        )
        .expect("checkpoint");
    assert_eq!(cp.get(), 31);
    assert_eq!(range(&b, "c"), (31, 32));
    for from in [21, 25, 30] {
        assert!(
            read_all(&b, "c", from).is_empty(),
            "B below the floor from {from}"
        );
        assert!(
            read_all(&a, "c", from).is_empty(),
            "A below the floor from {from}"
        );
    }
    assert_eq!(read_all(&b, "c", 31), read_all(&plain, "c", 31));
    assert_eq!(read_all(&a, "c", 31), read_all(&plain, "c", 31));

    // B ends the task (a cancellation through another replica): its terminal event takes
    // seq 32, the seq A's head would give its next append. A's late append is refused by
    // the database, and never served from A's cache in place of B's event.
    assert_eq!(
        b.finish("c", TaskStatus::Cancelled, None, None, None, NOW)
            .expect("finish")
            .get(),
        32
    );
    let late = a.emit("c", "dev.taskstream.tick", br#"{"late":true}"#, NOW);
    if let Ok(seq) = late {
        assert_eq!(seq.get(), 32, "A's head");
    }
    assert!(matches!(
        a.append("c", "dev.taskstream.tick", br#"{"late":true}"#, NOW),
        Err(AppendError::Terminal)
    ));
    let reference = read_all(&plain, "c", 31);
    assert_eq!(reference.len(), 2);
    assert!(reference[1].2.contains("cancelled"), "{reference:?}");
    for (name, store) in [("A", &a), ("B", &b)] {
        let got = read_all(store, "c", 31);
        assert_eq!(got, reference, "replica {name}");
        assert!(!got.iter().any(|e| e.2.contains("late")), "replica {name}");
    }
    // A budget of 0 holds nothing.
    assert_eq!(plain.cache_usage().bytes, 0);
}

/// The pool's gauges (`taskstream_postgres_pool_*` on `/metrics`): with one connection and
/// four readers at once, readers are seen waiting; once they are done nothing is in use or
/// waiting, and the waits counted stay.
#[test]
fn the_pool_counts_the_readers_waiting_for_a_connection() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let store = Arc::new(
        PgStore::open(PgConfig {
            url: pg.db("pool"),
            retention: RetentionPolicy::DEFAULT,
            lease_timeout: Duration::from_secs(60),
            pool_size: 1,
            writers: taskstream_store::pg::DEFAULT_WRITERS,
            // Every read goes to the database.
            cache_bytes: 0,
        })
        .expect("open"),
    );
    store.create_task(record("pool"), NOW).expect("create");
    // The store's own threads (the lease's renewal and reaping) use the pool too: this waits
    // (bounded) until nothing is in use or waiting, and returns the gauges then.
    let wait_idle = |when: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = store.pool().expect("a pool");
            assert_eq!(now.size, 1);
            if (now.in_use, now.waiting) == (0, 0) {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "the pool never idle {when}: {now:?}"
            );
            std::thread::yield_now();
        }
    };
    // The lease thread's first renewal and reaping run as the store opens.
    wait_idle("after the store opened");
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
            std::thread::spawn(move || {
                // A listing always reads the database (a lookup of a task this replica
                // writes is answered from what it knows).
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(store.list().expect("list").len(), 1);
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let busy = loop {
        let now = store.pool().expect("a pool");
        assert!(now.in_use <= 1, "{now:?}");
        if now.waiting > 0 && now.in_use == 1 {
            break now;
        }
        assert!(Instant::now() < deadline, "no reader seen waiting: {now:?}");
        std::thread::yield_now();
    };
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    let after = wait_idle("after the readers");
    assert!(
        after.waits >= busy.waiting && after.waits >= 1,
        "{busy:?} then {after:?}"
    );
}

/// The lookup a replica answers from what it knows of a task whose lease it holds (its
/// writer's committed range, the record it created): never a range the database has not
/// committed, the row's own range once an append returned, answered while the database is
/// away, and dropped when a floor moves or the task ends elsewhere (a sweep or an end on
/// another replica: then never a floor lower than the database's, nor a running status for
/// an ended task, once the notification arrived).
#[test]
fn the_local_lookup_never_runs_ahead_of_the_database_nor_below_its_floor() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("local");
    let retention = RetentionPolicy {
        max_events: 1000,
        max_event_age: Millis(1000),
        ..RetentionPolicy::DEFAULT
    };
    let open_with = |cache_bytes: usize| open(&url, retention, cache_bytes);
    let a = Arc::new(open_with(DEFAULT_CACHE_BYTES));
    let b = open_with(DEFAULT_CACHE_BYTES);
    // No cache, never the lease: every lookup reads the row, the reference.
    let plain = open_with(0);
    a.create_task(record("l"), NOW).expect("create");
    assert_eq!(range(&*a, "l"), (0, 1));

    // While A emits 5 000 events (the count limit moving the floor as batches commit), A's
    // answer is never past the row as read right after it.
    let emitter = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            for i in 1..5000u32 {
                a.emit(
                    "l",
                    "dev.taskstream.tick",
                    format!(r#"{{"i":{i}}}"#).as_bytes(),
                    NOW,
                )
                .expect("emit");
            }
            a.append("l", "dev.taskstream.tick", br#"{"i":5000}"#, NOW)
                .expect("append")
        })
    };
    let mut answers = 0;
    while !emitter.is_finished() {
        let mine = range(&*a, "l");
        let row = range(&plain, "l");
        assert!(mine.0 <= mine.1, "{mine:?}");
        assert!(
            mine.1 <= row.1 && mine.0 <= row.0,
            "A answered {mine:?}, the row said {row:?} after"
        );
        answers += 1;
    }
    assert_eq!(emitter.join().expect("emitter").get(), 5000);
    assert!(answers > 0);
    // Once an append returned, the answer is the row's.
    assert_eq!(range(&*a, "l"), range(&plain, "l"));
    assert_eq!(range(&*a, "l"), (4001, 5001));

    // With the database down, A still answers for the task it writes (from what it knows),
    // where a replica that must read the row cannot.
    pg.kill();
    assert_eq!(range(&*a, "l"), (4001, 5001));
    assert!(plain.lookup("l").is_err(), "the database is down");
    pg.resume();

    // A sweep on B moves the floor by age (the events from 5001 on are newer): once its
    // notification reached A, A answers the row's floor and serves nothing below it.
    for i in 0..10u32 {
        a.append(
            "l",
            "dev.taskstream.tick",
            format!(r#"{{"fresh":{i}}}"#).as_bytes(),
            Millis(NOW.0 + 5000),
        )
        .expect("append after the restart");
    }
    assert_eq!(range(&*a, "l"), (4011, 5011));
    b.sweep(Millis(NOW.0 + 5500));
    assert_eq!(
        range(&plain, "l"),
        (5001, 5011),
        "the sweep moved the floor"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while range(&*a, "l") != (5001, 5011) {
        assert!(
            std::time::Instant::now() < deadline,
            "A still answers {:?} after B's sweep",
            range(&*a, "l")
        );
        std::thread::yield_now();
    }
    assert!(
        read_all(&*a, "l", 4001).is_empty(),
        "nothing below the floor"
    );
    assert_eq!(read_all(&*a, "l", 5001), read_all(&plain, "l", 5001));

    // B ends the task: once its notification reached A, A answers the ended task.
    b.finish("l", TaskStatus::Cancelled, None, None, None, NOW)
        .expect("finish");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v = a.lookup("l").expect("lookup").expect("task");
        if v.record.status == TaskStatus::Cancelled {
            assert_eq!(v.retained.next().get(), 5012);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A still answers {:?} after B's end",
            v.record.status
        );
        std::thread::yield_now();
    }
}

/// A database as a server of schema version 2 left it: one row per event.
const SCHEMA_2: &str = r"
CREATE TABLE taskstream_schema (version integer NOT NULL);
INSERT INTO taskstream_schema VALUES (2);
CREATE TABLE taskstream_replicas (
    id text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE taskstream_tasks (
    task_id text PRIMARY KEY, principal text NOT NULL, record text NOT NULL,
    status text NOT NULL, owner text, floor bigint NOT NULL, next_seq bigint NOT NULL,
    created_at bigint NOT NULL, ended_at bigint
);
CREATE INDEX taskstream_tasks_running ON taskstream_tasks (owner)
    WHERE status IN ('working', 'input_required');
CREATE INDEX taskstream_tasks_ended ON taskstream_tasks (ended_at) WHERE ended_at IS NOT NULL;
CREATE TABLE taskstream_events (
    task_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, payload text NOT NULL,
    at bigint NOT NULL, PRIMARY KEY (task_id, seq)
);
";

#[test]
fn a_schema_2_database_is_migrated_and_reads_the_same_events() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("migrate");
    pg.psql("migrate", SCHEMA_2);
    // A finished task whose retained log (seqs 3 to 2,499) spans three chunks once packed, a
    // running task whose replica is gone, with payloads that are not ASCII.
    let tick = |seq: u64| format!(r#"{{"i":{seq},"s":"é ✓ \"q\""}}"#);
    let mut sql = String::new();
    for (id, status, owner, floor, next, ended) in [
        ("long", "completed", "NULL", 3, 2500, "5"),
        ("orphan", "working", "'gone'", 0, 3, "NULL"),
    ] {
        let mut rec = serde_json::to_value(record(id)).expect("record");
        rec["status"] = status.into();
        sql.push_str(&format!(
            "INSERT INTO taskstream_tasks VALUES ('{id}', 'p', '{rec}', '{status}', {owner}, \
             {floor}, {next}, 0, {ended});
             INSERT INTO taskstream_events SELECT '{id}', g, 'dev.taskstream.tick', \
             replace('{p}', 'N', g::text), 1000 + g FROM generate_series({floor}, {next} - 1) g;",
            p = tick(0).replace("0", "N").replace('\'', "''"),
        ));
    }
    pg.psql("migrate", &sql);
    let store = open(&url, RetentionPolicy::DEFAULT, 0);
    assert_eq!(
        pg.psql("migrate", "SELECT version FROM taskstream_schema")
            .trim(),
        "3"
    );
    assert_eq!(range(&store, "long"), (3, 2500));
    let events = read_all(&store, "long", 3);
    assert_eq!(events.len(), 2497);
    for (i, (seq, t, p)) in (3..).zip(&events) {
        assert_eq!(
            (*seq, t.as_str(), p.as_str()),
            (i, "dev.taskstream.tick", tick(i).as_str())
        );
    }
    assert!(
        read_all(&store, "long", 0).is_empty(),
        "nothing below the floor"
    );
    assert_eq!(
        pg.psql(
            "migrate",
            "SELECT count(*), min(first_seq), max(end_seq) FROM taskstream_chunks \
             WHERE task_id = 'long'"
        )
        .trim(),
        "3|3|2500"
    );
    // Packed as they were (uncompressed), with their times.
    assert_eq!(
        pg.psql(
            "migrate",
            "SELECT bool_and(get_byte(events, 0) = 0), bool_and(first_at = 1000 + first_seq \
             AND last_at = 999 + end_seq) FROM taskstream_chunks WHERE task_id = 'long'"
        )
        .trim(),
        "t|t"
    );
    let mut times = Vec::new();
    store
        .read_raw_from(
            "long",
            Seq::new(2498).expect("seq"),
            5,
            &mut |e: RawEvent| {
                times.push(e.at().0);
            },
        )
        .expect("read");
    assert_eq!(times, [3498, 3499]);
    // A migrated running task goes on: its replica is gone, so it ends failed, its terminal
    // event in a chunk after the migrated ones.
    store.reap().expect("reap");
    let orphan = read_all(&store, "orphan", 0);
    assert_eq!(orphan.len(), 4, "{orphan:?}");
    assert_eq!(orphan[2].2, tick(2));
    assert_eq!(orphan[3].1, "dev.taskstream.task.status");
    assert!(orphan[3].2.contains("failed"), "{}", orphan[3].2);
    // And new tasks are written as chunks.
    store.create_task(record("new"), NOW).expect("create");
    store
        .append("new", "dev.taskstream.tick", br#"{"k":1}"#, NOW)
        .expect("append");
    assert_eq!(read_all(&store, "new", 0).len(), 2);
}

#[test]
fn retention_by_age_moves_the_floor_inside_a_chunk_and_drops_it_once_passed() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("aged");
    let store = open(
        &url,
        RetentionPolicy {
            max_event_age: Millis(1000),
            ..RetentionPolicy::DEFAULT
        },
        DEFAULT_CACHE_BYTES,
    );
    // One chunk row of ten events appended at 1000 to 1009 ms, packed as the store packs them
    // (so the floor cannot fall on a row boundary), in a task this replica runs.
    let rec = serde_json::to_value(record("aged")).expect("record");
    pg.psql(
        "aged",
        &format!(
            "INSERT INTO taskstream_tasks VALUES ('aged', 'p', '{rec}', 'working', '{owner}', \
             0, 10, 0, NULL);
             INSERT INTO taskstream_chunks SELECT 'aged', 0, 10, 1000, 1009, \
             '\\x00'::bytea || string_agg(int8send(1000 + g) || int2send(19::smallint) || int4send(7) \
             || convert_to('dev.taskstream.tick', 'UTF8') || convert_to('{{\"i\":' || g || '}}', 'UTF8'), \
             ''::bytea ORDER BY g) FROM generate_series(0, 9) g;",
            owner = store.replica_id()
        ),
    );
    let rows = || {
        pg.psql(
            "aged",
            "SELECT count(*) FROM taskstream_chunks WHERE task_id = 'aged'",
        )
    };
    // At 2005 ms the cutoff is 1005: events 0 to 4 expired, so the floor moves to 5, inside
    // the row, which stays.
    store.sweep(Millis(2005));
    assert_eq!(range(&store, "aged"), (5, 10));
    let events = read_all(&store, "aged", 5);
    assert_eq!(
        events
            .iter()
            .map(|e| (e.0, e.2.as_str()))
            .collect::<Vec<_>>(),
        [
            (5, r#"{"i":5}"#),
            (6, r#"{"i":6}"#),
            (7, r#"{"i":7}"#),
            (8, r#"{"i":8}"#),
            (9, r#"{"i":9}"#)
        ]
    );
    assert!(
        read_all(&store, "aged", 2).is_empty(),
        "nothing below the floor"
    );
    assert_eq!(rows().trim(), "1");
    // Every event expired: the floor passes the row's end and the row goes.
    store.sweep(Millis(2010));
    assert_eq!(range(&store, "aged"), (10, 10));
    assert_eq!(rows().trim(), "0");
}
