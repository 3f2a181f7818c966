//! The store's vocabulary: configuration, task records and events as the server sees them,
//! the change signal, the counters, and the messages and constants both backends share. Near
//! the bottom of the store: it imports only the lock helpers.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use taskstream_core::{Millis, Retained, RetentionPolicy, Seq};

use super::sync::lock;

/// The default of `--lease-timeout`: how long a PostgreSQL replica's lease lasts without
/// renewal.
pub const DEFAULT_LEASE_TIMEOUT: Duration = Duration::from_secs(15);

/// The default of `--store-pool`: how many connections a PostgreSQL replica's reads may hold
/// at once.
pub const DEFAULT_PG_POOL_SIZE: usize = 16;

/// The default of `--store-writers`: how many connections of a PostgreSQL replica commit
/// batches of events side by side.
pub const DEFAULT_PG_WRITERS: usize = 2;

/// The default of `--store-cache-mb`: how many MiB of committed events a PostgreSQL replica
/// keeps to answer reads without the database.
pub const DEFAULT_PG_CACHE_MB: usize = 64;
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

/// How to open a [`Store`](crate::Store).
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
    /// beyond it new events and new tasks are refused
    /// ([`AppendError::StoreFull`](crate::AppendError::StoreFull)) until retention frees
    /// some. [`DEFAULT_MAX_STORE_BYTES`] unless told otherwise.
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

/// Counters of what the log did, for tests and measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalStats {
    /// `fdatasync` calls on segment files.
    pub syncs: u64,
    /// `write` calls on segment files.
    pub writes: u64,
    /// Bytes written to segment files.
    pub bytes: u64,
    /// Segments created.
    pub segments: u64,
    /// Records per group commit (`group` and `none` mode): how well commits batch.
    pub batch_records: crate::stats::Histogram,
    /// Per group commit, microseconds from its first record entering the log's buffer to the
    /// commit being durable: the longest append-to-durable wait of the batch.
    pub commit_wait_micros: crate::stats::Histogram,
}

impl Default for WalStats {
    fn default() -> WalStats {
        WalStats {
            syncs: 0,
            writes: 0,
            bytes: 0,
            segments: 0,
            batch_records: crate::stats::Histogram::default(),
            commit_wait_micros: crate::stats::Histogram {
                bounds: &crate::stats::MICROS_BOUNDS,
                ..crate::stats::Histogram::default()
            },
        }
    }
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
