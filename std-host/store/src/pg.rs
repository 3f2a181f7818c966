//! [`PgStore`]: tasks and events in PostgreSQL (`--store postgres://…`), shared by several
//! server replicas on one database.
//!
//! # Schema (versioned migrations, applied at open)
//!
//! | table | holds |
//! | --- | --- |
//! | `taskstream_schema` | one row: the schema version ([`SCHEMA_VERSION`]); a newer one is refused |
//! | `taskstream_replicas` | each replica's id and lease heartbeat (the database's clock) |
//! | `taskstream_tasks` | each task: its record (JSON text), status, principal, owner replica, retention floor, next seq, end time |
//! | `taskstream_chunks` | runs of a task's consecutive events, one row per run: key (task, first seq), the seq after its last, the times of its first and latest events, the events packed (type, payload byte for byte as appended, time) and compressed by the replica (LZ4; `pg_chunk.rs` gives the format). A group commit writes one row per task it holds, so the database pays its per-row costs (tuple, key, WAL record, protocol message) once per run, not per event, and the wire carries the run compressed (since version 3; version 2 had a row per event in `taskstream_events`) |
//!
//! # How it keeps the store's invariants
//!
//! - **Dense seqs, fenced.** A task's next seq lives in its row. A creation and an end take
//!   the row (`SELECT … FOR UPDATE`) and insert the event in one transaction, so a state
//!   change and its event commit together. An event's seq is taken by the replica that holds
//!   the task's lease, from the task's head in memory (loaded from the row at its first
//!   append); the batch that writes it moves the row's `next_seq` only where the row is still
//!   running, owned by this replica and at the batch's first seq, in the transaction that
//!   then copies the events of the tasks whose row moved, and only theirs: a deposed
//!   writer's late batch is refused by the database, and
//!   `(task_id, first_seq)`, the primary key, can start one run only (and a run is written
//!   only by the batch that moved the row past it).
//! - **Durable before visible.** Readers (any replica) see only committed rows, and nothing
//!   is answered or delivered before `COMMIT` returned (with `synchronous_commit = on`).
//! - **Group commit, pipelined.** [`emit`](TaskStore::emit) queues the event and returns its
//!   seq; writer threads (`writers`, each task always in the same one) take everything queued
//!   while their last batch committed and write it in **one transaction**: one statement
//!   (`UPDATE … FROM unnest` fenced, the count limit's `DELETE`, `pg_notify`), then the
//!   events, one chunk row per task (split past 1,024 events or 256 KiB), by
//!   `COPY … FROM STDIN (FORMAT binary)`: a few round trips and one WAL flush of the database
//!   per batch, whatever its size. A batch cut with its connection
//!   is retried until the lease timeout (its fence makes a retry of a batch that did commit a
//!   refusal, recognised by the row being at the batch's end); a batch that could not commit
//!   makes the task's next append fail, so a producer never goes on past a lost event.
//! - **Reads beside writes.** Reads use a pool of `pool_size` connections that the writers
//!   and the listener do not share; each connection prepares a statement once.
//! - **Committed events cached.** Each replica keeps up to `cache_bytes` of committed events
//!   (its writer's batches once committed, and what reads fetched), consulted before the
//!   database: never an event that did not commit, never one below the task's floor as last
//!   read from its row (`crate::pg_cache` says how).
//! - **Local lookups.** The lookup of a task whose lease this replica holds (and whose
//!   record it created) is answered from its writer's committed range, without a round trip,
//!   until the replica's epoch moves (a sweep, a task's end on any replica, a listener
//!   reconnect): then the row is read again.
//! - **Doorbell.** Every writing transaction sends `NOTIFY taskstream`; each replica `LISTEN`s
//!   and moves its [`ChangeSignal`]. The notification carries no event (only, after a sweep
//!   or an end, `retention` or `end`): streams read what is new by seq, so a lost notification
//!   (a dropped listener connection, after which every replica distrusts what it knows)
//!   costs latency, never an event.
//! - **Leases and fencing.** A task's row names the replica that runs it (`owner`). Each
//!   replica renews its heartbeat every quarter of `--lease-timeout`; any replica (checking as
//!   often) ends `failed`, with the terminal status event, every running task whose owner
//!   missed three renewals in a row (a heartbeat older than three quarters of the timeout, on
//!   the database's clock), so a dead replica's tasks end within the timeout of its death. An append succeeds only while the task is running *and* owned by the
//!   appending replica, checked in the same statement that takes the seq, so once a task was
//!   ended (by a lease expiry or a cancellation through another replica) its old owner's next
//!   append is refused: two writers never interleave one task's events.
//! - **Retention.** By count at each batch (the floor moves and the chunks wholly below it go
//!   in the same statement), by age and terminal retention in [`sweep`](TaskStore::sweep), in
//!   short statements: a floor moves first, then the chunks wholly below it go lowest first,
//!   1,000 at a time, so a running task's row is never held for longer than one `UPDATE` and
//!   what is left of a log is always a suffix. The chunk the floor falls inside stays until
//!   the floor passes its end; every read takes the floor from the task's row in the same
//!   statement and hands out nothing below it, so `earliestSeq` is exact and a dropped seq is
//!   `events_gone`.
//!
//! Connection errors are not fail-stop: a statement on a dropped connection fails (the client
//! is told), the connection is dropped and the next call reconnects.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls, Statement};
use taskstream_core::{EventType, Millis, Payload, Retained, RetentionPolicy, Seq};

use crate::log::log;

use super::backend::TaskStore;
use super::error::{AppendError, StoreError};
use super::model::{ChangeSignal, TaskRecord, TaskStatus, TaskView, STATUS_EVENT_TYPE};
use super::pg_cache::{Cached, EventCache};
use super::pg_chunk::{self, ChunkWriter};
use super::raw::RawEvent;

pub use super::pg_cache::CacheUsage;
use super::sync::lock;

/// The schema version this build writes and reads; a database at a newer one is refused.
pub const SCHEMA_VERSION: i32 = 3;

pub use crate::model::DEFAULT_LEASE_TIMEOUT;

/// The message of the terminal status event of a task whose replica's lease expired.
pub const LEASE_FAILURE_MESSAGE: &str = "The server running the task stopped (its lease expired)";

/// The migrations, in order: migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE taskstream_replicas (
    id text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE taskstream_tasks (
    task_id text PRIMARY KEY,
    principal text NOT NULL,
    record text NOT NULL,
    status text NOT NULL,
    owner text,
    floor bigint NOT NULL,
    next_seq bigint NOT NULL,
    created_at bigint NOT NULL,
    ended_at bigint
);
CREATE INDEX taskstream_tasks_running ON taskstream_tasks (owner)
    WHERE status IN ('working', 'input_required');
CREATE INDEX taskstream_tasks_ended ON taskstream_tasks (ended_at)
    WHERE ended_at IS NOT NULL;
CREATE TABLE taskstream_events (
    task_id text NOT NULL REFERENCES taskstream_tasks ON DELETE CASCADE,
    seq bigint NOT NULL,
    type text NOT NULL,
    payload text NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (task_id, seq)
);
",
    r"
-- A foreign key check per inserted event cost as much as the insert itself; the only writers
-- of events are this store's statements, which insert only under a running task's row and
-- delete a task's events before its row.
ALTER TABLE taskstream_events DROP CONSTRAINT IF EXISTS taskstream_events_task_id_fkey;
",
    r"
-- A row per event cost the database a heap tuple, a key and a protocol message per event on
-- append and on read: a run of one task's consecutive events (a group commit's share of the
-- task) is now one row, packed as `crate::pg_chunk` says.
CREATE TABLE taskstream_chunks (
    task_id text NOT NULL,
    first_seq bigint NOT NULL,
    end_seq bigint NOT NULL,
    first_at bigint NOT NULL,
    last_at bigint NOT NULL,
    events bytea NOT NULL,
    PRIMARY KEY (task_id, first_seq),
    CHECK (end_seq > first_seq)
);
-- Compressed by the server replicas (LZ4), so the database must not compress it again; rows
-- of up to 8 KB stay in the table's own pages.
ALTER TABLE taskstream_chunks ALTER COLUMN events SET STORAGE EXTERNAL;
ALTER TABLE taskstream_chunks SET (toast_tuple_target = 8160);
INSERT INTO taskstream_chunks (task_id, first_seq, end_seq, first_at, last_at, events)
SELECT task_id, min(seq), max(seq) + 1, (array_agg(at ORDER BY seq))[1], max(at),
    '\x00'::bytea || string_agg(int8send(at) || int2send(octet_length(type)::smallint)
        || int4send(octet_length(payload)) || convert_to(type, 'UTF8')
        || convert_to(payload, 'UTF8'), ''::bytea ORDER BY seq)
FROM taskstream_events GROUP BY task_id, seq / 1024;
DROP TABLE taskstream_events;
",
];

/// The advisory lock that serialises migrations of replicas starting together.
const MIGRATION_LOCK: i64 = 0x7461_736b_7374_7265;

/// How many events a read fetches from the database when its reader is behind (the rest go
/// into the cache for its next read).
const READ_AHEAD: usize = 4096;

/// The payload of the notification of a retention sweep that moved floors or removed tasks:
/// every replica drops its cache of events.
const RETENTION_NOTICE: &str = "retention";

/// The payload of the notification of a task's end: every replica's local lookups read the
/// rows again (the replica that held the task's lease learns that it ended).
const END_NOTICE: &str = "end";

/// The most chunk rows one statement of a retention sweep deletes.
const SWEEP_CHUNK: i64 = 1_000;

/// The most appends one group commit takes.
const MAX_BATCH: usize = 16_384;

/// The most bytes of appends queued and not yet committed before producers wait.
const MAX_PENDING_BYTES: usize = 32 << 20;

/// The fence of one group commit and the moves of the tasks' rows (`$1..$6`), the rows the
/// count limit pushes out, one notification; the first statement of the batch's transaction,
/// which then copies the events of the tasks that passed ([`COPY_EVENTS`]). Returns the ids of
/// the tasks whose row moved (their rows stay locked until the transaction ends, so nothing
/// else moves them in between).
const FENCE_BATCH: &str = "\
WITH d AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[])
        AS d(task_id, expect, next, lo, floor)
), moved AS (
    UPDATE taskstream_tasks t SET next_seq = d.next, floor = GREATEST(t.floor, d.floor)
    FROM d
    WHERE t.task_id = d.task_id AND t.owner = $6
        AND t.status IN ('working', 'input_required') AND t.next_seq = d.expect
    RETURNING t.task_id
), gone AS (
    DELETE FROM taskstream_chunks x USING d
    WHERE x.task_id = d.task_id AND d.floor > d.lo AND x.first_seq < d.floor
        AND x.end_seq <= d.floor AND d.task_id IN (SELECT task_id FROM moved)
)
SELECT task_id, pg_notify('taskstream', '') IS NULL FROM moved";

/// The events of a group commit, a chunk row per task (or more, past
/// [`pg_chunk::MAX_EVENTS`]), in PostgreSQL's binary copy format (no text or array to parse on
/// the database's side), in the transaction whose [`FENCE_BATCH`] let their tasks through.
const COPY_CHUNKS: &str = "COPY taskstream_chunks (task_id, first_seq, end_seq, first_at, \
     last_at, events) FROM STDIN (FORMAT binary)";

/// The column types of [`COPY_CHUNKS`].
const COPY_TYPES: [postgres::types::Type; 6] = [
    postgres::types::Type::TEXT,
    postgres::types::Type::INT8,
    postgres::types::Type::INT8,
    postgres::types::Type::INT8,
    postgres::types::Type::INT8,
    postgres::types::Type::BYTEA,
];

/// Inserts one chunk row (a creation's or an end's single event).
const INSERT_CHUNK: &str = "INSERT INTO taskstream_chunks \
     (task_id, first_seq, end_seq, first_at, last_at, events) VALUES ($1, $2, $3, $4, $5, $6)";

/// Deletes a task's chunks wholly below a floor (`$2`).
const DELETE_BELOW: &str =
    "DELETE FROM taskstream_chunks WHERE task_id = $1 AND first_seq < $2 AND end_seq <= $2";

/// What this replica knows of a task it writes (it holds the task's lease).
struct Head {
    /// The seq the next queued append takes.
    next: i64,
    /// The floor as of the last batch taken (retention by count).
    floor: i64,
    /// The seq after the last append whose batch was answered (committed or refused).
    done: i64,
    /// Why the task's appends are refused from now on, once a batch of it was.
    refused: Option<Refusal>,
    /// What the local lookup answers from (see [`Replica::local_lookup`]).
    known: Known,
}

/// What a replica that holds a task's lease knows of the task's row without reading it: the
/// committed range (its writer moves it, after each batch that committed and was cached) and
/// the record (a running task's record changes only when it ends). Trusted while no floor
/// moved and no end happened elsewhere: `epoch` is the [`Replica::epoch`] it was last known
/// to be exact at.
struct Known {
    /// The task's record, when this replica created it (`None`: lookups read the row).
    record: Option<Box<TaskRecord>>,
    /// The seq after the last event of a batch that committed.
    next: i64,
    /// The floor as of the last batch that committed (or as last read from the row).
    floor: i64,
    /// The epoch at which `floor` was at least the row's; `None`: never trusted.
    epoch: Option<u64>,
}

impl Head {
    fn new(next: i64, floor: i64) -> Head {
        Head {
            next,
            floor,
            done: next,
            refused: None,
            known: Known {
                record: None,
                next,
                floor,
                epoch: None,
            },
        }
    }

    /// Appends queued and not answered yet.
    fn pending(&self) -> i64 {
        self.next - self.done
    }
}

/// Why a task's batch was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Refusal {
    /// The task is gone.
    Unknown,
    /// The task ended, or another replica took it over.
    Terminal,
    /// The batch could not commit (the database's error).
    Lost(String),
}

impl Refusal {
    fn to_error(&self) -> AppendError {
        match self {
            Refusal::Unknown => AppendError::UnknownTask,
            Refusal::Terminal => AppendError::Terminal,
            Refusal::Lost(e) => {
                AppendError::Storage(StoreError::Database(format!("cannot append events: {e}")))
            }
        }
    }
}

/// The outcome of a batch for one task.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Committed,
    Refused(Refusal),
}

/// One task's part of a batch.
struct TaskSpan {
    task_id: String,
    /// The seq its row must be at (the fence).
    expect: i64,
    /// Its next seq after the batch.
    next: i64,
    /// Its floor before and after the batch.
    lo: i64,
    floor: i64,
}

/// A connection of the pool taken by [`Replica::pool_slot`].
/// The pool's connections in use and the callers waiting for one.
#[derive(Default)]
struct PoolCount {
    in_use: usize,
    waiting: usize,
}

struct PoolSlot<'a>(&'a (Mutex<PoolCount>, Condvar));

impl Drop for PoolSlot<'_> {
    fn drop(&mut self) {
        let (count, cond) = self.0;
        lock(count).in_use -= 1;
        cond.notify_one();
    }
}

/// One writer's queue and what wakes it (and the producers waiting for room).
struct Lane {
    pipe: Mutex<Pipe>,
    cond: Condvar,
}

/// The appends queued for the writer and the heads of the tasks this replica writes.
#[derive(Default)]
struct Pipe {
    jobs: Vec<Job>,
    bytes: usize,
    heads: HashMap<String, Head>,
    /// Whether the lane's writer waits for work (then a new job wakes it).
    writer_idle: bool,
}

fn refuse_all(tasks: &[TaskSpan], error: &str) -> HashMap<String, Verdict> {
    tasks
        .iter()
        .map(|t| {
            (
                t.task_id.clone(),
                Verdict::Refused(Refusal::Lost(error.to_owned())),
            )
        })
        .collect()
}

/// How to open a [`PgStore`].
#[derive(Clone, Debug)]
pub struct PgConfig {
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DB[?…]`.
    pub url: String,
    /// What is retained (the same rules as a data dir).
    pub retention: RetentionPolicy,
    /// After how long without a heartbeat a replica's running tasks are ended `failed`.
    pub lease_timeout: Duration,
    /// How many connections reads (replays, `tasks/get`, lookups) may hold at once, beside
    /// the writers' and the listener's own ([`DEFAULT_POOL_SIZE`]).
    pub pool_size: usize,
    /// How many writer connections commit batches side by side, each taking the appends of
    /// its share of the tasks ([`DEFAULT_WRITERS`]).
    pub writers: usize,
    /// How many bytes of committed events the replica keeps to answer reads without the
    /// database (0: none; [`DEFAULT_CACHE_BYTES`]).
    pub cache_bytes: usize,
}

/// The default [`PgConfig::pool_size`].
pub const DEFAULT_POOL_SIZE: usize = crate::model::DEFAULT_PG_POOL_SIZE;

/// The default [`PgConfig::writers`].
pub const DEFAULT_WRITERS: usize = crate::model::DEFAULT_PG_WRITERS;

/// The default [`PgConfig::cache_bytes`] (`--store-cache-mb`).
pub const DEFAULT_CACHE_BYTES: usize = crate::model::DEFAULT_PG_CACHE_MB << 20;

/// A pooled connection and the statements it prepared (each prepared once per connection:
/// a statement given as text costs a round trip of its own to prepare, every time).
pub(crate) struct Conn {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
}

impl Conn {
    fn new(client: Client) -> Conn {
        Conn {
            client,
            prepared: HashMap::new(),
        }
    }

    /// `sql`, prepared on this connection (once).
    fn prep(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.prepared.insert(sql, s.clone());
        Ok(s)
    }
}

impl std::ops::Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// Reads a task's row.
const LOOKUP: &str = "SELECT record, floor, next_seq FROM taskstream_tasks WHERE task_id = $1";

/// Reads the chunks that hold a task's events from `$2` to before `$3` (by the primary key:
/// the chunk holding `$2` is the last to start at or before it), with the task's floor.
const READ_CHUNKS: &str = "SELECT c.first_seq, c.events, t.floor \
     FROM taskstream_tasks t JOIN taskstream_chunks c ON c.task_id = t.task_id \
     WHERE t.task_id = $1 AND c.first_seq < $3::bigint AND c.end_seq > $2::bigint \
     AND c.first_seq >= COALESCE((SELECT max(first_seq) FROM taskstream_chunks \
         WHERE task_id = $1 AND first_seq <= $2), 0) \
     ORDER BY c.first_seq";

/// The PostgreSQL store (see the module docs). Dropping it stops its threads; its running
/// tasks stay owned by its replica id until its lease expires.
pub struct PgStore {
    inner: Arc<Replica>,
    threads: Vec<JoinHandle<()>>,
}

struct Replica {
    conn: postgres::Config,
    /// Host, port and database, for messages (never the password).
    target: String,
    retention: RetentionPolicy,
    lease_timeout: Duration,
    replica: String,
    /// Idle connections of the pool.
    pool: Mutex<Vec<Conn>>,
    /// Connections of the pool in use (at most `pool_size`; a caller past it waits) and the
    /// callers waiting.
    in_use: (Mutex<PoolCount>, Condvar),
    /// Callers that ever waited for a connection of the pool.
    pool_waits: AtomicU64,
    pool_size: usize,
    changes: ChangeSignal,
    /// The writers' queues; a task's appends always go through the same one (by its id's
    /// hash), so its batches commit in order while other tasks' commit beside them.
    lanes: Vec<Lane>,
    /// Committed events, consulted before the database.
    cache: EventCache,
    /// Moves whenever a floor may have moved or a task may have ended without this replica's
    /// writer knowing (a retention sweep, another replica's end, a listener reconnect): the
    /// local lookups known at an older epoch are not answered until the row was read again.
    epoch: AtomicU64,
    stop: AtomicBool,
    stop_signal: (Mutex<bool>, Condvar),
    /// When the store opened: the origin of `renewed`.
    opened: Instant,
    /// Milliseconds after `opened` of the last heartbeat renewal that reached the database.
    renewed: AtomicU64,
    /// Events per committed batch, and each batch's commit time (for metrics).
    batch_events: crate::stats::AtomicHistogram,
    commit_micros: crate::stats::AtomicHistogram,
}

/// One append queued for the writer, its seq taken.
struct Job {
    task_id: String,
    seq: i64,
    event_type: String,
    payload: String,
    at: Millis,
    /// Its share of [`Pipe::bytes`].
    size: usize,
    /// Where to answer an append that waits for its commit.
    reply: Option<mpsc::SyncSender<Result<(), AppendError>>>,
}

/// A database error as the operator reads it: the server's message and SQLSTATE when it sent
/// one (`postgres::Error`'s own text is only "db error"), else the connection's error.
fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} ({})", db.message(), db.code().code());
        if let Some(h) = db.hint() {
            s.push_str("; hint: ");
            s.push_str(h);
        }
        return s;
    }
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

fn db_error(context: &str, e: &postgres::Error) -> StoreError {
    StoreError::Database(format!("{context}: {}", describe(e)))
}

fn seq_of(v: i64) -> Result<Seq, StoreError> {
    u64::try_from(v)
        .ok()
        .and_then(Seq::new)
        .ok_or_else(|| StoreError::Corrupt(format!("seq {v} out of range")))
}

fn i64_of(seq: Seq) -> i64 {
    i64::try_from(seq.get()).unwrap_or(i64::MAX)
}

fn millis_i64(m: Millis) -> i64 {
    i64::try_from(m.0).unwrap_or(i64::MAX)
}

/// The compact payload of an event, validated as the data dir validates it.
fn compact_payload(
    event_type: &str,
    payload: &[u8],
    limit: Option<u32>,
) -> Result<String, AppendError> {
    EventType::new(event_type).map_err(AppendError::InvalidType)?;
    let p = Payload::new(payload).map_err(AppendError::InvalidPayload)?;
    if let Some(limit) = limit {
        if p.compact_len() > limit as usize {
            return Err(AppendError::PayloadTooLarge {
                size: p.compact_len(),
                limit,
            });
        }
    }
    let bytes = match p.as_compact() {
        Some(text) => text.to_vec(),
        None => {
            let mut buf = vec![0; p.compact_len()];
            p.write_compact(&mut buf)
                .map_err(AppendError::InvalidPayload)?;
            buf
        }
    };
    String::from_utf8(bytes)
        .map_err(|_| AppendError::Storage(StoreError::Corrupt("payload is not UTF-8".into())))
}

/// The payload of a task's first event.
const WORKING_PAYLOAD: &str = r#"{"status":"working"}"#;

/// Inserts a task's status event of seq `seq` (a creation's, an end's) as a chunk row of its
/// own.
fn insert_status_event(
    tx: &mut postgres::Transaction<'_>,
    task_id: &str,
    seq: i64,
    at: i64,
    payload: &str,
) -> Result<u64, postgres::Error> {
    let mut c = ChunkWriter::new(seq);
    c.push(at, STATUS_EVENT_TYPE, payload.as_bytes());
    let stored = c.encode();
    tx.execute(INSERT_CHUNK, &chunk_row(&task_id, &c, &stored))
}

/// A chunk's row as parameters, in the column order of [`INSERT_CHUNK`] and [`COPY_CHUNKS`]
/// (`stored`: its encoded events).
fn chunk_row<'a>(
    task_id: &'a &'a str,
    c: &'a ChunkWriter,
    stored: &'a Vec<u8>,
) -> [&'a (dyn postgres::types::ToSql + Sync); 6] {
    [task_id, &c.first, &c.end, &c.first_at, &c.last_at, stored]
}

/// The events of `chunks` (in seq order) from `from` to before `until`, as long as their seqs
/// run on without a gap (a gap: retention ran; the run stops before it).
fn unpack_run(
    chunks: &[(i64, bytes::Bytes)],
    from: i64,
    until: i64,
) -> Result<Vec<Cached>, StoreError> {
    let wanted = usize::try_from(until.saturating_sub(from)).unwrap_or(0);
    let mut events: Vec<Cached> = Vec::with_capacity(wanted.min(READ_AHEAD));
    let mut expected = from;
    for (first, bytes) in chunks {
        if *first > expected || expected >= until {
            break;
        }
        pg_chunk::unpack(bytes, *first, expected, |seq, c| {
            if seq >= until {
                return false;
            }
            events.push(c);
            expected = seq + 1;
            true
        })?;
    }
    Ok(events)
}

/// The seq of a task's first event of seq `from` or later appended at `cutoff` or later (the
/// first chunk whose latest event is that new, unpacked; a chunk whose events past `from`
/// are all older, which only a clock set back makes, is passed over).
fn first_fresh(
    c: &mut Conn,
    task_id: &str,
    from: i64,
    cutoff: i64,
) -> Result<Result<Option<i64>, StoreError>, postgres::Error> {
    let mut after = from;
    loop {
        let Some(row) = c.query_opt(
            "SELECT first_seq, end_seq, events FROM taskstream_chunks \
             WHERE task_id = $1 AND end_seq > $2 AND last_at >= $3 \
             AND first_seq >= COALESCE((SELECT max(first_seq) FROM taskstream_chunks \
                 WHERE task_id = $1 AND first_seq <= $2), 0) \
             ORDER BY first_seq LIMIT 1",
            &[&task_id, &after, &cutoff],
        )?
        else {
            return Ok(Ok(None));
        };
        let (first, end, stored): (i64, i64, &[u8]) = (row.get(0), row.get(1), row.get(2));
        let found = pg_chunk::decode(stored)
            .and_then(|e| pg_chunk::first_at_or_after(&e, first, after, cutoff));
        match found {
            Ok(Some(seq)) => return Ok(Ok(Some(seq))),
            Ok(None) => after = end,
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// The running statuses, as stored.
const RUNNING: &str = "('working', 'input_required')";

impl PgStore {
    /// Connects, applies the migrations the database lacks (refusing a newer schema),
    /// registers this replica and starts its writer, listener and lease threads.
    ///
    /// # Errors
    /// [`StoreError::Database`] naming the cause: a URL that does not parse, a database that
    /// cannot be reached, a user without the rights it needs, a schema from a newer version.
    pub fn open(config: PgConfig) -> Result<PgStore, StoreError> {
        let mut conn: postgres::Config = config.url.parse().map_err(|e: postgres::Error| {
            StoreError::Database(format!(
                "--store is not a PostgreSQL URL (postgres://USER@HOST:PORT/DB): {}",
                describe(&e)
            ))
        })?;
        conn.connect_timeout(Duration::from_secs(5));
        conn.application_name("taskstream");
        let target = target_of(&conn);
        let replica = replica_id()?;
        let inner = Arc::new(Replica {
            conn,
            target,
            retention: config.retention,
            lease_timeout: config.lease_timeout.max(Duration::from_millis(300)),
            replica,
            pool: Mutex::new(Vec::new()),
            in_use: (Mutex::new(PoolCount::default()), Condvar::new()),
            pool_waits: AtomicU64::new(0),
            cache: EventCache::new(config.cache_bytes),
            epoch: AtomicU64::new(0),
            pool_size: config.pool_size.max(1),
            changes: ChangeSignal::default(),
            lanes: (0..config.writers.clamp(1, 16))
                .map(|_| Lane {
                    pipe: Mutex::new(Pipe::default()),
                    cond: Condvar::new(),
                })
                .collect(),
            stop: AtomicBool::new(false),
            stop_signal: (Mutex::new(false), Condvar::new()),
            opened: Instant::now(),
            renewed: AtomicU64::new(0),
            batch_events: crate::stats::AtomicHistogram::new(&crate::stats::BATCH_BOUNDS),
            commit_micros: crate::stats::AtomicHistogram::new(&crate::stats::MICROS_BOUNDS),
        });
        let mut client = inner.connect()?;
        migrate(&mut client).map_err(|e| match e {
            Migration::Newer(v) => StoreError::Database(format!(
                "the database's taskstream schema is version {v}, newer than this server's \
                 ({SCHEMA_VERSION}); run a server at least as new as the one that wrote it"
            )),
            Migration::Db(e) => {
                let rights = e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE);
                StoreError::Database(format!(
                    "cannot set up the schema in {}{}: {}",
                    inner.target,
                    if rights {
                        " (the user lacks the rights to create or write its tables)"
                    } else {
                        ""
                    },
                    describe(&e)
                ))
            }
        })?;
        client
            .execute(
                "INSERT INTO taskstream_replicas (id) VALUES ($1)",
                &[&inner.replica],
            )
            .map_err(|e| db_error("cannot register this replica", &e))?;
        lock(&inner.pool).push(Conn::new(client));
        let mut threads = Vec::new();
        for lane in 0..inner.lanes.len() {
            let i = Arc::clone(&inner);
            let t = std::thread::Builder::new()
                .name("pg-writer".into())
                .spawn(move || i.run_writer(lane))
                .map_err(|e| StoreError::Database(format!("cannot start a thread: {e}")))?;
            threads.push(t);
        }
        for (name, run) in [
            ("pg-listen", Replica::run_listener as fn(&Replica)),
            ("pg-lease", Replica::run_lease),
        ] {
            let i = Arc::clone(&inner);
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || run(&i))
                .map_err(|e| StoreError::Database(format!("cannot start a thread: {e}")))?;
            threads.push(t);
        }
        Ok(PgStore { inner, threads })
    }

    /// This replica's id (the owner its tasks' rows name).
    pub fn replica_id(&self) -> &str {
        &self.inner.replica
    }

    /// Where the store is: host, port and database (no password).
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// Ends `failed` every running task whose owner's lease expired; returns how many. (The
    /// lease thread does this every quarter of the lease timeout.)
    ///
    /// # Errors
    /// [`StoreError::Database`] if the database cannot be reached.
    pub fn reap(&self) -> Result<usize, StoreError> {
        self.inner.reap()
    }

    /// What the replica's cache of committed events holds now.
    pub fn cache_usage(&self) -> CacheUsage {
        self.inner.cache.usage()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        {
            let (flag, cond) = &self.inner.stop_signal;
            *lock(flag) = true;
            cond.notify_all();
        }
        for lane in &self.inner.lanes {
            // Under the lock, so a writer between its check and its wait cannot miss it.
            let _g = lock(&lane.pipe);
            lane.cond.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn target_of(conn: &postgres::Config) -> String {
    let host = conn
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(s) => s.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = conn.get_ports().first().copied().unwrap_or(5432);
    let db = conn.get_dbname().or(conn.get_user()).unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

fn replica_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Database(format!("no randomness for a replica id: {e}")))?;
    Ok(format!("{:032x}", u128::from_le_bytes(bytes)))
}

enum Migration {
    Newer(i32),
    Db(postgres::Error),
}

impl From<postgres::Error> for Migration {
    fn from(e: postgres::Error) -> Self {
        Migration::Db(e)
    }
}

/// Applies every migration the database lacks, in one transaction under an advisory lock
/// (replicas starting together migrate once).
fn migrate(client: &mut Client) -> Result<(), Migration> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS taskstream_schema (version integer NOT NULL)")?;
    let version: i32 = match tx.query_opt("SELECT version FROM taskstream_schema", &[])? {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO taskstream_schema (version) VALUES (0)", &[])?;
            0
        }
    };
    if version > SCHEMA_VERSION {
        return Err(Migration::Newer(version));
    }
    for m in MIGRATIONS
        .iter()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        tx.batch_execute(m)?;
    }
    tx.execute(
        "UPDATE taskstream_schema SET version = $1",
        &[&SCHEMA_VERSION],
    )?;
    tx.commit()?;
    Ok(())
}

fn view_of(record: &str, floor: i64, next: i64) -> Result<TaskView, StoreError> {
    let record: TaskRecord = serde_json::from_str(record)
        .map_err(|e| StoreError::Corrupt(format!("task record: {e}")))?;
    let retained = Retained::new(seq_of(floor)?, seq_of(next)?)
        .ok_or_else(|| StoreError::Corrupt(format!("task {}: floor past next", record.task_id)))?;
    Ok(TaskView { record, retained })
}

impl Replica {
    /// The writer's queue that takes `task_id`'s appends.
    fn lane(&self, task_id: &str) -> &Lane {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(task_id, &mut h);
        let n = self.lanes.len().max(1) as u64;
        let i = usize::try_from(std::hash::Hasher::finish(&h) % n).unwrap_or(0);
        &self.lanes[i.min(self.lanes.len() - 1)]
    }

    fn connect(&self) -> Result<Client, StoreError> {
        let mut client = self.conn.connect(NoTls).map_err(|e| {
            StoreError::Database(format!(
                "cannot connect to the database at {}: {}",
                self.target,
                describe(&e)
            ))
        })?;
        client
            .batch_execute("SET synchronous_commit = on")
            .map_err(|e| db_error("cannot set up a connection", &e))?;
        Ok(client)
    }

    /// Runs `f` on a pooled connection (a fresh one if none is idle). A connection that
    /// failed is dropped, not pooled; after a connection-level failure every idle connection
    /// is dropped too (the database restarted). A `write` first checks that a pooled
    /// connection still answers, and never runs twice (a write cut at `COMMIT` may have
    /// committed); a read runs once more on a fresh connection after a connection failure.
    fn with<T>(
        &self,
        context: &str,
        write: bool,
        f: impl FnMut(&mut Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let _slot = self.pool_slot();
        self.with_unbounded(context, write, f)
    }

    /// [`with`](Self::with) without waiting for room in the pool (the lease's heartbeat,
    /// which must not wait behind reads).
    fn with_unbounded<T>(
        &self,
        context: &str,
        write: bool,
        mut f: impl FnMut(&mut Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut client = loop {
            let pooled = lock(&self.pool).pop();
            match pooled {
                Some(mut c) if !c.is_closed() => {
                    if write && c.is_valid(Duration::from_secs(2)).is_err() {
                        continue;
                    }
                    break c;
                }
                Some(_) => {}
                None => break Conn::new(self.connect()?),
            }
        };
        match f(&mut client) {
            Ok(v) => {
                self.put_back(client);
                Ok(v)
            }
            Err(e) if e.as_db_error().is_some() && !client.is_closed() => {
                self.put_back(client);
                Err(db_error(context, &e))
            }
            Err(e) => {
                drop(client);
                lock(&self.pool).clear();
                if write {
                    return Err(db_error(context, &e));
                }
                let mut fresh = Conn::new(self.connect()?);
                let v = f(&mut fresh).map_err(|e| db_error(context, &e));
                if !fresh.is_closed() {
                    self.put_back(fresh);
                }
                v
            }
        }
    }

    /// Waits for a connection of the pool to be free and takes it (given back on drop).
    fn pool_slot(&self) -> PoolSlot<'_> {
        let (count, cond) = &self.in_use;
        let mut n = lock(count);
        if n.in_use >= self.pool_size {
            self.pool_waits.fetch_add(1, Ordering::Relaxed);
            n.waiting += 1;
            while n.in_use >= self.pool_size {
                n = cond
                    .wait(n)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            n.waiting -= 1;
        }
        n.in_use += 1;
        PoolSlot(&self.in_use)
    }

    fn put_back(&self, client: Conn) {
        let mut pool = lock(&self.pool);
        if pool.len() < self.pool_size {
            pool.push(client);
        }
    }

    fn max_events(&self) -> i64 {
        i64::from(self.retention.max_events.max(1))
    }

    fn create_task(&self, record: &TaskRecord, now: Millis) -> Result<(), AppendError> {
        let text = serde_json::to_string(record)
            .map_err(|e| AppendError::Storage(StoreError::Corrupt(format!("task record: {e}"))))?;
        let created = millis_i64(record.created_at);
        let at = millis_i64(now);
        let epoch = self.epoch.load(Ordering::SeqCst);
        let inserted = self
            .with("cannot create a task", true, |c| {
                let mut tx = c.transaction()?;
                let n = tx.execute(
                    "INSERT INTO taskstream_tasks \
                     (task_id, principal, record, status, owner, floor, next_seq, created_at) \
                     VALUES ($1, $2, $3, 'working', $4, 0, 1, $5) ON CONFLICT DO NOTHING",
                    &[
                        &record.task_id,
                        &record.principal,
                        &text,
                        &self.replica,
                        &created,
                    ],
                )?;
                if n == 0 {
                    return Ok(false);
                }
                insert_status_event(&mut tx, &record.task_id, 0, at, WORKING_PAYLOAD)?;
                tx.execute("SELECT pg_notify('taskstream', '')", &[])?;
                tx.commit()?;
                Ok(true)
            })
            .map_err(AppendError::Storage)?;
        if !inserted {
            return Err(AppendError::Storage(StoreError::DuplicateTask(
                record.task_id.clone(),
            )));
        }
        // Read before the row was written: an epoch moved since (a sweep, an end elsewhere)
        // leaves the local lookup untrusted until the row is read again.
        let mut head = Head::new(1, 0);
        head.known.record = Some(Box::new(record.clone()));
        head.known.epoch = Some(epoch);
        lock(&self.lane(&record.task_id).pipe)
            .heads
            .insert(record.task_id.clone(), head);
        self.cache.forget(&record.task_id);
        self.cache.insert(
            &record.task_id,
            0,
            0,
            [Cached::new(
                now,
                STATUS_EVENT_TYPE,
                WORKING_PAYLOAD.as_bytes(),
            )],
        );
        self.changes.notify();
        Ok(())
    }

    fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        let payload = status.event_payload(message.as_deref());
        let at = millis_i64(now);
        let max = self.max_events();
        // The terminal event follows every event this replica queued for the task.
        self.drain_task(task_id);
        let outcome = self
            .with("cannot end a task", true, |c| {
                let mut tx = c.transaction()?;
                let Some(row) = tx.query_opt(
                    "SELECT record, status, next_seq, floor FROM taskstream_tasks \
                     WHERE task_id = $1 FOR UPDATE",
                    &[&task_id],
                )?
                else {
                    return Ok(Err(AppendError::UnknownTask));
                };
                let text: String = row.get(0);
                let current: String = row.get(1);
                let seq: i64 = row.get(2);
                let floor: i64 = row.get(3);
                if current != "working" && current != "input_required" {
                    return Ok(Err(AppendError::Terminal));
                }
                let mut record: TaskRecord = match serde_json::from_str(&text) {
                    Ok(r) => r,
                    Err(e) => {
                        return Ok(Err(AppendError::Storage(StoreError::Corrupt(format!(
                            "task record: {e}"
                        )))))
                    }
                };
                record.status = status;
                record.status_message.clone_from(&message);
                record.result.clone_from(&result);
                record.error.clone_from(&error);
                record.last_updated_at = now;
                let text = match serde_json::to_string(&record) {
                    Ok(t) => t,
                    Err(e) => {
                        return Ok(Err(AppendError::Storage(StoreError::Corrupt(format!(
                            "task record: {e}"
                        )))))
                    }
                };
                let new_floor = floor.max(seq + 1 - max);
                tx.execute(
                    "UPDATE taskstream_tasks SET record = $2, status = $3, next_seq = $4, \
                     floor = $5, ended_at = $6 WHERE task_id = $1",
                    &[
                        &task_id,
                        &text,
                        &status.as_str(),
                        &(seq + 1),
                        &new_floor,
                        &at,
                    ],
                )?;
                insert_status_event(&mut tx, task_id, seq, at, &payload)?;
                if new_floor > floor {
                    tx.execute(DELETE_BELOW, &[&task_id, &new_floor])?;
                }
                // Every replica's local lookups stop answering (one of them may hold the
                // task's lease: a cancellation through another replica, a lease reaped).
                tx.execute("SELECT pg_notify('taskstream', $1)", &[&END_NOTICE])?;
                tx.commit()?;
                Ok(Ok((seq, new_floor)))
            })
            .map_err(AppendError::Storage);
        if !matches!(
            outcome,
            Err(AppendError::Storage(_)) | Ok(Err(AppendError::Storage(_)))
        ) {
            lock(&self.lane(task_id).pipe).heads.remove(task_id);
        }
        let (seq, floor) = outcome??;
        self.cache.insert(
            task_id,
            floor,
            seq,
            [Cached::new(now, STATUS_EVENT_TYPE, payload.as_bytes())],
        );
        self.changes.notify();
        seq_of(seq).map_err(AppendError::Storage)
    }

    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        if let Some(view) = self.local_lookup(task_id) {
            return Ok(Some(view));
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let row = self.with("cannot read a task", false, |c| {
            let st = c.prep(LOOKUP)?;
            c.query_opt(&st, &[&task_id])
        })?;
        match &row {
            // The floor the caller decides from: no event below it is served from now on.
            Some(r) => self.cache.raise_floor(task_id, r.get(1)),
            None => self.cache.forget(task_id),
        }
        let view = row
            .map(|r| view_of(r.get(0), r.get(1), r.get(2)))
            .transpose()?;
        if let Some(v) = &view {
            self.trust(task_id, v, epoch);
        }
        Ok(view)
    }

    /// A running task's view answered from what this replica knows, without the database:
    /// only while it holds the task's lease (its writer moves the committed range), created
    /// the task here (it has the record), no batch of it was refused, and nothing moved the
    /// epoch since the range was last known exact. The range is never one the database has
    /// not committed (moved after the commit), and the floor never lower than the row's
    /// (a sweep anywhere, or an end elsewhere, moves the epoch first; see
    /// [`epoch`](Replica::epoch)).
    fn local_lookup(&self, task_id: &str) -> Option<TaskView> {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let p = lock(&self.lane(task_id).pipe);
        let h = p.heads.get(task_id)?;
        if h.refused.is_some() || h.known.epoch != Some(epoch) {
            return None;
        }
        let record = h.known.record.as_deref()?;
        let retained = Retained::new(seq_of(h.known.floor).ok()?, seq_of(h.known.next).ok()?)?;
        Some(TaskView {
            record: record.clone(),
            retained,
        })
    }

    /// After a read of the task's row that began at `epoch`: the local lookup answers again
    /// if the row says the task still runs (the floor raised to the row's) and the epoch did
    /// not move meanwhile.
    fn trust(&self, task_id: &str, view: &TaskView, epoch: u64) {
        if view.record.status.is_terminal() {
            return;
        }
        let mut p = lock(&self.lane(task_id).pipe);
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return;
        }
        if let Some(h) = p.heads.get_mut(task_id) {
            if h.known.record.is_some() {
                let floor = i64_of(view.retained.earliest());
                h.known.floor = h.known.floor.max(floor);
                h.known.next = h.known.next.max(h.known.floor);
                h.known.epoch = Some(epoch);
            }
        }
    }

    /// Local lookups answered so far stop (until each task's row is read again).
    fn distrust(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    fn tasks(&self) -> Result<Vec<TaskView>, StoreError> {
        let rows = self.with("cannot list tasks", false, |c| {
            c.query(
                "SELECT record, floor, next_seq FROM taskstream_tasks \
                 ORDER BY created_at, task_id",
                &[],
            )
        })?;
        rows.iter()
            .map(|r| view_of(r.get(0), r.get(1), r.get(2)))
            .collect()
    }

    /// Reads up to `max` events from `from`: from the cache when it holds `from` (what it
    /// has, maybe fewer than `max`: the caller reads again for the rest), else from the
    /// database, the chunks of [`READ_AHEAD`] events per round trip, the events past `max`
    /// kept in the cache for the next read.
    fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: &mut dyn FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        if max == 0 {
            return Ok(0);
        }
        let mut cached = Vec::new();
        self.cache.read(task_id, from, max, &mut cached);
        if !cached.is_empty() {
            let n = cached.len();
            for e in cached {
                push(e);
            }
            return Ok(n);
        }
        let fetch = if self.cache.enabled() {
            max.max(READ_AHEAD)
        } else {
            max
        };
        let fetch_i = i64::try_from(fetch).unwrap_or(i64::MAX);
        let from_i = i64_of(from);
        let until = from_i.saturating_add(fetch_i);
        // A chunk is unpacked once out of its row into one buffer; its events share it, in the
        // events the read hands out and in the ones the cache keeps.
        let (chunks, floor) = self.with("cannot read events", false, |c| {
            let st = c.prep(READ_CHUNKS)?;
            let mut rows = c.query_raw(
                &st,
                [
                    &task_id as &(dyn postgres::types::ToSql + Sync),
                    &from_i,
                    &until,
                ],
            )?;
            let mut chunks: Vec<(i64, Result<bytes::Bytes, StoreError>)> = Vec::new();
            let mut floor = 0;
            while let Some(r) = rows.next()? {
                floor = r.try_get(2)?;
                chunks.push((r.try_get(0)?, pg_chunk::decode(r.try_get(1)?)));
            }
            Ok((chunks, floor))
        })?;
        // Below the floor nothing is handed out: a reader that decided from an older floor
        // gets nothing and looks the task up again.
        if from_i < floor {
            return Ok(0);
        }
        let chunks = chunks
            .into_iter()
            .map(|(first, c)| c.map(|c| (first, c)))
            .collect::<Result<Vec<_>, _>>()?;
        let events = unpack_run(&chunks, from_i, until)?;
        let mut n = 0;
        for (i, c) in (from_i..).zip(events.iter().take(max)) {
            push(RawEvent::shared(
                seq_of(i)?,
                c.at,
                c.bytes.clone(),
                c.type_len,
            ));
            n += 1;
        }
        let keep = if self.cache.enabled() {
            events
        } else {
            Vec::new()
        };
        if !keep.is_empty() {
            self.cache.insert(task_id, floor, from_i, keep);
        }
        Ok(n)
    }

    /// The head of a task this replica writes, loaded from its row if this replica has not
    /// written it yet. `Err` if the task is unknown or not running under this replica.
    fn load_head(&self, task_id: &str) -> Result<(), AppendError> {
        let row = self
            .with("cannot read a task", false, |c| {
                c.query_opt(
                    &format!(
                        "SELECT next_seq, floor, owner = $2 AND status IN {RUNNING} \
                         FROM taskstream_tasks WHERE task_id = $1"
                    ),
                    &[&task_id, &self.replica],
                )
            })
            .map_err(AppendError::Storage)?;
        let Some(row) = row else {
            return Err(AppendError::UnknownTask);
        };
        let ours: Option<bool> = row.get(2);
        if ours != Some(true) {
            return Err(AppendError::Terminal);
        }
        let (next, floor): (i64, i64) = (row.get(0), row.get(1));
        lock(&self.lane(task_id).pipe)
            .heads
            .entry(task_id.to_owned())
            .or_insert_with(|| Head::new(next, floor));
        Ok(())
    }

    /// Queues an append for the writer: takes the task's next seq (this replica holds the
    /// task's lease, so it alone moves the seq while the task runs) and returns it at once
    /// (`wait` false) or once its batch committed (`wait` true). An emitted event is visible
    /// only once its batch committed; a batch that cannot commit makes the task's next append
    /// fail, so a producer never continues past a lost event.
    fn enqueue(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        wait: bool,
    ) -> Result<Seq, AppendError> {
        let payload = compact_payload(event_type, payload, Some(self.retention.max_payload_bytes))?;
        let size = payload.len() + event_type.len() + task_id.len() + 64;
        let mut loaded = false;
        let lane = self.lane(task_id);
        let (seq, rx, wake) = loop {
            let mut p = lock(&lane.pipe);
            // Backpressure: a producer faster than the database waits for room.
            while p.bytes > MAX_PENDING_BYTES && !self.stop.load(Ordering::SeqCst) {
                p = lane
                    .cond
                    .wait(p)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if self.stop.load(Ordering::SeqCst) {
                return Err(AppendError::Storage(StoreError::Failed));
            }
            let Some(head) = p.heads.get_mut(task_id) else {
                drop(p);
                if loaded {
                    return Err(AppendError::Terminal);
                }
                self.load_head(task_id)?;
                loaded = true;
                continue;
            };
            if let Some(refusal) = &head.refused {
                let e = refusal.to_error();
                if matches!(refusal, Refusal::Terminal | Refusal::Unknown) && head.pending() == 0 {
                    // Forgotten: the next append reads the row again.
                    p.heads.remove(task_id);
                }
                return Err(e);
            }
            let seq = head.next;
            head.next += 1;
            let seq_checked = seq_of(seq).map_err(AppendError::Storage)?;
            let (reply, rx) = if wait {
                let (tx, rx) = mpsc::sync_channel(1);
                (Some(tx), Some(rx))
            } else {
                (None, None)
            };
            p.bytes += size;
            p.jobs.push(Job {
                task_id: task_id.to_owned(),
                seq,
                event_type: event_type.to_owned(),
                payload,
                at: now,
                size,
                reply,
            });
            // Only a writer waiting for work needs waking (a wake-up is a system call; a
            // busy writer takes this job with its next batch).
            break (seq_checked, rx, p.writer_idle);
        };
        if wake {
            lane.cond.notify_all();
        }
        match rx {
            None => Ok(seq),
            Some(rx) => match rx.recv() {
                Ok(Ok(())) => Ok(seq),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(AppendError::Storage(StoreError::Failed)),
            },
        }
    }

    /// Waits until every append queued for `task_id` so far committed or was refused (not
    /// those queued meanwhile: a producer that goes on cannot hold an end back; once the end
    /// committed, the fence refuses them).
    fn drain_task(&self, task_id: &str) {
        let lane = self.lane(task_id);
        let mut p = lock(&lane.pipe);
        let Some(target) = p.heads.get(task_id).map(|h| h.next) else {
            return;
        };
        while p.heads.get(task_id).is_some_and(|h| h.done < target) {
            p = lane
                .cond
                .wait(p)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The writer: takes every append queued while the last batch was committing and commits
    /// them in one transaction (group commit, pipelined: producers keep queueing meanwhile),
    /// then answers the appends that wait and rings the change signal.
    fn run_writer(&self, lane: usize) {
        let Some(lane) = self.lanes.get(lane) else {
            return;
        };
        let mut client: Option<Conn> = None;
        loop {
            let (batch, tasks) = {
                let mut p = lock(&lane.pipe);
                while p.jobs.is_empty() && !self.stop.load(Ordering::SeqCst) {
                    p.writer_idle = true;
                    p = lane
                        .cond
                        .wait(p)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                p.writer_idle = false;
                if p.jobs.is_empty() {
                    return;
                }
                let n = p.jobs.len().min(MAX_BATCH);
                let batch: Vec<Job> = p.jobs.drain(..n).collect();
                let max = self.max_events();
                // Per task, in the order first queued: the seq the row must be at (the
                // fence), the next seq after the batch, and the floor before and after.
                let mut order: Vec<&str> = Vec::new();
                let mut span: HashMap<&str, (i64, i64)> = HashMap::new();
                // Per task, the seq of its last checkpoint in the batch when retention keeps
                // from checkpoints (CP-03): the floor moves to it.
                let mut checkpoint: HashMap<&str, i64> = HashMap::new();
                for j in &batch {
                    span.entry(j.task_id.as_str())
                        .and_modify(|s| s.1 = j.seq + 1)
                        .or_insert_with(|| {
                            order.push(j.task_id.as_str());
                            (j.seq, j.seq + 1)
                        });
                    if self.retention.drops_before(&j.event_type) {
                        checkpoint.insert(j.task_id.as_str(), j.seq);
                    }
                }
                let mut tasks = Vec::with_capacity(order.len());
                for id in order {
                    let (expect, next) = span[id];
                    let at_least = (next - max).max(checkpoint.get(id).copied().unwrap_or(0));
                    let (lo, floor) = match p.heads.get_mut(id) {
                        Some(h) => {
                            let lo = h.floor;
                            h.floor = h.floor.max(at_least);
                            (lo, h.floor)
                        }
                        None => (0, 0.max(at_least)),
                    };
                    tasks.push(TaskSpan {
                        task_id: id.to_owned(),
                        expect,
                        next,
                        lo,
                        floor,
                    });
                }
                (batch, tasks)
            };
            let started = Instant::now();
            let outcome = self.commit_batch(&mut client, &batch, &tasks);
            self.commit_micros
                .record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            self.batch_events.record(batch.len() as u64);
            let mut wrote = false;
            let (replies, mut committed): (Vec<_>, _) = {
                let mut p = lock(&lane.pipe);
                let mut freed = 0;
                for t in &tasks {
                    let verdict = outcome
                        .get(&t.task_id)
                        .cloned()
                        .unwrap_or(Verdict::Committed);
                    if let Some(h) = p.heads.get_mut(&t.task_id) {
                        h.done = t.next;
                        match verdict {
                            Verdict::Committed => wrote = true,
                            Verdict::Refused(r) => {
                                if h.refused.is_none() {
                                    h.refused = Some(r);
                                }
                            }
                        }
                    } else if verdict == Verdict::Committed {
                        wrote = true;
                    }
                }
                let mut committed: HashMap<String, (i64, Vec<Cached>)> = HashMap::new();
                let replies = batch
                    .into_iter()
                    .filter_map(|j| {
                        freed += j.size;
                        let r = match outcome.get(&j.task_id) {
                            None | Some(Verdict::Committed) => Ok(()),
                            Some(Verdict::Refused(r)) => Err(r.to_error()),
                        };
                        if r.is_ok() && self.cache.enabled() {
                            let c = Cached::new(j.at, &j.event_type, j.payload.as_bytes());
                            match committed.get_mut(&j.task_id) {
                                Some((_, v)) => v.push(c),
                                None => {
                                    committed.insert(j.task_id, (j.seq, vec![c]));
                                }
                            }
                        }
                        j.reply.map(|tx| (tx, r))
                    })
                    .collect();
                p.bytes = p.bytes.saturating_sub(freed);
                (replies, committed)
            };
            // Only what committed (the tasks whose row the statement moved), before anyone
            // is told: a reader woken next finds it here.
            for t in &tasks {
                if let Some((from, events)) = committed.remove(&t.task_id) {
                    self.cache.insert(&t.task_id, t.floor, from, events);
                }
            }
            // The committed range the local lookup answers, moved once the events are in the
            // cache (a reader that learns of them finds them there).
            {
                let mut p = lock(&lane.pipe);
                for t in &tasks {
                    if matches!(outcome.get(&t.task_id), None | Some(Verdict::Committed)) {
                        if let Some(h) = p.heads.get_mut(&t.task_id) {
                            h.known.next = h.known.next.max(t.next);
                            h.known.floor = h.known.floor.max(t.floor);
                        }
                    }
                }
            }
            lane.cond.notify_all();
            for (tx, r) in replies {
                let _ = tx.send(r);
            }
            if wrote {
                self.changes.notify();
            }
        }
    }

    /// Commits a batch, retrying on a fresh connection while the database is unreachable (up
    /// to the lease timeout): the statement is fenced by each task's expected seq, so a retry
    /// of a batch whose `COMMIT` did go through is refused, and then recognised as committed.
    /// Returns the tasks whose appends did not commit, with why.
    fn commit_batch(
        &self,
        client: &mut Option<Conn>,
        batch: &[Job],
        tasks: &[TaskSpan],
    ) -> HashMap<String, Verdict> {
        let deadline = Instant::now() + self.lease_timeout;
        let mut backoff = Duration::from_millis(50);
        let mut last_error = String::new();
        loop {
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                match self.connect() {
                    Ok(c) => *client = Some(Conn::new(c)),
                    Err(e) => last_error = e.to_string(),
                }
            }
            if let Some(c) = client.as_mut() {
                match self.try_batch(c, batch, tasks) {
                    Ok(accepted) => return self.classify(c, tasks, &accepted),
                    Err(e) => {
                        last_error = describe(&e);
                        if e.as_db_error().is_some() && !c.is_closed() {
                            // Refused by the database itself: not worth a retry.
                            return refuse_all(tasks, &last_error);
                        }
                        *client = None;
                    }
                }
            }
            if self.stop.load(Ordering::SeqCst) || Instant::now() >= deadline {
                return refuse_all(tasks, &last_error);
            }
            self.pause(backoff);
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    /// One group commit, one transaction: the fenced statement first ([`FENCE_BATCH`]: each
    /// task's row moves its next seq and floor only if it is still running, owned by this
    /// replica and at the seq the batch starts from; the rows pushed out by the count limit
    /// go; one notification, sent at commit), then the events of the tasks whose row moved by
    /// `COPY … (FORMAT binary)` ([`COPY_EVENTS`]), then `COMMIT`. A deposed writer's events
    /// are never copied: its tasks' rows did not move. Returns the ids of the tasks whose row
    /// moved.
    fn try_batch(
        &self,
        c: &mut Conn,
        batch: &[Job],
        tasks: &[TaskSpan],
    ) -> Result<HashSet<String>, postgres::Error> {
        let mut d_task = Vec::with_capacity(tasks.len());
        let (mut d_expect, mut d_next, mut d_lo, mut d_floor) = (
            Vec::with_capacity(tasks.len()),
            Vec::with_capacity(tasks.len()),
            Vec::with_capacity(tasks.len()),
            Vec::with_capacity(tasks.len()),
        );
        let mut floors: HashMap<&str, i64> = HashMap::with_capacity(tasks.len());
        for t in tasks {
            d_task.push(t.task_id.as_str());
            d_expect.push(t.expect);
            d_next.push(t.next);
            d_lo.push(t.lo);
            d_floor.push(t.floor);
            floors.insert(t.task_id.as_str(), t.floor);
        }
        let fence = c.prep(FENCE_BATCH)?;
        let copy = c.prep(COPY_CHUNKS)?;
        let mut tx = c.transaction()?;
        let rows = tx.query(
            &fence,
            &[&d_task, &d_expect, &d_next, &d_lo, &d_floor, &self.replica],
        )?;
        let moved: HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        // Only the events of the tasks that passed the fence, and none already below its
        // task's new floor (a batch longer than the count limit). A task's events in a batch
        // are consecutive seqs: each task's run is one chunk row (more past a chunk's bounds).
        let mut events = batch.iter().filter(|j| {
            moved.contains(&j.task_id) && floors.get(j.task_id.as_str()).is_none_or(|f| j.seq >= *f)
        });
        if let Some(first) = events.next() {
            let sink = tx.copy_in(&copy)?;
            let mut w = postgres::binary_copy::BinaryCopyInWriter::new(sink, &COPY_TYPES);
            let mut open: HashMap<&str, ChunkWriter> = HashMap::new();
            let write = |w: &mut postgres::binary_copy::BinaryCopyInWriter<'_>,
                         task_id: &str,
                         c: &ChunkWriter| {
                let stored = c.encode();
                w.write(&chunk_row(&task_id, c, &stored))
            };
            for j in std::iter::once(first).chain(events) {
                let c = open
                    .entry(j.task_id.as_str())
                    .or_insert_with(|| ChunkWriter::new(j.seq));
                if c.end != j.seq {
                    // Never so (a task's seqs are taken in queue order), but a row must
                    // hold consecutive seqs whatever happens.
                    if !c.is_empty() {
                        write(&mut w, &j.task_id, c)?;
                    }
                    *c = ChunkWriter::new(j.seq);
                }
                c.push(millis_i64(j.at), &j.event_type, j.payload.as_bytes());
                if c.is_full() {
                    write(&mut w, &j.task_id, c)?;
                    *c = ChunkWriter::new(j.seq + 1);
                }
            }
            for (task_id, c) in &open {
                if !c.is_empty() {
                    write(&mut w, task_id, c)?;
                }
            }
            w.finish()?;
        }
        tx.commit()?;
        Ok(moved)
    }

    /// Why the tasks of a batch that the statement did not move were refused: a task gone
    /// (`UnknownTask`), ended or taken over (`Terminal`), or already at the batch's end (a
    /// retry of a batch that committed: accepted).
    fn classify(
        &self,
        c: &mut Conn,
        tasks: &[TaskSpan],
        accepted: &HashSet<String>,
    ) -> HashMap<String, Verdict> {
        let refused: Vec<&TaskSpan> = tasks
            .iter()
            .filter(|t| !accepted.contains(&t.task_id))
            .collect();
        let mut out = HashMap::new();
        if refused.is_empty() {
            return out;
        }
        let ids: Vec<&str> = refused.iter().map(|t| t.task_id.as_str()).collect();
        let rows = match c.query(
            &format!(
                "SELECT task_id, next_seq, owner = $2 AND status IN {RUNNING} \
                 FROM taskstream_tasks WHERE task_id = ANY($1)"
            ),
            &[&ids, &self.replica],
        ) {
            Ok(rows) => rows,
            Err(e) => {
                return refused
                    .iter()
                    .map(|t| {
                        (
                            t.task_id.clone(),
                            Verdict::Refused(Refusal::Lost(describe(&e))),
                        )
                    })
                    .collect()
            }
        };
        let found: HashMap<String, (i64, bool)> = rows
            .iter()
            .map(|r| {
                let ours: Option<bool> = r.get(2);
                (r.get::<_, String>(0), (r.get(1), ours == Some(true)))
            })
            .collect();
        for t in refused {
            let verdict = match found.get(&t.task_id) {
                None => Verdict::Refused(Refusal::Unknown),
                Some((_, false)) => Verdict::Refused(Refusal::Terminal),
                Some((next, true)) if *next == t.next => Verdict::Committed,
                Some(_) => Verdict::Refused(Refusal::Lost(
                    "an earlier batch of the task's events did not commit".into(),
                )),
            };
            out.insert(t.task_id.clone(), verdict);
        }
        out
    }

    /// The listener: `LISTEN taskstream` on a connection of its own; every notification moves
    /// the change signal. A dropped connection is replaced (and the signal moved, since
    /// notifications may have been missed meanwhile).
    fn run_listener(&self) {
        let mut backoff = Duration::from_millis(100);
        while !self.stop.load(Ordering::SeqCst) {
            let mut client = match self.connect() {
                Ok(mut c) => match c.batch_execute("LISTEN taskstream") {
                    Ok(()) => c,
                    Err(_) => {
                        self.pause(backoff);
                        continue;
                    }
                },
                Err(_) => {
                    self.pause(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            backoff = Duration::from_millis(100);
            // Notifications may have been missed while the listener was away, a retention
            // notice or an end among them.
            self.distrust();
            self.cache.clear();
            self.changes.notify();
            while !self.stop.load(Ordering::SeqCst) {
                let mut failed = false;
                {
                    let mut n = client.notifications();
                    let mut it = n.timeout_iter(Duration::from_millis(250));
                    loop {
                        match it.next() {
                            // Rung at once: a reader waits on every notification.
                            Ok(Some(n)) => {
                                if n.payload() == RETENTION_NOTICE {
                                    // Floors moved elsewhere: nothing cached is trusted.
                                    self.distrust();
                                    self.cache.clear();
                                } else if n.payload() == END_NOTICE {
                                    // A task ended, maybe one this replica holds the lease of.
                                    self.distrust();
                                }
                                self.changes.notify();
                            }
                            Ok(None) => break,
                            Err(_) => {
                                failed = true;
                                break;
                            }
                        }
                    }
                }
                if failed || client.is_closed() {
                    break;
                }
            }
        }
    }

    /// Waits `d`, or less if the store is dropped meanwhile.
    fn pause(&self, d: Duration) {
        let (flag, cond) = &self.stop_signal;
        let g = lock(flag);
        let _ = cond
            .wait_timeout_while(g, d, |stopped| !*stopped)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }

    /// The lease thread: renews this replica's heartbeat and reaps expired leases, every
    /// quarter of the lease timeout.
    fn run_lease(&self) {
        let period = self.lease_timeout / 4;
        while !self.stop.load(Ordering::SeqCst) {
            let started = Instant::now();
            let renewed = self.with_unbounded("cannot renew the lease", true, |c| {
                c.execute(
                    "UPDATE taskstream_replicas SET heartbeat = now() WHERE id = $1",
                    &[&self.replica],
                )
            });
            if renewed.is_ok() {
                let at = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.renewed.store(at, Ordering::Relaxed);
            }
            let _ = self.reap();
            self.pause(period.saturating_sub(started.elapsed()));
        }
    }

    fn reap(&self) -> Result<usize, StoreError> {
        // Expired once three renewals in a row were missed: with renewals and reaping every
        // quarter of the timeout, a dead replica's tasks end within the timeout of its death.
        let secs = self.lease_timeout.as_secs_f64() * 0.75;
        let rows = self.with("cannot look for expired leases", false, |c| {
            c.query(
                &format!(
                    "SELECT t.task_id FROM taskstream_tasks t \
                     LEFT JOIN taskstream_replicas r ON r.id = t.owner \
                     WHERE t.status IN {RUNNING} \
                     AND (r.id IS NULL OR r.heartbeat < now() - make_interval(secs => $1))"
                ),
                &[&secs],
            )
        })?;
        let mut ended = 0;
        for r in &rows {
            let id: &str = r.get(0);
            match self.finish(
                id,
                TaskStatus::Failed,
                Some(LEASE_FAILURE_MESSAGE.to_owned()),
                None,
                None,
                crate::clock::now(),
            ) {
                Ok(_) => {
                    log!(Warn, "task {id}: its replica's lease expired; ended failed");
                    ended += 1;
                }
                Err(AppendError::Terminal | AppendError::UnknownTask) => {}
                Err(AppendError::Storage(e)) => return Err(e),
                Err(_) => {}
            }
        }
        // Replicas long gone with nothing left running are forgotten.
        let _ = self.with("cannot forget old replicas", true, |c| {
            c.execute(
                &format!(
                    "DELETE FROM taskstream_replicas r \
                     WHERE r.heartbeat < now() - make_interval(secs => $1) * 10 \
                     AND NOT EXISTS (SELECT 1 FROM taskstream_tasks t \
                     WHERE t.owner = r.id AND t.status IN {RUNNING})"
                ),
                &[&secs],
            )
        });
        Ok(ended)
    }

    /// Retention by age and terminal retention, in short statements that never lock a
    /// running task's row for longer than one `UPDATE` of its floor (appends never wait on a
    /// sweep's deletes). Events go in ascending chunks of [`SWEEP_CHUNK`] rows, so what is
    /// left of a task's log is always a suffix (a read never meets a gap) and is bounded by
    /// its floor, which moves first.
    fn sweep(&self, now: Millis) -> Result<usize, StoreError> {
        let now_ms = millis_i64(now);
        let terminal_cutoff = now_ms.saturating_sub(millis_i64(self.retention.terminal_retention));
        let age_cutoff = now_ms.saturating_sub(millis_i64(self.retention.max_event_age));
        let mut removed = 0usize;
        let mut truncated = 0usize;
        // Terminal retention: the task's floor moves to its end (nothing is readable), its
        // events go in chunks, then its row. A terminal task is never appended to.
        loop {
            let ids: Vec<String> = self
                .with("cannot apply retention", false, |c| {
                    c.query(
                        "SELECT task_id FROM taskstream_tasks \
                         WHERE ended_at IS NOT NULL AND ended_at < $1 ORDER BY ended_at LIMIT 64",
                        &[&terminal_cutoff],
                    )
                })?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if ids.is_empty() {
                break;
            }
            self.with("cannot apply retention", true, |c| {
                c.execute(
                    "UPDATE taskstream_tasks SET floor = next_seq WHERE task_id = ANY($1)",
                    &[&ids],
                )
            })?;
            self.distrust();
            for id in &ids {
                self.cache.forget(id);
            }
            self.delete_in_steps(
                "DELETE FROM taskstream_chunks WHERE ctid = ANY(ARRAY(\
                 SELECT ctid FROM taskstream_chunks WHERE task_id = ANY($1) LIMIT $2))",
                &[&ids, &SWEEP_CHUNK],
            )?;
            let n = self.with("cannot apply retention", true, |c| {
                c.execute(
                    "DELETE FROM taskstream_tasks WHERE task_id = ANY($1) AND ended_at IS NOT NULL",
                    &[&ids],
                )
            })?;
            removed += usize::try_from(n).unwrap_or(usize::MAX);
            self.notify_all_replicas();
        }
        // Age: a task whose oldest retained event expired moves its floor to the first event
        // that has not (events are in time order; the events appended after the look are
        // newer still), then the chunks wholly below it go. The candidates are the tasks
        // whose chunk holding the floor began before the cutoff.
        let aged = self.with("cannot apply retention", false, |c| {
            c.query(
                "SELECT t.task_id, t.floor, t.next_seq FROM taskstream_tasks t \
                 JOIN LATERAL (SELECT c.first_at, c.end_seq FROM taskstream_chunks c \
                     WHERE c.task_id = t.task_id AND c.first_seq <= t.floor \
                     ORDER BY c.first_seq DESC LIMIT 1) c ON true \
                 WHERE c.end_seq > t.floor AND c.first_at < $1",
                &[&age_cutoff],
            )
        })?;
        for r in &aged {
            let id: &str = r.get(0);
            let old_floor: i64 = r.get(1);
            let next: i64 = r.get(2);
            let floor = self.with("cannot apply retention", true, |c| {
                let floor = match first_fresh(c, id, old_floor, age_cutoff)? {
                    Ok(Some(seq)) => seq.min(next),
                    Ok(None) => next,
                    Err(e) => return Ok(Err(e)),
                };
                if floor > old_floor {
                    c.execute(
                        "UPDATE taskstream_tasks SET floor = GREATEST(floor, $2) \
                         WHERE task_id = $1",
                        &[&id, &floor],
                    )?;
                }
                Ok(Ok(floor))
            })?;
            let floor = floor?;
            if floor <= old_floor {
                continue;
            }
            self.distrust();
            self.cache.raise_floor(id, floor);
            self.delete_in_steps(
                "DELETE FROM taskstream_chunks WHERE ctid = ANY(ARRAY(\
                 SELECT ctid FROM taskstream_chunks WHERE task_id = $1 \
                 AND first_seq < $2 AND end_seq <= $2 ORDER BY first_seq LIMIT $3))",
                &[&id, &floor, &SWEEP_CHUNK],
            )?;
            truncated += 1;
        }
        if truncated > 0 {
            self.notify_all_replicas();
        }
        Ok(removed)
    }

    /// Runs a retention `DELETE` of at most [`SWEEP_CHUNK`] rows, each in its own statement,
    /// until one deletes nothing.
    fn delete_in_steps(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<(), StoreError> {
        while self.with("cannot apply retention", true, |c| c.execute(sql, params))? > 0 {}
        Ok(())
    }

    /// Rings the change signal here and, by `NOTIFY`, on every other replica (after a
    /// sweep that moved floors: every replica drops its cache of events).
    fn notify_all_replicas(&self) {
        self.distrust();
        self.cache.clear();
        let _ = self.with("cannot notify", true, |c| {
            c.execute("SELECT pg_notify('taskstream', $1)", &[&RETENTION_NOTICE])
        });
        self.changes.notify();
    }
}

impl TaskStore for PgStore {
    fn retention(&self) -> &RetentionPolicy {
        &self.inner.retention
    }

    fn changes(&self) -> &ChangeSignal {
        &self.inner.changes
    }

    fn has_failed(&self) -> bool {
        false
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn health(&self) -> Result<(), String> {
        // Renewals come every quarter of the lease timeout: two missed in a row (the database
        // unreachable, or too slow) and the replica is no longer ready, well before its leases
        // expire (three missed).
        let r = &self.inner;
        let now = u64::try_from(r.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = r.renewed.load(Ordering::Relaxed);
        let limit = u64::try_from((r.lease_timeout / 2).as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) > limit {
            Err(format!(
                "PostgreSQL ({}): the lease was not renewed for {} ms",
                r.target,
                now.saturating_sub(last)
            ))
        } else {
            Ok(())
        }
    }

    fn pool(&self) -> Option<crate::stats::PoolStats> {
        let r = &self.inner;
        let (in_use, waiting) = {
            let n = lock(&r.in_use.0);
            (n.in_use, n.waiting)
        };
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        Some(crate::stats::PoolStats {
            in_use: n(in_use),
            size: n(r.pool_size),
            waiting: n(waiting),
            waits: r.pool_waits.load(Ordering::Relaxed),
        })
    }

    fn replica(&self) -> Option<crate::stats::ReplicaStats> {
        let r = &self.inner;
        let leases_held = r
            .lanes
            .iter()
            .map(|l| lock(&l.pipe).heads.len() as u64)
            .sum();
        Some(crate::stats::ReplicaStats {
            leases_held,
            batch_events: r.batch_events.snapshot(),
            commit_micros: r.commit_micros.snapshot(),
        })
    }

    fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        self.inner.create_task(&record, now)
    }

    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        self.inner.lookup(task_id)
    }

    fn tasks(&self) -> Vec<TaskView> {
        self.inner.tasks().unwrap_or_default()
    }

    fn list(&self) -> Result<Vec<TaskView>, StoreError> {
        self.inner.tasks()
    }

    fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.inner.enqueue(task_id, event_type, payload, now, true)
    }

    fn emit(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.inner.enqueue(task_id, event_type, payload, now, false)
    }

    fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.inner
            .finish(task_id, status, message, result, error, now)
    }

    fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: &mut dyn FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        self.inner.read_raw_from(task_id, from, max, push)
    }

    fn sweep(&self, now: Millis) -> usize {
        match self.inner.sweep(now) {
            Ok(n) => n,
            Err(e) => {
                log!(Warn, "retention: {e}");
                0
            }
        }
    }
}
