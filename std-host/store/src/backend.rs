//! [`TaskStore`]: what the server needs of storage, and no more. Two implementations: the
//! embedded data dir ([`Store`]: the write-ahead log plus sled, or memory only) and
//! PostgreSQL ([`super::pg::PgStore`], `--store postgres://…`, shared by several replicas).
//!
//! Everything above this trait — eras, `tasks/stream`, the resume decision, `events_gone`,
//! what a client is told — is the server's shared code; a backend only stores and reads. Every
//! backend keeps the invariants of [`super`]: an event is durable before anyone can read it,
//! a task's seqs are 0, 1, 2, … with no gap, its log starts with the `working` status event
//! and, once terminal, ends with the terminal one and is frozen; a read is bounded by the
//! retained range its task reported, so a seq below `earliest` is `events_gone`, never a skip.

use taskstream_core::{Millis, RetentionPolicy, Seq};

use super::error::{AppendError, StoreError};
use super::model::{ChangeSignal, StoreStats, TaskRecord, TaskStatus, TaskView};
use super::raw::RawEvent;

/// The storage interface of the server (see the module docs). Shared between threads.
pub trait TaskStore: Send + Sync {
    /// The retention policy in force.
    fn retention(&self) -> &RetentionPolicy;

    /// The signal that moves on every change a reader may care about (an append, a status
    /// change, retention); with a shared store also on changes made by other replicas.
    fn changes(&self) -> &ChangeSignal;

    /// Whether storage stopped for good (fail-stop): the server tells its clients and exits.
    fn has_failed(&self) -> bool;

    /// Whether other processes change the same tasks (a shared store): then the server wakes
    /// every waiting stream whenever [`changes`](Self::changes) moves, since the change may
    /// not have come through this process.
    fn is_shared(&self) -> bool {
        false
    }

    /// Creates a task (status `working`) with its first event, seq 0: the `working` status
    /// event. Durable before it returns (so before the `CreateTaskResult` is sent).
    ///
    /// # Errors
    /// [`AppendError`]; on error no task was created.
    fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError>;

    /// The task and its retained range, if it exists (principal checks are the caller's).
    ///
    /// # Errors
    /// [`StoreError`] if storage cannot be read now (a shared store's database is
    /// unreachable): not the same as a task that does not exist.
    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError>;

    /// The task, if it exists and storage could be read ([`lookup`](Self::lookup) without the
    /// difference).
    fn task(&self, task_id: &str) -> Option<TaskView> {
        self.lookup(task_id).ok().flatten()
    }

    /// Every task, oldest first (by creation time, then id); empty if storage cannot be read.
    fn tasks(&self) -> Vec<TaskView>;

    /// Every task, oldest first ([`tasks`](Self::tasks) telling an unreadable store from an
    /// empty one).
    ///
    /// # Errors
    /// [`StoreError`] if storage cannot be read now.
    fn list(&self) -> Result<Vec<TaskView>, StoreError> {
        Ok(self.tasks())
    }

    /// Appends an event to a running task and returns its seq once it is durable and visible.
    /// A shared store refuses an append from a replica that no longer holds the task's lease
    /// ([`AppendError::Terminal`]: the task was ended by another replica).
    ///
    /// # Errors
    /// [`AppendError`]; on error nothing was appended.
    fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError>;

    /// Appends an event without waiting for it to be durable: it has its seq when this
    /// returns, and is visible (read, delivered) only once a flush covers it, so nothing is
    /// delivered before it is durable. A store without a pipelined path appends and waits,
    /// which keeps the same promise.
    ///
    /// # Errors
    /// [`AppendError`]; on error nothing was appended.
    fn emit(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.append(task_id, event_type, payload, now)
    }

    /// Moves a running task to a terminal `status` with its result or error and appends the
    /// terminal status event, atomically; returns that event's seq.
    ///
    /// # Errors
    /// [`AppendError::Terminal`] if the task already is terminal (the first end wins).
    fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError>;

    /// Hands up to `max` retained events of a task from `from` on, in seq order, to `push`;
    /// returns how many. Stops early at a seq no longer retained, and may hand fewer than
    /// are retained (a shared store answers with what its cache holds): a caller wanting
    /// more reads again from the next seq; 0 means `from` is not there.
    ///
    /// # Errors
    /// [`StoreError`] if storage cannot be read; the events before it were handed out.
    fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: &mut dyn FnMut(RawEvent),
    ) -> Result<usize, StoreError>;

    /// Applies retention at `now` (by count, age and terminal retention); returns how many
    /// tasks were removed.
    fn sweep(&self, now: Millis) -> usize;

    /// What kind of store this is, for metrics: `data_dir`, `memory` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Whether the store can take writes now (for a readiness probe): `Err` says why not.
    /// By default, whether it has not failed.
    ///
    /// # Errors
    /// Why the store cannot take writes now.
    fn health(&self) -> Result<(), String> {
        if self.has_failed() {
            Err("storage failed (fail-stop)".into())
        } else {
            Ok(())
        }
    }

    /// Counters of what storage did (the data dir's log), where the store keeps them.
    fn stats(&self) -> Option<StoreStats> {
        None
    }

    /// The bytes counted against `--max-store-bytes` and the limit, where the store counts
    /// them.
    fn budget(&self) -> Option<(u64, u64)> {
        None
    }

    /// A shared store's connection pool: connections in use, the pool's size, callers waiting.
    fn pool(&self) -> Option<crate::stats::PoolStats> {
        None
    }

    /// A replica's leases and batch commits, where the store is shared by replicas.
    fn replica(&self) -> Option<crate::stats::ReplicaStats> {
        None
    }
}
