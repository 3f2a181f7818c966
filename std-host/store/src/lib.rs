//! `taskstream-store`: MCP tasks and their SEP-2694 event logs, durable as `--durability` says,
//! on a write-ahead log indexed by sled (a data dir), in memory, or in PostgreSQL.
//!
//! This is the **API boundary** between the protocol layer (`server`) and storage. The protocol
//! layer (the crate `taskstream-server`) never touches sled or files; storage never speaks
//! JSON-RPC. The server holds the store
//! as a [`TaskStore`] (`backend.rs`): [`Store`] (this module: the data dir, or memory) or
//! [`PgStore`] (`pg.rs`: PostgreSQL, shared by several replicas), and nothing above the trait
//! knows which.
//!
//! Architecture invariants:
//! - An event is durable (per [`Durability`]) before [`Store::append`] returns, and nothing can
//!   read it before then: no event is sent before it is durable.
//! - Seqs of a task are 0, 1, 2, … with no gap, across restarts.
//! - Every task's log starts with a `dev.taskstream.task.status` `{"status":"working"}` event
//!   (written by [`Store::create_task`]) and, once terminal, ends with one for its terminal
//!   status (written by [`Store::finish`]); the log is frozen after that.
//!
//! # How it is built
//!
//! | module | owns |
//! | --- | --- |
//! | `wal` | the write-ahead log: segment files of core records, `fdatasync`, group commit, torn-tail recovery |
//! | `raw` | [`RawEvent`]: an event read without copying it out of sled |
//! | `index` | sled: the materialised state reads come from (events, task records, retention floors, the checkpoint LSN) |
//! | `tree` | one tree of the index: a sled tree, or (`--in-memory`) an ordered map in process memory |
//! | `layout` | which index directory is in use (`INDEX`), the atomic switch to a rebuilt one, deleting stale ones |
//! | `engine` | the running store (`Engine`): the in-memory task table (`LiveTask`), and, one file each, appends and the budget (`append`), reads (`read`), retention (`retention`), the flusher and applier threads (`apply`), checkpoints and index rebuilds (`checkpointing`) |
//! | `recovery` | [`Store::open`] and [`Store::repair`]: lock, replay the log into sled, check it against the checkpoint record, refuse (or repair) damage, fail the tasks that were running |
//! | `checkpoint` | `CHECKPOINT`: the last checkpoint's LSN and every task's next seq then, to tell an index that lost data |
//! | `fsutil` | owner-only files and dirs, directory fsync, the data dir lock |
//! | `backend` | [`TaskStore`], the storage interface, and its implementation for [`Store`] |
//! | `pg` | [`PgStore`]: the interface on PostgreSQL (schema, group commit, `LISTEN/NOTIFY`, leases) |
//!
//! On disk (`DATA_DIR`, mode 0700, files 0600): `LOCK` (flock: one server per data dir),
//! `wal/<LSN>.wal` (the log since the last checkpoint), `index/` or `index.<n>/` (sled),
//! `INDEX` (which index dir is in use, once there has been a rebuild) and `CHECKPOINT` (the
//! checkpoint record).
//!
//! Damage is never taken for a torn write: a bad record that is not the log's tail, missing
//! log, or an index that holds less than its checkpoint record says makes [`Store::open`]
//! refuse with [`StoreError::Damaged`]; [`Store::repair`] goes past it without ever reusing a
//! seq. A failed write or flush stops the store for good ([`Store::has_failed`]).
//!
//! Every change is a core log record (`taskstream_core::record`), written to the log first and
//! then applied to sled. An append holds its task's lock across seq allocation, the log write,
//! the durability wait and the sled write, so a task's records are in seq order everywhere; the
//! seq becomes visible to readers only after that. A checkpoint (every few seconds, or after
//! 64 MiB of log) rotates the log, flushes sled and `fdatasync`s its file, then deletes the log
//! segments before the rotation. Recovery replays the log from the checkpoint into sled; every
//! record is a blind write, so replaying what sled already has is harmless.
//!
//! sled keeps removed values in its file until it rewrites their segment, so after retention
//! removed tasks a checkpoint rebuilds the index into a fresh directory and switches to it
//! atomically (`engine/checkpointing.rs`, `layout`): removed payloads leave the disk.

mod backend;
mod cache;
mod checkpoint;
pub mod clock;
mod engine;
mod error;
mod events;
mod fsutil;
mod index;
mod layout;
mod log;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod pg;
mod raw;
mod recovery;
pub mod stats;
mod storage;
mod tree;
mod wal;

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use taskstream_core::{Millis, Retained, RetentionPolicy, Seq};

pub use backend::TaskStore;
pub use error::StoreError;
#[cfg(feature = "postgres")]
pub use pg::{PgConfig, PgStore};

/// The default of `--lease-timeout`: how long a PostgreSQL replica's lease lasts without
/// renewal.
pub const DEFAULT_LEASE_TIMEOUT: Duration = Duration::from_secs(15);

/// The default of `--store-pool`: how many connections a PostgreSQL replica's reads may hold
/// at once.
pub const DEFAULT_PG_POOL_SIZE: usize = 16;

/// The default of `--store-writers`: how many connections of a PostgreSQL replica commit
/// batches of events side by side.
pub const DEFAULT_PG_WRITERS: usize = 2;
pub use raw::RawEvent;
pub use wal::{Damage, TornTail, WalError, WalStats};

/// The event type of status transitions (docs/interface.md, "Tools the server offers").
pub const STATUS_EVENT_TYPE: &str = "dev.taskstream.task.status";

/// When an appended event is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// `fdatasync` before each event is visible.
    Event,
    /// Group commit: one `fdatasync` covers every event appended meanwhile; still nothing is
    /// visible before it is durable.
    Group,
    /// No device flush (tests and benchmarks only).
    None,
}

/// How to open a [`Store`].
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The data dir, or `None` for a store that lives in memory only (`--in-memory`).
    pub data_dir: Option<PathBuf>,
    /// When appends are durable.
    pub durability: Durability,
    /// What is retained.
    pub retention: RetentionPolicy,
    /// The most bytes the store keeps: the event types plus compact payloads of retained events
    /// across all tasks, plus for each task its stored record and [`TASK_OVERHEAD_BYTES`];
    /// beyond it new events and new tasks are refused ([`AppendError::StoreFull`]) until
    /// retention frees some. [`DEFAULT_MAX_STORE_BYTES`] unless told otherwise.
    pub max_store_bytes: u64,
    /// The bound of the index's page cache (sled's `cache_capacity`) on a data dir: events read
    /// from it are served from memory up to this many bytes, the rest from the file. More makes
    /// replays of long logs faster; less keeps the server smaller (benches/REPORT.md, run L).
    /// [`DEFAULT_INDEX_CACHE_BYTES`] unless told otherwise; unused in memory and on PostgreSQL.
    pub index_cache_bytes: u64,
}

/// The default of [`StoreConfig::max_store_bytes`] (`--max-store-bytes`): 1 GiB.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 1 << 30;

/// The default of [`StoreConfig::index_cache_bytes`] (`--index-cache-mib`): 64 MiB.
pub const DEFAULT_INDEX_CACHE_BYTES: u64 = 64 << 20;

/// What the budget counts for each task besides its events and its stored record: about what
/// its bookkeeping (the task table's entry, its record in memory, its locks) costs, measured,
/// so that creating tasks that emit nothing is bounded too.
pub const TASK_OVERHEAD_BYTES: u64 = 2048;

/// The status of a task (SEP-1686 / SEP-2663 share these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for input from the client.
    InputRequired,
    /// Finished with a result.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled by the client.
    Cancelled,
}

impl TaskStatus {
    /// The payload of the terminal `dev.taskstream.task.status` event a store appends when a
    /// task reaches this status: `{"status": "<status>"}`, plus `"message"` when given. Every
    /// store writes it from here, so they cannot disagree.
    #[must_use]
    pub fn event_payload(self, message: Option<&str>) -> String {
        let mut payload = serde_json::json!({ "status": self.as_str() });
        if let Some(m) = message {
            payload["message"] = serde_json::Value::String(m.to_owned());
        }
        payload.to_string()
    }

    /// Whether no transition leaves this status.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// Everything stored about a task besides its events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task id (at least 122 random bits).
    pub task_id: String,
    /// The principal that created the task; only it may see the task.
    pub principal: String,
    /// The tool that runs it.
    pub tool: String,
    /// Current status.
    pub status: TaskStatus,
    /// Optional human-readable status message.
    pub status_message: Option<String>,
    /// Wall-clock creation time.
    pub created_at: Millis,
    /// Wall-clock time of the last status change.
    pub last_updated_at: Millis,
    /// Requested time to live from creation, in ms (`None`: unlimited).
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval, in ms.
    pub poll_interval_ms: u64,
    /// The tool's result (a `CallToolResult` object) once completed.
    pub result: Option<serde_json::Value>,
    /// The JSON-RPC error object once failed.
    pub error: Option<serde_json::Value>,
}

/// A task as seen now: its record and its retained event range.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    /// The record.
    pub record: TaskRecord,
    /// The seqs still retained, and the next seq.
    pub retained: Retained,
}

/// One stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its vendor-prefixed type.
    pub event_type: String,
    /// Its payload: one JSON object in compact form.
    pub payload: Vec<u8>,
    /// When it was appended (wall clock).
    pub at: Millis,
}

/// Why an append was refused.
#[derive(Debug)]
pub enum AppendError {
    /// No such task.
    UnknownTask,
    /// The task is terminal; its log is frozen.
    Terminal,
    /// The payload is not a JSON object.
    InvalidPayload(taskstream_core::json::JsonError),
    /// The event type is not vendor-prefixed.
    InvalidType(taskstream_core::event::EventTypeError),
    /// The payload exceeds the retention policy's `max_payload_bytes`.
    PayloadTooLarge {
        /// The payload's compact size.
        size: usize,
        /// The limit.
        limit: u32,
    },
    /// The retained events of all tasks already take the store-wide budget
    /// ([`StoreConfig::max_store_bytes`]); the event (or the new task) was not stored.
    StoreFull {
        /// The bytes counted when it was refused.
        stored: u64,
        /// The budget.
        limit: u64,
    },
    /// Storage failed; the event was not appended.
    Storage(StoreError),
}

/// A counter that moves whenever any task gains an event or changes status; the delivery
/// thread waits on it instead of polling.
///
/// A move wakes waiters only if there are any: while the delivery thread is busy writing,
/// appends cost no system call for it.
#[derive(Debug, Default)]
pub struct ChangeSignal {
    state: Mutex<SignalState>,
    cond: Condvar,
}

#[derive(Debug, Default)]
struct SignalState {
    epoch: u64,
    /// Threads inside [`ChangeSignal::wait_past`]; counted under the same lock as the epoch,
    /// so a waiter either sees the new epoch before it sleeps or is counted when it moves.
    waiters: usize,
}

impl ChangeSignal {
    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        lock(&self.state).epoch
    }

    /// Advances the epoch and wakes every waiter.
    pub fn notify(&self) {
        let waiting = {
            let mut st = lock(&self.state);
            st.epoch += 1;
            st.waiters > 0
        };
        if waiting {
            self.cond.notify_all();
        }
    }

    /// Waits until the epoch differs from `seen` or `timeout` passes; returns the epoch.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let mut st = lock(&self.state);
        if st.epoch != seen {
            return st.epoch;
        }
        st.waiters += 1;
        let (mut st, _) = self
            .cond
            .wait_timeout_while(st, timeout, |s| s.epoch == seen)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.waiters -= 1;
        st.epoch
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_read<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_write<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What [`Store::open`] found and did; the server logs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records replayed into sled.
    pub replayed_records: u64,
    /// The torn or corrupt tail cut off the log, if any (expected after a crash mid-write).
    pub torn_tail: Option<TornTail>,
    /// Bytes of log cut off (the torn tail and any segment that did not follow on).
    pub discarded_bytes: u64,
    /// Whether log segments between the last checkpoint and the first remaining segment were
    /// missing (data written in that span is lost).
    pub wal_gap: bool,
    /// Index directories other than the one in use, deleted: what an index rebuild that was
    /// interrupted left (a half-built new one, or the old one it had switched away from).
    pub stale_index_dirs: usize,
    /// Tasks recovered.
    pub tasks: usize,
    /// Tasks that were running when the previous process stopped; each now ends as `failed`
    /// with a terminal status event.
    pub failed_tasks: Vec<String>,
    /// What is wrong with the data dir's files but harmless to go on with (loose modes that
    /// were repaired, a data dir others may write to, files of another owner); the server
    /// logs each.
    pub warnings: Vec<String>,
    /// What [`Store::repair`] found damaged and went past (empty after a plain open, which
    /// refuses damage instead).
    pub repairs: Vec<String>,
    /// The damaged stretches of log a repair skipped.
    pub damage: Vec<Damage>,
    /// Tasks the last checkpoint listed that a repair found the index no longer has: lost.
    pub lost_tasks: Vec<String>,
}

/// Counters of what storage did, for tests and measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// The write-ahead log's counters (all zero in memory).
    pub wal: WalStats,
    /// Checkpoints completed (each a sled flush plus `fdatasync` of sled's file).
    pub checkpoints: u64,
    /// Index rebuilds completed (each a fresh sled directory holding only live data).
    pub index_rebuilds: u64,
}

/// The message of the terminal status event of a task that was running when the server
/// stopped.
pub const RESTART_FAILURE_MESSAGE: &str = "The server stopped while the task was running";

/// The message of the terminal status event of a task that was running when a repair went past
/// damage: some of its events may be lost.
pub const REPAIR_FAILURE_MESSAGE: &str =
    "The server stopped while the task was running, and storage damage may have lost some of \
     its events";

/// The task store. Shared between threads behind an `Arc`.
pub struct Store {
    config: StoreConfig,
    engine: Arc<engine::Engine>,
    checkpointer: Option<JoinHandle<()>>,
    /// The flusher (`group` and `none` mode): makes appends that did not wait durable and visible.
    flusher: Option<JoinHandle<()>>,
    /// The applier (`group` and `none` mode): writes published appends to the index, off their path.
    applier: Option<JoinHandle<()>>,
    report: RecoveryReport,
    /// The data dir lock, held for the life of the store.
    _lock: Option<File>,
}

impl Store {
    /// Opens (or creates) the store and recovers it: every task that was running when the
    /// process died ends as `failed` with a terminal status event.
    ///
    /// # Errors
    /// [`StoreError`] if the data dir cannot be opened or is held by another server
    /// ([`StoreError::Locked`]), or its log or sled cannot be read.
    pub fn open(config: StoreConfig, now: Millis) -> Result<Store, StoreError> {
        recovery::open(config, now, recovery::Mode::Refuse)
    }

    /// Opens the store like [`open`](Self::open), but goes past damage instead of refusing it
    /// (`taskstream repair`): every valid log record is kept, damaged stretches are skipped,
    /// a damaged index is set aside and rebuilt from the log, and every task that was running
    /// ends `failed` with its terminal event after every seq it may have used, so no seq ever
    /// names two events. What it went past is in [`RecoveryReport::repairs`].
    ///
    /// # Errors
    /// As [`open`](Self::open), except damage.
    pub fn repair(config: StoreConfig, now: Millis) -> Result<Store, StoreError> {
        recovery::open(config, now, recovery::Mode::Repair)
    }

    /// Whether a write or flush failure stopped the store (fail-stop): it refuses every write
    /// from then on, and only a restart (which recovers) makes it write again.
    pub fn has_failed(&self) -> bool {
        self.engine.has_failed()
    }

    /// The retention policy in force.
    pub fn retention(&self) -> &RetentionPolicy {
        &self.config.retention
    }

    /// The signal that moves on every change.
    pub fn changes(&self) -> &ChangeSignal {
        &self.engine.changes
    }

    /// Creates a task (status `working`) and appends its first event, seq 0:
    /// `dev.taskstream.task.status` `{"status":"working"}`. Durable before it returns.
    ///
    /// # Errors
    /// [`AppendError::Storage`] on I/O failure, a task id that exists already
    /// ([`StoreError::DuplicateTask`]) or one a log record cannot carry (empty, over 255 bytes,
    /// control characters: [`StoreError::Record`]).
    pub fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        self.engine.create_task(record, now)
    }

    /// The task, if it exists (principal checks are the caller's).
    pub fn task(&self, task_id: &str) -> Option<TaskView> {
        self.engine.task(task_id)
    }

    /// Every task, oldest first (by creation time, then id).
    pub fn tasks(&self) -> Vec<TaskView> {
        self.engine.tasks()
    }

    /// Appends an event to a running task and returns its seq, once it is durable (as the
    /// durability mode says) and visible to readers.
    ///
    /// # Errors
    /// [`AppendError`]; on error nothing was appended.
    pub fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.engine.append(task_id, event_type, payload, now, true)
    }

    /// Appends an event to a running task and returns its seq without waiting for the device
    /// (pipelining). In `group` mode the event is logged (in the log's buffer, its seq taken)
    /// when this returns, and becomes visible (to reads, the change signal, delivery) only
    /// once a flush that covers it is durable: the store's flusher starts one at once, and
    /// one flush covers everything appended meanwhile, by any task. Nothing is ever read
    /// before it is durable. A crash before that flush loses the event (and every later one
    /// of the task), never an earlier one, and nobody has seen it. In `none` mode the record
    /// waits in the log's buffer and the flusher's next drain writes it, with the rest of
    /// its batch, and publishes it (no `fdatasync`); in `event` mode this is [`append`](Self::append).
    ///
    /// A producer that must know the event is durable before it does something else calls
    /// [`wait_durable`](Self::wait_durable) with the seq.
    ///
    /// # Errors
    /// As [`append`](Self::append). A flush failure after this returned stops the store
    /// (fail-stop): the event is never published.
    pub fn emit(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.engine.append(task_id, event_type, payload, now, false)
    }

    /// Returns once the event `seq` of a task, and every earlier one, is durable and visible
    /// (at once if it is already, or if the task is gone).
    ///
    /// # Errors
    /// [`StoreError::Failed`] (or the log's error) if the flush failed: the store has stopped.
    pub fn wait_durable(&self, task_id: &str, seq: Seq) -> Result<(), StoreError> {
        self.engine.wait_durable(task_id, seq)
    }

    /// Moves a running task to a terminal `status`, storing its result or error, and appends
    /// the terminal `dev.taskstream.task.status` event (`{"status": "<status>"}` plus
    /// `"message"` when given), atomically. Returns that event's seq.
    ///
    /// # Errors
    /// [`AppendError::Terminal`] if the task already is terminal (the first finish wins).
    pub fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.engine
            .finish(task_id, status, message, result, error, now)
    }

    /// The event `seq` of a task, if retained.
    pub fn event(&self, task_id: &str, seq: Seq) -> Option<StoredEvent> {
        self.engine.event(task_id, seq).ok().flatten()
    }

    /// Appends to `out` up to `max` retained events of a task from `from` on, in seq order.
    /// Stops early at a seq no longer retained (retention ran meanwhile) or unreadable.
    pub fn read_from(&self, task_id: &str, from: Seq, max: usize, out: &mut Vec<StoredEvent>) {
        // An unreadable event ends the batch; the error is for `try_read_from` callers.
        let _ = self.engine.read_from(task_id, from, max, out);
    }

    /// Hands up to `max` retained events of a task from `from` on, in seq order, to `push`,
    /// without copying them out of storage (the replay path); returns how many. Stops early
    /// at a seq no longer retained (retention ran meanwhile).
    ///
    /// # Errors
    /// [`StoreError`] if sled fails or a stored record is corrupt; the events before it were
    /// handed out.
    pub fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: impl FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        self.engine.read_raw_from(task_id, from, max, push)
    }

    /// Like [`read_from`](Self::read_from), reporting a stored event that does not decode.
    /// Returns how many events were appended to `out`.
    ///
    /// # Errors
    /// [`StoreError`] if sled fails or a stored record is corrupt; the events before it are in
    /// `out`.
    pub fn try_read_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        out: &mut Vec<StoredEvent>,
    ) -> Result<usize, StoreError> {
        self.engine.read_from(task_id, from, max, out)
    }

    /// Applies retention at `now`: drops events past their age or beyond the count, and removes
    /// terminal tasks past their terminal retention, from disk as well. Returns how many tasks
    /// were removed.
    pub fn sweep(&self, now: Millis) -> usize {
        self.engine.sweep(now)
    }

    /// Checkpoints now: flushes sled to the device and deletes the log it covers. (A background
    /// thread does this every few seconds; dropping the store does it once more.)
    ///
    /// # Errors
    /// [`StoreError`] if the log or sled cannot be flushed; the log is then kept.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.engine.checkpoint()
    }

    /// Checkpoints, then rebuilds the index into a fresh directory that holds only what is
    /// retained, and deletes the old one. Checkpoints do this by themselves after retention
    /// removed tasks, or dropped at least 1 MiB of events and half as much as is retained (at
    /// most every 10 s, and at most a tenth of the time); this is for tests and tools. Does
    /// nothing in memory, where removed data is freed at once.
    ///
    /// # Errors
    /// [`StoreError`] if the checkpoint or the rebuild fails. A failure before the new index is
    /// switched to leaves the old one in use; one after it stops the store (fail-stop).
    pub fn rebuild_index(&self) -> Result<(), StoreError> {
        self.engine.rebuild_index()
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// What [`open`](Self::open) recovered.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// The bytes counted against [`StoreConfig::max_store_bytes`]: the event types plus
    /// compact payloads of every retained event, and for each task its stored record plus
    /// [`TASK_OVERHEAD_BYTES`].
    pub fn stored_bytes(&self) -> u64 {
        self.engine.stored_bytes()
    }

    /// Counters of what storage did so far.
    pub fn stats(&self) -> StoreStats {
        self.engine.stats()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.engine.stop_flusher();
        if let Some(thread) = self.flusher.take() {
            // A panicked flusher leaves the pipe to the close's checkpoint.
            let _ = thread.join();
        }
        self.engine.stop_applier();
        if let Some(thread) = self.applier.take() {
            // What it left unapplied, the close's checkpoint applies.
            let _ = thread.join();
        }
        self.engine.stop_checkpointer();
        if let Some(thread) = self.checkpointer.take() {
            // A panicked checkpointer has nothing left to clean up.
            let _ = thread.join();
        }
        // A clean close leaves sled flushed, the log short and no removed task in the index;
        // a failure here only means the next open replays (or rebuilds) more.
        let _ = self.engine.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_change_signal_never_loses_a_wake_up() {
        // The waiter either sees the new epoch before sleeping or is woken by the move; a
        // lost wake-up would leave it asleep for its whole (long) timeout.
        let signal = Arc::new(ChangeSignal::default());
        for round in 0..500 {
            let seen = signal.epoch();
            let (tx, rx) = mpsc::channel();
            let waiter = {
                let signal = Arc::clone(&signal);
                std::thread::spawn(move || {
                    let _ = tx.send(signal.wait_past(seen, Duration::from_secs(60)));
                })
            };
            if round % 2 == 0 {
                std::thread::yield_now();
            }
            signal.notify();
            let got = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the waiter was woken");
            assert_eq!(got, seen + 1);
            waiter.join().expect("waiter");
        }
    }

    #[test]
    fn a_change_signal_returns_at_once_when_the_epoch_moved() {
        let signal = ChangeSignal::default();
        signal.notify();
        assert_eq!(signal.wait_past(0, Duration::from_secs(60)), 1);
        // And times out when nothing moves.
        assert_eq!(signal.wait_past(1, Duration::from_millis(1)), 1);
    }
}
