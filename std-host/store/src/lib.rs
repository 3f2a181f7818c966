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
mod frame;
mod fsutil;
mod index;
mod layout;
mod log;
mod model;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod pg;
#[cfg(feature = "postgres")]
mod pg_cache;
#[cfg(feature = "postgres")]
mod pg_chunk;
mod raw;
mod recovery;
pub mod stats;
mod storage;
mod sync;
mod tree;
mod wal;

use std::fs::File;
use std::sync::Arc;
use std::thread::JoinHandle;

use taskstream_core::{Millis, RetentionPolicy, Seq};

pub use backend::TaskStore;
pub use error::{AppendError, IndexError, IndexErrorKind, StoreError};
#[cfg(feature = "postgres")]
pub use pg::{PgConfig, PgStore};

pub use model::{
    ChangeSignal, Durability, StoreConfig, StoreStats, StoredEvent, TaskRecord, TaskStatus,
    TaskView, WalStats, DEFAULT_INDEX_CACHE_BYTES, DEFAULT_LEASE_TIMEOUT, DEFAULT_MAX_STORE_BYTES,
    DEFAULT_PG_CACHE_MB, DEFAULT_PG_POOL_SIZE, DEFAULT_PG_WRITERS, REPAIR_FAILURE_MESSAGE,
    RESTART_FAILURE_MESSAGE, STATUS_EVENT_TYPE, TASK_OVERHEAD_BYTES,
};
pub use raw::RawEvent;
pub use recovery::RecoveryReport;
pub use wal::{Damage, TornTail, WalError};

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
    fn from_opened(o: recovery::Opened) -> Store {
        Store {
            config: o.config,
            engine: o.engine,
            checkpointer: o.checkpointer,
            flusher: o.flusher,
            applier: o.applier,
            report: o.report,
            _lock: o.lock,
        }
    }

    /// Opens (or creates) the store and recovers it: every task that was running when the
    /// process died ends as `failed` with a terminal status event.
    ///
    /// # Errors
    /// [`StoreError`] if the data dir cannot be opened or is held by another server
    /// ([`StoreError::Locked`]), or its log or sled cannot be read.
    pub fn open(config: StoreConfig, now: Millis) -> Result<Store, StoreError> {
        recovery::open(config, now, recovery::Mode::Refuse).map(Store::from_opened)
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
        recovery::open(config, now, recovery::Mode::Repair).map(Store::from_opened)
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

impl TaskStore for Store {
    fn retention(&self) -> &RetentionPolicy {
        Store::retention(self)
    }

    fn changes(&self) -> &ChangeSignal {
        Store::changes(self)
    }

    fn has_failed(&self) -> bool {
        Store::has_failed(self)
    }

    fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        Store::create_task(self, record, now)
    }

    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        Ok(Store::task(self, task_id))
    }

    fn task(&self, task_id: &str) -> Option<TaskView> {
        Store::task(self, task_id)
    }

    fn tasks(&self) -> Vec<TaskView> {
        Store::tasks(self)
    }

    fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        Store::append(self, task_id, event_type, payload, now)
    }

    fn emit(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        Store::emit(self, task_id, event_type, payload, now)
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
        Store::finish(self, task_id, status, message, result, error, now)
    }

    fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: &mut dyn FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        Store::read_raw_from(self, task_id, from, max, push)
    }

    fn sweep(&self, now: Millis) -> usize {
        Store::sweep(self, now)
    }

    fn kind(&self) -> &'static str {
        if self.config().data_dir.is_some() {
            "data_dir"
        } else {
            "memory"
        }
    }

    fn stats(&self) -> Option<StoreStats> {
        Some(Store::stats(self))
    }

    fn budget(&self) -> Option<(u64, u64)> {
        Some((self.stored_bytes(), self.config().max_store_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

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
