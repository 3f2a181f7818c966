//! The task store: task records and their event logs, durable as `--durability` says.
//!
//! This is the **API boundary** between the protocol layer (`server`) and storage. The protocol
//! layer never touches sled or files; storage never speaks JSON-RPC.
//!
//! Architecture invariants:
//! - An event is durable (per [`Durability`]) before [`Store::append`] returns, and nothing can
//!   read it before then: no event is sent before it is durable.
//! - Seqs of a task are 0, 1, 2, … with no gap, across restarts.
//! - Every task's log starts with a `dev.taskstream.task.status` `{"status":"working"}` event
//!   (written by [`Store::create_task`]) and, once terminal, ends with one for its terminal
//!   status (written by [`Store::finish`]); the log is frozen after that.
//!
//! The placeholder implementation below keeps everything in memory; the durable backend (sled
//! plus a write-ahead log with real `fdatasync`) replaces its internals, keeping this API.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use taskstream_core::{Millis, Retained, RetentionPolicy, Seq};

/// The event type of status transitions (INTERFACE.md, "Tools the server offers").
pub const STATUS_EVENT_TYPE: &str = "dev.taskstream.task.status";

/// When an appended event is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// The status of a task (SEP-1686 / SEP-2663 share these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// Storage failed; the event was not appended.
    Storage(StoreError),
}

/// A storage failure (I/O, corruption, a locked data dir).
#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

/// A counter that moves whenever any task gains an event or changes status; the delivery
/// thread waits on it instead of polling.
#[derive(Debug, Default)]
pub struct ChangeSignal {
    epoch: Mutex<u64>,
    cond: Condvar,
}

impl ChangeSignal {
    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        *lock(&self.epoch)
    }

    /// Advances the epoch and wakes every waiter.
    pub fn notify(&self) {
        *lock(&self.epoch) += 1;
        self.cond.notify_all();
    }

    /// Waits until the epoch differs from `seen` or `timeout` passes; returns the epoch.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let guard = lock(&self.epoch);
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |e| *e == seen)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct MemTask {
    record: TaskRecord,
    earliest: Seq,
    events: Vec<StoredEvent>,
}

/// The task store. Shared between threads behind an `Arc`.
pub struct Store {
    config: StoreConfig,
    tasks: Mutex<HashMap<String, MemTask>>,
    changes: ChangeSignal,
}

impl Store {
    /// Opens (or creates) the store and recovers it: every task that was running when the
    /// process died ends as `failed` with a terminal status event.
    ///
    /// # Errors
    /// [`StoreError`] if the data dir cannot be opened or is held by another server.
    pub fn open(config: StoreConfig, _now: Millis) -> Result<Store, StoreError> {
        Ok(Store {
            config,
            tasks: Mutex::new(HashMap::new()),
            changes: ChangeSignal::default(),
        })
    }

    /// The retention policy in force.
    pub fn retention(&self) -> &RetentionPolicy {
        &self.config.retention
    }

    /// The signal that moves on every change.
    pub fn changes(&self) -> &ChangeSignal {
        &self.changes
    }

    /// Creates a task (status `working`) and appends its first event, seq 0:
    /// `dev.taskstream.task.status` `{"status":"working"}`. Durable before it returns.
    ///
    /// # Errors
    /// [`AppendError::Storage`] on I/O failure.
    pub fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        let id = record.task_id.clone();
        lock(&self.tasks).insert(
            id.clone(),
            MemTask {
                record,
                earliest: Seq::ZERO,
                events: Vec::new(),
            },
        );
        self.push(
            &id,
            STATUS_EVENT_TYPE,
            br#"{"status":"working"}"#,
            now,
            None,
        )
        .map(|_| ())
    }

    /// The task, if it exists (principal checks are the caller's).
    pub fn task(&self, task_id: &str) -> Option<TaskView> {
        lock(&self.tasks).get(task_id).map(view)
    }

    /// Every task, oldest first (by creation time, then id).
    pub fn tasks(&self) -> Vec<TaskView> {
        let mut all: Vec<TaskView> = lock(&self.tasks).values().map(view).collect();
        all.sort_by(|a, b| {
            (a.record.created_at, &a.record.task_id).cmp(&(b.record.created_at, &b.record.task_id))
        });
        all
    }

    /// Appends an event to a running task and returns its seq, once durable.
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
        self.push(task_id, event_type, payload, now, None)
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
        let mut payload = serde_json::json!({ "status": status.as_str() });
        if let Some(m) = &message {
            payload["message"] = serde_json::Value::String(m.clone());
        }
        let bytes = serde_json::to_vec(&payload)
            .map_err(|e| AppendError::Storage(StoreError(e.to_string())))?;
        self.push(
            task_id,
            STATUS_EVENT_TYPE,
            &bytes,
            now,
            Some((status, message, result, error)),
        )
    }

    /// The event `seq` of a task, if retained.
    pub fn event(&self, task_id: &str, seq: Seq) -> Option<StoredEvent> {
        let tasks = lock(&self.tasks);
        let t = tasks.get(task_id)?;
        let idx = usize::try_from(seq.get().checked_sub(t.earliest.get())?).ok()?;
        t.events.get(idx).cloned()
    }

    /// Appends to `out` up to `max` retained events of a task from `from` on, in seq order.
    pub fn read_from(&self, task_id: &str, from: Seq, max: usize, out: &mut Vec<StoredEvent>) {
        let tasks = lock(&self.tasks);
        if let Some(t) = tasks.get(task_id) {
            let skip =
                usize::try_from(from.get().saturating_sub(t.earliest.get())).unwrap_or(usize::MAX);
            out.extend(t.events.iter().skip(skip).take(max).cloned());
        }
    }

    /// Applies retention at `now`: drops events past their age or beyond the count, and removes
    /// terminal tasks past their terminal retention, from disk as well. Returns how many tasks
    /// were removed.
    pub fn sweep(&self, now: Millis) -> usize {
        let policy = self.config.retention;
        let mut tasks = lock(&self.tasks);
        let before = tasks.len();
        tasks.retain(|_, t| {
            !(t.record.status.is_terminal()
                && policy.is_task_expired(t.record.last_updated_at, now))
        });
        for t in tasks.values_mut() {
            let drop = t
                .events
                .iter()
                .take_while(|e| policy.is_expired(e.at, now))
                .count();
            t.events.drain(..drop);
            t.earliest = Seq::new(t.earliest.get() + drop as u64).unwrap_or(Seq::MAX);
        }
        let removed = before - tasks.len();
        drop(tasks);
        self.changes.notify();
        removed
    }

    fn push(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        finish: Option<(
            TaskStatus,
            Option<String>,
            Option<serde_json::Value>,
            Option<serde_json::Value>,
        )>,
    ) -> Result<Seq, AppendError> {
        taskstream_core::EventType::new(event_type).map_err(AppendError::InvalidType)?;
        let p = taskstream_core::Payload::new(payload).map_err(AppendError::InvalidPayload)?;
        let limit = self.config.retention.max_payload_bytes;
        if p.compact_len() > limit as usize {
            return Err(AppendError::PayloadTooLarge {
                size: p.compact_len(),
                limit,
            });
        }
        let mut compact = vec![0; p.compact_len()];
        p.write_compact(&mut compact)
            .map_err(AppendError::InvalidPayload)?;
        let mut tasks = lock(&self.tasks);
        let t = tasks.get_mut(task_id).ok_or(AppendError::UnknownTask)?;
        if t.record.status.is_terminal() {
            return Err(AppendError::Terminal);
        }
        let seq = Seq::new(t.earliest.get() + t.events.len() as u64).unwrap_or(Seq::MAX);
        t.events.push(StoredEvent {
            seq,
            event_type: event_type.to_owned(),
            payload: compact,
            at: now,
        });
        let max = self.config.retention.max_events as usize;
        if t.events.len() > max {
            let drop = t.events.len() - max;
            t.events.drain(..drop);
            t.earliest = Seq::new(t.earliest.get() + drop as u64).unwrap_or(Seq::MAX);
        }
        if let Some((status, message, result, error)) = finish {
            t.record.status = status;
            t.record.status_message = message;
            t.record.result = result;
            t.record.error = error;
            t.record.last_updated_at = now;
        }
        drop(tasks);
        self.changes.notify();
        Ok(seq)
    }
}

fn view(t: &MemTask) -> TaskView {
    let next = Seq::new(t.earliest.get() + t.events.len() as u64).unwrap_or(Seq::MAX);
    TaskView {
        record: t.record.clone(),
        retained: Retained::new(t.earliest, next).unwrap_or(Retained::EMPTY),
    }
}
