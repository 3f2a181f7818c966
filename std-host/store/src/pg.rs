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
//! | `taskstream_events` | each retained event: (task, seq) key, type, payload (JSON text, byte for byte as appended), time |
//!
//! # How it keeps the store's invariants
//!
//! - **Atomic, dense seqs.** A task's next seq lives in its row. An append, a creation and an
//!   end take the row (`UPDATE … RETURNING`, `SELECT … FOR UPDATE`), move `next_seq` and insert
//!   the event in one transaction: a state change and its event commit together, and seqs are
//!   dense whatever the number of replicas. `(task_id, seq)` is the primary key, so no seq can
//!   name two events.
//! - **Durable before visible.** Readers (any replica) see only committed rows, and the store
//!   returns only after `COMMIT` (with `synchronous_commit = on`).
//! - **Group commit.** Appends go through one writer thread per replica, which takes every
//!   append waiting and commits them in one transaction: one WAL flush of the database for the
//!   whole batch.
//! - **Doorbell.** Every writing transaction sends `NOTIFY taskstream`; each replica `LISTEN`s
//!   and moves its [`ChangeSignal`]. The notification carries nothing: streams read what is
//!   new by seq, so a lost notification (a dropped listener connection) costs latency, never
//!   an event.
//! - **Leases and fencing.** A task's row names the replica that runs it (`owner`). Each
//!   replica renews its heartbeat every quarter of `--lease-timeout`; any replica (checking as
//!   often) ends `failed`, with the terminal status event, every running task whose owner
//!   missed three renewals in a row (a heartbeat older than three quarters of the timeout, on
//!   the database's clock), so a dead replica's tasks end within the timeout of its death. An append succeeds only while the task is running *and* owned by the
//!   appending replica, checked in the same statement that takes the seq, so once a task was
//!   ended (by a lease expiry or a cancellation through another replica) its old owner's next
//!   append is refused: two writers never interleave one task's events.
//! - **Retention.** By count at each append (the floor moves and the rows below it go in the
//!   same transaction), by age and terminal retention in [`sweep`](TaskStore::sweep). Reads are
//!   bounded by the floor, so `earliestSeq` is exact and a dropped seq is `events_gone`.
//!
//! Connection errors are not fail-stop: a statement on a dropped connection fails (the client
//! is told), the connection is dropped and the next call reconnects.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use taskstream_core::{EventType, Millis, Payload, Retained, RetentionPolicy, Seq};

use crate::log::log;

use super::{
    lock, AppendError, ChangeSignal, RawEvent, StoreError, TaskRecord, TaskStatus, TaskStore,
    TaskView, STATUS_EVENT_TYPE,
};

/// The schema version this build writes and reads; a database at a newer one is refused.
pub const SCHEMA_VERSION: i32 = 1;

pub use crate::DEFAULT_LEASE_TIMEOUT;

/// The message of the terminal status event of a task whose replica's lease expired.
pub const LEASE_FAILURE_MESSAGE: &str = "The server running the task stopped (its lease expired)";

/// The migrations, in order: migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[r"
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
"];

/// The advisory lock that serialises migrations of replicas starting together.
const MIGRATION_LOCK: i64 = 0x7461_736b_7374_7265;

/// The most appends one group commit takes.
const MAX_BATCH: usize = 512;

/// How to open a [`PgStore`].
#[derive(Clone, Debug)]
pub struct PgConfig {
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DB[?…]`.
    pub url: String,
    /// What is retained (the same rules as a data dir).
    pub retention: RetentionPolicy,
    /// After how long without a heartbeat a replica's running tasks are ended `failed`.
    pub lease_timeout: Duration,
}

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
    pool: Mutex<Vec<Client>>,
    changes: ChangeSignal,
    queue: Mutex<VecDeque<Job>>,
    queue_cond: Condvar,
    stop: AtomicBool,
    stop_signal: (Mutex<bool>, Condvar),
}

/// One append waiting for the writer.
struct Job {
    task_id: String,
    event_type: String,
    payload: String,
    at: Millis,
    reply: mpsc::SyncSender<Result<Seq, AppendError>>,
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
            changes: ChangeSignal::default(),
            queue: Mutex::new(VecDeque::new()),
            queue_cond: Condvar::new(),
            stop: AtomicBool::new(false),
            stop_signal: (Mutex::new(false), Condvar::new()),
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
        lock(&inner.pool).push(client);
        let mut threads = Vec::new();
        for (name, run) in [
            ("pg-writer", Replica::run_writer as fn(&Replica)),
            ("pg-listen", Replica::run_listener),
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
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        {
            let (flag, cond) = &self.inner.stop_signal;
            *lock(flag) = true;
            cond.notify_all();
        }
        self.inner.queue_cond.notify_all();
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
        mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
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
                None => break self.connect()?,
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
                let mut fresh = self.connect()?;
                let v = f(&mut fresh).map_err(|e| db_error(context, &e));
                if !fresh.is_closed() {
                    self.put_back(fresh);
                }
                v
            }
        }
    }

    fn put_back(&self, client: Client) {
        let mut pool = lock(&self.pool);
        if pool.len() < 16 {
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
                tx.execute(
                    "INSERT INTO taskstream_events (task_id, seq, type, payload, at) \
                     VALUES ($1, 0, $2, '{\"status\":\"working\"}', $3)",
                    &[&record.task_id, &STATUS_EVENT_TYPE, &at],
                )?;
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
                tx.execute(
                    "INSERT INTO taskstream_events (task_id, seq, type, payload, at) \
                     VALUES ($1, $2, $3, $4, $5)",
                    &[&task_id, &seq, &STATUS_EVENT_TYPE, &payload, &at],
                )?;
                if new_floor > floor {
                    tx.execute(
                        "DELETE FROM taskstream_events \
                         WHERE task_id = $1 AND seq >= $2 AND seq < $3",
                        &[&task_id, &floor, &new_floor],
                    )?;
                }
                tx.execute("SELECT pg_notify('taskstream', '')", &[])?;
                tx.commit()?;
                Ok(Ok(seq))
            })
            .map_err(AppendError::Storage)??;
        self.changes.notify();
        seq_of(outcome).map_err(AppendError::Storage)
    }

    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        let row = self.with("cannot read a task", false, |c| {
            c.query_opt(
                "SELECT record, floor, next_seq FROM taskstream_tasks WHERE task_id = $1",
                &[&task_id],
            )
        })?;
        row.map(|r| view_of(r.get(0), r.get(1), r.get(2)))
            .transpose()
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
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self.with("cannot read events", false, |c| {
            // A bounded range of the primary key (whatever the table's statistics say). No
            // row below the task's floor is ever visible: the floor moves in the transaction
            // that deletes the rows below it.
            c.query(
                "SELECT seq, type, payload, at FROM taskstream_events \
                 WHERE task_id = $1 AND seq >= $2 AND seq < $2 + $3 ORDER BY seq",
                &[&task_id, &i64_of(from), &limit],
            )
        })?;
        let mut expected = from;
        let mut n = 0;
        for r in &rows {
            let seq = seq_of(r.get(0))?;
            if seq != expected {
                // A seq no longer retained (retention ran): the batch stops before it.
                break;
            }
            let event_type: &str = r.get(1);
            let payload: &str = r.get(2);
            let at: i64 = r.get(3);
            push(RawEvent::copied(
                seq,
                Millis(u64::try_from(at).unwrap_or(0)),
                event_type,
                payload.as_bytes(),
            ));
            n += 1;
            match seq.next() {
                Some(s) => expected = s,
                None => break,
            }
        }
        Ok(n)
    }

    /// Queues an append for the writer and waits for its commit.
    fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        let payload = compact_payload(event_type, payload, Some(self.retention.max_payload_bytes))?;
        let (tx, rx) = mpsc::sync_channel(1);
        {
            let mut q = lock(&self.queue);
            q.push_back(Job {
                task_id: task_id.to_owned(),
                event_type: event_type.to_owned(),
                payload,
                at: now,
                reply: tx,
            });
        }
        self.queue_cond.notify_one();
        rx.recv()
            .unwrap_or(Err(AppendError::Storage(StoreError::Failed)))
    }

    /// The writer: takes every append waiting and commits them in one transaction (group
    /// commit), then answers each.
    fn run_writer(&self) {
        let mut client: Option<Client> = None;
        loop {
            let batch: Vec<Job> = {
                let mut q = lock(&self.queue);
                while q.is_empty() && !self.stop.load(Ordering::SeqCst) {
                    q = self
                        .queue_cond
                        .wait(q)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if q.is_empty() {
                    return;
                }
                let n = q.len().min(MAX_BATCH);
                q.drain(..n).collect()
            };
            let results = self.commit_batch(&mut client, &batch);
            let wrote = results.iter().any(Result::is_ok);
            for (job, r) in batch.into_iter().zip(results) {
                let _ = job.reply.send(r);
            }
            if wrote {
                self.changes.notify();
            }
        }
    }

    fn commit_batch(
        &self,
        client: &mut Option<Client>,
        batch: &[Job],
    ) -> Vec<Result<Seq, AppendError>> {
        // Twice at most: a connection found closed before anything was sent is replaced.
        for attempt in 0..2 {
            if client.as_ref().is_none_or(Client::is_closed) {
                match self.connect() {
                    Ok(c) => *client = Some(c),
                    Err(e) => return fail_all(batch.len(), &e),
                }
            }
            let Some(c) = client.as_mut() else {
                return fail_all(batch.len(), &StoreError::Failed);
            };
            let mut began = false;
            match self.try_batch(c, batch, &mut began) {
                Ok(r) => return r,
                Err(e) => {
                    let closed = c.is_closed();
                    if closed {
                        *client = None;
                    }
                    if attempt == 0 && closed && !began {
                        continue;
                    }
                    return fail_all(batch.len(), &db_error("cannot append events", &e));
                }
            }
        }
        fail_all(batch.len(), &StoreError::Failed)
    }

    /// One group commit: a fixed number of statements whatever the batch's size. The tasks'
    /// rows are locked in id order (as the sweep locks them, so the two never deadlock), only
    /// while running and owned by this replica (the fence); each task's appends take the next
    /// seqs in the order they were queued; the rows pushed out by the count limit go in the
    /// same transaction.
    fn try_batch(
        &self,
        c: &mut Client,
        batch: &[Job],
        began: &mut bool,
    ) -> Result<Vec<Result<Seq, AppendError>>, postgres::Error> {
        let max = self.max_events();
        let mut ids: Vec<&str> = batch.iter().map(|j| j.task_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut tx = c.transaction()?;
        *began = true;
        let locked = tx.query(
            &format!(
                "SELECT task_id, next_seq, floor FROM taskstream_tasks \
                 WHERE task_id = ANY($1) AND owner = $2 AND status IN {RUNNING} \
                 ORDER BY task_id FOR UPDATE"
            ),
            &[&ids, &self.replica],
        )?;
        // task → (next seq, floor), as the batch moves them.
        let mut heads: HashMap<String, (i64, i64)> = locked
            .iter()
            .map(|r| (r.get::<_, String>(0), (r.get(1), r.get(2))))
            .collect();
        let old: HashMap<String, (i64, i64)> = heads.clone();
        let refused: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !heads.contains_key(*id))
            .collect();
        let existing: HashSet<String> = if refused.is_empty() {
            HashSet::new()
        } else {
            tx.query(
                "SELECT task_id FROM taskstream_tasks WHERE task_id = ANY($1)",
                &[&refused],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect()
        };
        let mut results = Vec::with_capacity(batch.len());
        let (mut e_task, mut e_seq, mut e_type, mut e_payload, mut e_at) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for job in batch {
            let Some((next, floor)) = heads.get_mut(&job.task_id) else {
                results.push(Err(if existing.contains(&job.task_id) {
                    AppendError::Terminal
                } else {
                    AppendError::UnknownTask
                }));
                continue;
            };
            let seq = *next;
            *next += 1;
            *floor = (*floor).max(*next - max);
            e_task.push(job.task_id.as_str());
            e_seq.push(seq);
            e_type.push(job.event_type.as_str());
            e_payload.push(job.payload.as_str());
            e_at.push(millis_i64(job.at));
            results.push(seq_of(seq).map_err(AppendError::Storage));
        }
        if !e_task.is_empty() {
            let (mut u_task, mut u_next, mut u_floor) = (Vec::new(), Vec::new(), Vec::new());
            let (mut d_task, mut d_from, mut d_to) = (Vec::new(), Vec::new(), Vec::new());
            for (id, (next, floor)) in &heads {
                let Some((_, old_floor)) = old.get(id) else {
                    continue;
                };
                u_task.push(id.as_str());
                u_next.push(*next);
                u_floor.push(*floor);
                if floor > old_floor {
                    d_task.push(id.as_str());
                    d_from.push(*old_floor);
                    d_to.push(*floor);
                }
            }
            tx.execute(
                "UPDATE taskstream_tasks t SET next_seq = d.next, floor = d.floor \
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS d(task_id, next, floor) \
                 WHERE t.task_id = d.task_id",
                &[&u_task, &u_next, &u_floor],
            )?;
            tx.execute(
                "INSERT INTO taskstream_events (task_id, seq, type, payload, at) \
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
                 $5::bigint[])",
                &[&e_task, &e_seq, &e_type, &e_payload, &e_at],
            )?;
            if !d_task.is_empty() {
                tx.execute(
                    "DELETE FROM taskstream_events e \
                     USING unnest($1::text[], $2::bigint[], $3::bigint[]) AS d(task_id, lo, hi) \
                     WHERE e.task_id = d.task_id AND e.seq >= d.lo AND e.seq < d.hi",
                    &[&d_task, &d_from, &d_to],
                )?;
            }
            tx.execute("SELECT pg_notify('taskstream', '')", &[])?;
        }
        tx.commit()?;
        Ok(results)
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
            self.changes.notify();
            while !self.stop.load(Ordering::SeqCst) {
                let mut failed = false;
                {
                    let mut n = client.notifications();
                    let mut it = n.timeout_iter(Duration::from_millis(250));
                    loop {
                        match it.next() {
                            // Rung at once: a reader waits on every notification.
                            Ok(Some(_)) => self.changes.notify(),
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
            let _ = self.with("cannot renew the lease", true, |c| {
                c.execute(
                    "UPDATE taskstream_replicas SET heartbeat = now() WHERE id = $1",
                    &[&self.replica],
                )
            });
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

    fn sweep(&self, now: Millis) -> Result<usize, StoreError> {
        let now_ms = millis_i64(now);
        let terminal_cutoff = now_ms.saturating_sub(millis_i64(self.retention.terminal_retention));
        let age_cutoff = now_ms.saturating_sub(millis_i64(self.retention.max_event_age));
        let (removed, truncated) = self.with("cannot apply retention", true, |c| {
            let mut tx = c.transaction()?;
            let removed = tx.execute(
                "DELETE FROM taskstream_tasks WHERE ended_at IS NOT NULL AND ended_at < $1",
                &[&terminal_cutoff],
            )?;
            // Age: tasks whose oldest retained event expired move their floor to the first
            // event that has not (events are in time order), and drop the rows below it.
            let aged = tx.query(
                "SELECT t.task_id, t.floor, t.next_seq FROM taskstream_tasks t \
                 JOIN taskstream_events e ON e.task_id = t.task_id AND e.seq = t.floor \
                 WHERE e.at < $1 ORDER BY t.task_id FOR UPDATE OF t",
                &[&age_cutoff],
            )?;
            let mut truncated = 0;
            for r in &aged {
                let id: &str = r.get(0);
                let old_floor: i64 = r.get(1);
                let next: i64 = r.get(2);
                let first_fresh: Option<i64> = tx
                    .query_one(
                        "SELECT min(seq) FROM taskstream_events \
                         WHERE task_id = $1 AND seq >= $2 AND at >= $3",
                        &[&id, &old_floor, &age_cutoff],
                    )?
                    .get(0);
                let floor = first_fresh.unwrap_or(next);
                tx.execute(
                    "UPDATE taskstream_tasks SET floor = GREATEST(floor, $2) WHERE task_id = $1",
                    &[&id, &floor],
                )?;
                tx.execute(
                    "DELETE FROM taskstream_events \
                     WHERE task_id = $1 AND seq >= $2 AND seq < $3",
                    &[&id, &old_floor, &floor],
                )?;
                truncated += 1;
            }
            if removed > 0 || truncated > 0 {
                tx.execute("SELECT pg_notify('taskstream', '')", &[])?;
            }
            tx.commit()?;
            Ok((removed, truncated))
        })?;
        if removed > 0 || truncated > 0 {
            self.changes.notify();
        }
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }
}

fn fail_all(n: usize, e: &StoreError) -> Vec<Result<Seq, AppendError>> {
    (0..n)
        .map(|_| Err(AppendError::Storage(StoreError::Database(e.to_string()))))
        .collect()
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
        self.inner.append(task_id, event_type, payload, now)
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
