//! The running store: the in-memory task table, appends (seq allocation, log, sled, visibility),
//! reads, retention, the store-wide budget, checkpoints and index rebuilds.
//!
//! A running task keeps its newest events in a core `EventRing` as a read cache (bounded:
//! [`CACHE_EVENTS`] events in [`CACHE_BYTES`] bytes per running task; a small ring until the
//! task needs more, `store/cache.rs`). An event enters the ring
//! only after it is durable, so the ring never shows what the log might lose; reads of older
//! seqs, and of terminal tasks, go to sled, and (in `group` and `none` mode, on a data dir) to
//! the task's unapplied set
//! for what the applier has not yet written to sled.
//!
//! Locks, outermost first: a task's `append` lock (held across a whole append), `flushing` (one
//! drain at a time), the checkpoint `gate` (shared by writers from log submission until the
//! change is published, and by the applier while it writes to sled; exclusive while a
//! checkpoint rotates the log), `applying` (one application to sled at a time), then
//! short-lived locks (a task's `state`, the task table, the
//! log's queue, the `index` pointer, which only a rebuild holding the gate exclusively
//! replaces). A checkpoint (and a rebuild, which runs inside one) takes `checkpointing` and
//! then the gate, never a task's lock, so it can never wait on itself or on a writer.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use taskstream_core::record::{self, EventRecord, Record};
use taskstream_core::{EventType, Millis, Payload, Retained, RetentionPolicy, Seq};

use super::checkpoint;
use super::index::{encode_into, Index};
use super::layout::{self, Generation};
use super::wal::{self, Wal};
use super::{
    lock, lock_read, lock_write, AppendError, ChangeSignal, Durability, RawEvent, StoreError,
    StoreStats, StoredEvent, TaskRecord, TaskStatus, TaskView, STATUS_EVENT_TYPE,
};

/// How often the background thread checkpoints (when anything was logged since).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);
/// Log bytes after which a checkpoint is due at once.
const CHECKPOINT_BYTES: u64 = 64 << 20;
/// The least time between the end of one index rebuild and the start of the next.
const REBUILD_EVERY: Duration = Duration::from_secs(10);
/// The least time between rebuilds as a multiple of the last rebuild's duration, so that
/// rebuilding takes at most a tenth of the checkpoint thread's time however large the index.
const REBUILD_SPACING: u32 = 10;
/// Bytes of events dropped by the count or age limits that make a rebuild due (when they are
/// also at least half of what is retained, so that a rebuild copies at most twice what it
/// clears).
const REBUILD_MIN_DROPPED: u64 = 1 << 20;
/// How long a rebuild waits for the old index to be let go (by readers that took it before
/// the switch, then by sled's threads) before it leaves the directory to a later checkpoint.
const RETIRE_WAIT: Duration = Duration::from_secs(10);

/// Events a running task's read cache holds at most.
pub(crate) const CACHE_EVENTS: usize = 128;
/// Bytes (event types plus payloads) a running task's read cache holds at most.
pub(crate) const CACHE_BYTES: usize = 16 << 10;

/// A running task's newest events (small first, grown on demand: `store/cache.rs`).
type Cache = super::cache::TaskCache;

/// Appends queued for publication after which the appending thread flushes them itself,
/// so a producer faster than the device waits for it rather than queueing without bound.
const MAX_PENDING: usize = 4096;

/// Published (durable) appends not yet applied to the index after which an appending thread
/// applies them itself, so a producer faster than sled waits for it rather than letting the
/// unapplied set grow without bound.
const MAX_UNAPPLIED: usize = 16384;
/// Bytes of the unapplied set (records plus types and payloads) after which likewise.
const MAX_UNAPPLIED_BYTES: u64 = 16 << 20;
/// Unapplied appends the applier writes to sled in one batch at most.
const APPLY_BATCH: usize = 4096;

/// An append logged (in `group` mode: submitted to the log without waiting) and not yet
/// published: everything needed to apply it to the index and to make it visible.
pub(crate) struct Pending {
    slot: Arc<Slot>,
    task_id: String,
    seq: Seq,
    next: Seq,
    at: Millis,
    event_type: String,
    payload: Vec<u8>,
    /// The task's new record, for a creation or an end (a `Transition`).
    state: Option<Vec<u8>>,
    /// The count limit's new floor, if this append pushes events out (a `Truncate`).
    floor: Option<Seq>,
    /// The encoded records: the event's, then the truncation's.
    buf: Vec<u8>,
    event_len: usize,
    new_record: Option<TaskRecord>,
    new_record_bytes: Option<u64>,
    /// What the append's reservation counted as freed by the truncation.
    events_freed: u64,
}

impl Pending {
    /// The memory the unapplied set counts for it.
    fn footprint(&self) -> u64 {
        (self.buf.len() + self.payload.len() + self.event_type.len()) as u64
    }

    fn record(&self) -> Record<'_> {
        let event = EventRecord {
            task_id: &self.task_id,
            seq: self.seq,
            at: self.at,
            event_type: &self.event_type,
            payload: &self.payload,
        };
        match &self.state {
            Some(state) => Record::Transition { event, state },
            None => Record::Event(event),
        }
    }

    fn truncate(&self) -> Option<Record<'_>> {
        self.floor.map(|before| Record::Truncate {
            task_id: &self.task_id,
            before,
        })
    }

    /// The same, with its records encoded into `buf`.
    fn encoded(mut self) -> Result<Pending, StoreError> {
        let mut buf = Vec::with_capacity(self.payload.len() + 128);
        encode_into(&self.record(), &mut buf)?;
        let event_len = buf.len();
        if let Some(t) = self.truncate() {
            encode_into(&t, &mut buf)?;
        }
        self.buf = buf;
        self.event_len = event_len;
        Ok(self)
    }

    /// Its records with their encodings, in log order.
    fn records(&self) -> impl Iterator<Item = (Record<'_>, &[u8])> {
        std::iter::once((self.record(), &self.buf[..self.event_len]))
            .chain(self.truncate().map(|t| (t, &self.buf[self.event_len..])))
    }
}

/// The appends queued for publication, in log order.
#[derive(Default)]
struct Pipe {
    items: Vec<Pending>,
    /// The flusher is to stop (once the queue is empty).
    stop: bool,
    /// Appends queued so far: the ticket of the last one.
    queued: u64,
    /// A waiter is draining (the leader); the others wait on `drained`.
    draining: bool,
}

/// The pipeline's (`group` and `none` mode) published appends that are durable but not yet in
/// the index, in log order
/// (each is also in its task's `SlotState::unapplied`, where reads find it).
#[derive(Default)]
struct Unapplied {
    items: VecDeque<Arc<Pending>>,
    /// The sum of their footprints.
    bytes: u64,
    /// The applier is to stop.
    stop: bool,
}

/// One task.
pub(crate) struct Slot {
    /// Held across a whole append, so a task's records are in seq order in log and sled.
    append: Mutex<()>,
    pub(crate) state: Mutex<SlotState>,
}

pub(crate) struct SlotState {
    pub(crate) record: TaskRecord,
    /// The earliest retained seq.
    pub(crate) earliest: Seq,
    /// The next seq; every seq before it is durable and readable.
    pub(crate) next: Seq,
    /// False until the task's creation is durable.
    pub(crate) visible: bool,
    /// Set once terminal retention removed it.
    pub(crate) removed: bool,
    /// The newest events, while the task runs.
    pub(crate) cache: Option<Box<Cache>>,
    /// The task's published events not yet applied to the index, oldest first: always the
    /// events from some seq up to `next` (the index holds every published event before it).
    pub(crate) unapplied: VecDeque<Arc<Pending>>,
    /// Where the task stands once its logged but not yet durable appends are published
    /// (`group` mode's pipeline); `None` when nothing of it is pending.
    pub(crate) ahead: Option<Ahead>,
    /// The size (type plus payload bytes) of each retained event, oldest first: the event
    /// `earliest + i` at `i`. What the store-wide budget counts, and frees on truncation.
    pub(crate) sizes: VecDeque<u32>,
    /// The sum of `sizes`.
    pub(crate) bytes: u64,
    /// What the budget counts for the task itself: its stored record's size plus
    /// [`TASK_OVERHEAD_BYTES`](super::TASK_OVERHEAD_BYTES) (0 until it is created).
    pub(crate) record_bytes: u64,
}

/// A task's state as its pending appends leave it: what the next append allocates from.
#[derive(Clone, Copy)]
pub(crate) struct Ahead {
    /// The next seq to allocate.
    next: Seq,
    /// The earliest seq retained once the pending count truncations apply.
    earliest: Seq,
    /// A pending append ends the task.
    terminal: bool,
}

impl SlotState {
    /// The next seq, the earliest retained seq and whether the task is terminal, counting
    /// the appends logged but not yet published.
    fn head(&self) -> (Seq, Seq, bool) {
        match self.ahead {
            Some(a) => (a.next, a.earliest, a.terminal),
            None => (self.next, self.earliest, self.record.status.is_terminal()),
        }
    }

    /// Forgets the sizes of the events before `floor`; returns the bytes they took.
    fn drop_sizes_before(&mut self, floor: Seq) -> u64 {
        let n = usize::try_from(floor.distance_from(self.earliest)).unwrap_or(usize::MAX);
        let n = n.min(self.sizes.len());
        let freed: u64 = self.sizes.drain(..n).map(u64::from).sum();
        self.bytes = self.bytes.saturating_sub(freed);
        freed
    }
}

impl Slot {
    pub(crate) fn new(state: SlotState) -> Arc<Slot> {
        Arc::new(Slot {
            append: Mutex::new(()),
            state: Mutex::new(state),
        })
    }
}

/// What an append does to the task besides adding the event.
enum Op {
    Create,
    Append,
    Finish {
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
    },
}

/// State shared by the store's handle and its checkpoint thread.
pub(crate) struct Inner {
    pub(crate) retention: RetentionPolicy,
    pub(crate) durability: Durability,
    /// The most bytes (types plus payloads) of retained events across all tasks.
    max_store_bytes: u64,
    /// What the budget counts: the bytes (types plus payloads) of every retained event and
    /// each task's record charge, plus those of appends under way (reserved before they are
    /// logged).
    stored_bytes: AtomicU64,
    /// The index in use. A rebuild replaces it (under the exclusive gate); a reader or writer
    /// takes the `Arc` it finds and keeps it for one operation.
    index: RwLock<Arc<Index>>,
    pub(crate) wal: Option<Wal>,
    /// The data dir (none in memory).
    data_dir: Option<PathBuf>,
    /// The index directory in use (none in memory). Changed only under `checkpointing`.
    generation: Mutex<Option<Generation>>,
    /// Tasks removed since the index was last rebuilt: their payloads are still in its file.
    removed_since_rebuild: AtomicU64,
    /// Bytes of events dropped by the count or age limits since the last rebuild, likewise.
    dropped_since_rebuild: AtomicU64,
    /// When the last rebuild ended and how long it took, for the rate limit.
    last_rebuild: Mutex<Option<(Instant, Duration)>>,
    /// A retired index directory could not be deleted yet; the next checkpoint tries again.
    stale_left: AtomicBool,
    rebuilds: AtomicU64,
    /// Shared by writers from log submission until the change is published (or, in `event`
    /// mode and in memory, in sled) and by the applier while it writes to sled; exclusive for a
    /// checkpoint's rotation, which drains and applies inside it and thereby sees every
    /// logged record in sled.
    gate: RwLock<()>,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    /// The pipeline's (`group` and `none` mode) appends logged and not yet published, in log
    /// order.
    pipe: Mutex<Pipe>,
    /// Wakes the flusher when the pipe gets its first append.
    pipe_cond: Condvar,
    /// Wakes the waiters of a drain when it ends.
    drained: Condvar,
    /// One drain of the pipe at a time (taken before the gate), so appends are published in
    /// log order.
    flushing: Mutex<()>,
    /// The ticket of the last append published (or dropped by a failed drain: see `failed`).
    published: AtomicU64,
    /// Published appends not yet applied to the index, in log order.
    unapplied: Mutex<Unapplied>,
    /// Wakes the applier when the unapplied set gets appends (or it is to stop).
    apply_cond: Condvar,
    /// One application to the index at a time (taken inside the gate), so the index gets
    /// the unapplied appends in log order.
    applying: Mutex<()>,
    pub(crate) tasks: RwLock<HashMap<String, Arc<Slot>>>,
    pub(crate) changes: ChangeSignal,
    /// Set by a failure after which the store refuses every write.
    failed: AtomicBool,
    checkpoints: AtomicU64,
    /// The log LSN of the last checkpoint.
    checkpointed: AtomicU64,
    /// Wakes the checkpoint thread: `Some(true)` stop, `Some(false)` checkpoint now.
    wake: Mutex<Option<bool>>,
    wake_cond: Condvar,
}

impl Inner {
    pub(crate) fn new(
        retention: RetentionPolicy,
        durability: Durability,
        max_store_bytes: u64,
        index: Index,
        wal: Option<Wal>,
        on_disk: Option<(PathBuf, Generation)>,
        tasks: HashMap<String, Arc<Slot>>,
    ) -> Inner {
        let checkpointed = wal.as_ref().map_or(0, Wal::submitted);
        let (data_dir, generation) = on_disk.unzip();
        let stored: u64 = tasks
            .values()
            .map(|slot| {
                let st = lock(&slot.state);
                st.bytes + st.record_bytes
            })
            .sum();
        Inner {
            retention,
            durability,
            max_store_bytes,
            stored_bytes: AtomicU64::new(stored),
            index: RwLock::new(Arc::new(index)),
            wal,
            data_dir,
            generation: Mutex::new(generation),
            removed_since_rebuild: AtomicU64::new(0),
            dropped_since_rebuild: AtomicU64::new(0),
            last_rebuild: Mutex::new(None),
            stale_left: AtomicBool::new(false),
            rebuilds: AtomicU64::new(0),
            gate: RwLock::new(()),
            checkpointing: Mutex::new(()),
            pipe: Mutex::new(Pipe::default()),
            pipe_cond: Condvar::new(),
            drained: Condvar::new(),
            flushing: Mutex::new(()),
            published: AtomicU64::new(0),
            unapplied: Mutex::new(Unapplied::default()),
            apply_cond: Condvar::new(),
            applying: Mutex::new(()),
            tasks: RwLock::new(tasks),
            changes: ChangeSignal::default(),
            failed: AtomicBool::new(false),
            checkpoints: AtomicU64::new(0),
            checkpointed: AtomicU64::new(checkpointed),
            wake: Mutex::new(None),
            wake_cond: Condvar::new(),
        }
    }

    /// The index in use now.
    pub(crate) fn index(&self) -> Arc<Index> {
        Arc::clone(&lock_read(&self.index))
    }

    fn slot(&self, task_id: &str) -> Option<Arc<Slot>> {
        lock_read(&self.tasks).get(task_id).cloned()
    }

    pub(crate) fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        let id = record.task_id.clone();
        let slot = Slot::new(SlotState {
            record,
            earliest: Seq::ZERO,
            next: Seq::ZERO,
            visible: false,
            removed: false,
            cache: None,
            unapplied: VecDeque::new(),
            ahead: None,
            sizes: VecDeque::new(),
            bytes: 0,
            record_bytes: 0,
        });
        {
            let mut tasks = lock_write(&self.tasks);
            if tasks.contains_key(&id) {
                return Err(AppendError::Storage(StoreError::DuplicateTask(id)));
            }
            tasks.insert(id.clone(), slot);
        }
        let pushed = self.push(
            &id,
            STATUS_EVENT_TYPE,
            br#"{"status":"working"}"#,
            now,
            Op::Create,
            true,
        );
        if pushed.is_err() {
            lock_write(&self.tasks).remove(&id);
        }
        pushed.map(|_| ())
    }

    /// Appends an event; with `wait`, returns once it is durable and visible, without (in
    /// `group` and `none` mode, on a data dir) once it is logged, to become durable and
    /// visible at the next flush.
    pub(crate) fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        wait: bool,
    ) -> Result<Seq, AppendError> {
        self.push(task_id, event_type, payload, now, Op::Append, wait)
    }

    /// Returns once the event `seq` of a task (and every event before it) is durable and
    /// visible, or the task no longer exists.
    pub(crate) fn wait_durable(&self, task_id: &str, seq: Seq) -> Result<(), StoreError> {
        let Some(slot) = self.slot(task_id) else {
            return Ok(());
        };
        let pending = {
            let st = lock(&slot.state);
            st.next <= seq && st.ahead.is_some_and(|a| a.next > seq)
        };
        if pending {
            self.drain()?;
        }
        Ok(())
    }

    pub(crate) fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        let bytes = status.event_payload(message.as_deref()).into_bytes();
        self.push(
            task_id,
            STATUS_EVENT_TYPE,
            &bytes,
            now,
            Op::Finish {
                status,
                message,
                result,
                error,
            },
            true,
        )
    }

    /// Validates, allocates the seq, logs, applies to sled, then makes the event visible.
    fn push(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        op: Op,
        wait: bool,
    ) -> Result<Seq, AppendError> {
        EventType::new(event_type).map_err(AppendError::InvalidType)?;
        let p = Payload::new(payload).map_err(AppendError::InvalidPayload)?;
        let limit = self.retention.max_payload_bytes;
        // The limit is for the events tools emit; the store's own status events always fit.
        if matches!(op, Op::Append) && p.compact_len() > limit as usize {
            return Err(AppendError::PayloadTooLarge {
                size: p.compact_len(),
                limit,
            });
        }
        // What is stored is the compact form; a payload that already is compact is used as is.
        let compacted;
        let compact: &[u8] = match p.as_compact() {
            Some(text) => text,
            None => {
                let mut buf = vec![0; p.compact_len()];
                p.write_compact(&mut buf)
                    .map_err(AppendError::InvalidPayload)?;
                compacted = buf;
                &compacted
            }
        };
        if self.failed.load(Ordering::Acquire) {
            return Err(AppendError::Storage(StoreError::Failed));
        }

        let size = (event_type.len() + compact.len()) as u64;
        let finishing = matches!(op, Op::Finish { .. });
        let slot = self.slot(task_id).ok_or(AppendError::UnknownTask)?;
        let _append = lock(&slot.append);
        let (seq, earliest, new_record, sizes_front, old_record_bytes) = {
            let st = lock(&slot.state);
            // Only a creation may (and must) find the task not yet visible.
            let must_be_visible = !matches!(op, Op::Create);
            if st.removed || st.visible != must_be_visible {
                return Err(AppendError::UnknownTask);
            }
            let (head, head_earliest, terminal) = st.head();
            if terminal {
                return Err(AppendError::Terminal);
            }
            let new_record = match op {
                Op::Create => Some(st.record.clone()),
                Op::Append => None,
                Op::Finish {
                    status,
                    message,
                    result,
                    error,
                } => Some(TaskRecord {
                    status,
                    status_message: message,
                    result,
                    error,
                    last_updated_at: now,
                    ..st.record.clone()
                }),
            };
            // The sizes of the oldest events, which the count limit may push out below (an
            // estimate while appends are pending; publication corrects the budget).
            let front: Vec<u32> = st.sizes.iter().take(2).copied().collect();
            (head, head_earliest, new_record, front, st.record_bytes)
        };
        let next = seq
            .next()
            .ok_or(AppendError::Storage(StoreError::SeqExhausted))?;
        let state = match &new_record {
            Some(r) => Some(serde_json::to_vec(r).map_err(|e| {
                AppendError::Storage(StoreError::Corrupt(format!("task record: {e}")))
            })?),
            None => None,
        };
        // Retention by count: the event that makes the log too long pushes the oldest out. Like
        // the core ring, a limit of zero still keeps the newest event.
        let max = u64::from(self.retention.max_events.max(1));
        let floor = if next.distance_from(earliest) > max {
            Seq::new(next.get() - max).unwrap_or(next)
        } else {
            earliest
        };
        // One append pushes out at most the one or two events beyond the count limit.
        let pushed_out = usize::try_from(floor.distance_from(earliest)).unwrap_or(usize::MAX);
        let events_freed: u64 = sizes_front
            .iter()
            .take(pushed_out)
            .copied()
            .map(u64::from)
            .sum();
        // A creation or an end (re)writes the task's record, which the budget counts too.
        let new_record_bytes = state
            .as_ref()
            .map(|s| super::TASK_OVERHEAD_BYTES + s.len() as u64);
        let (size, freed) = match new_record_bytes {
            Some(r) => (size + r, events_freed + old_record_bytes),
            None => (size, events_freed),
        };
        self.reserve(size, freed, finishing)?;

        let pending = Pending {
            slot: Arc::clone(&slot),
            task_id: task_id.to_owned(),
            seq,
            next,
            at: now,
            event_type: event_type.to_owned(),
            payload: compact.to_vec(),
            state,
            floor: (floor > earliest).then_some(floor),
            buf: Vec::new(),
            event_len: 0,
            new_record,
            new_record_bytes,
            events_freed,
        };
        let pending = pending.encoded().map_err(|e| {
            self.release(size, freed);
            AppendError::Storage(e)
        })?;
        let ahead = Ahead {
            next,
            earliest: floor,
            terminal: finishing,
        };
        if self.pipelined() {
            // Backpressure: when sled falls behind, this appender applies what is published
            // (outside any drain: the flusher goes on publishing meanwhile).
            if self.unapplied_over_limit() {
                self.apply_unapplied().map_err(|e| {
                    self.release(size, freed);
                    AppendError::Storage(e)
                })?;
            }
            // Logged now, durable and visible at the next flush (by the flusher, or by this
            // thread below when it must wait).
            // Set before the append is queued, so that its publication (which may come at
            // once) finds it and clears it.
            let before = lock(&slot.state).ahead.replace(ahead);
            let (queued, ticket) = self.enqueue(pending).map_err(|e| {
                lock(&slot.state).ahead = before;
                self.release(size, freed);
                AppendError::Storage(e)
            })?;
            let must_wait = wait || new_record_bytes.is_some();
            if must_wait || queued >= MAX_PENDING {
                self.drain_through(ticket).map_err(AppendError::Storage)?;
            }
            return Ok(seq);
        }
        self.write(&pending.buf, true, |index| {
            index.apply_all(pending.records())
        })
        .map_err(|e| {
            self.release(size, freed);
            AppendError::Storage(e)
        })?;
        self.publish(&Arc::new(pending), false);
        self.changes.notify();
        Ok(seq)
    }

    /// Whether appends go through the pipeline: `group` and `none` mode with a log (in memory,
    /// where nothing is logged, an append is visible at once whatever the mode). In `none`
    /// mode a submission is written to the log file at once and a drain flushes nothing, so
    /// the pipeline only takes sled off the appender's path.
    fn pipelined(&self) -> bool {
        self.durability != Durability::Event && self.wal.is_some()
    }

    /// Logs a pending append (without waiting) and queues it for publication, in one order
    /// for both; returns how many are queued and its ticket.
    fn enqueue(&self, pending: Pending) -> Result<(usize, u64), StoreError> {
        let Some(wal) = &self.wal else {
            return Err(StoreError::Failed);
        };
        let queued = {
            let _gate = lock_read(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            let mut pipe = lock(&self.pipe);
            if let Err(e) = wal.submit(&pending.buf, false) {
                drop(pipe);
                self.set_failed();
                return Err(StoreError::Wal(e));
            }
            pipe.items.push(pending);
            pipe.queued += 1;
            (pipe.items.len(), pipe.queued)
        };
        if queued.0 == 1 {
            self.pipe_cond.notify_one();
        }
        Ok(queued)
    }

    /// Makes every queued append durable (one flush for all), applies them to the index in
    /// one batch, then publishes them; returns once every append queued before the call is
    /// published (by this thread, or by the one that took it first). A failure is fail-stop.
    pub(crate) fn drain(&self) -> Result<(), StoreError> {
        let ticket = lock(&self.pipe).queued;
        self.drain_through(ticket)
    }

    /// [`drain`](Self::drain), unless the append with `ticket` (and so every one before it)
    /// was published meanwhile: a waiter whose append a drain that ran while it waited
    /// covered returns at once, instead of flushing the one or two appends queued since (the
    /// next drain then takes them with everything else queued by then).
    fn drain_through(&self, ticket: u64) -> Result<(), StoreError> {
        if !self.pipelined() {
            return Ok(());
        }
        let mut pipe = lock(&self.pipe);
        loop {
            if self.published.load(Ordering::Acquire) >= ticket {
                return if self.failed.load(Ordering::Acquire) {
                    Err(StoreError::Failed)
                } else {
                    Ok(())
                };
            }
            if pipe.draining {
                // Group commit: the leader's drain may cover this append; look again when
                // it ends.
                pipe = self
                    .drained
                    .wait(pipe)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            pipe.draining = true;
            drop(pipe);
            let result = {
                let _one = lock(&self.flushing);
                let _gate = lock_read(&self.gate);
                self.drain_locked()
            };
            pipe = lock(&self.pipe);
            pipe.draining = false;
            self.drained.notify_all();
            result?;
        }
    }

    /// [`drain`](Self::drain) for a caller that holds `flushing` and the gate (shared, or
    /// exclusive: a checkpoint, so that everything logged is in the index before it records
    /// its LSN).
    fn drain_locked(&self) -> Result<(), StoreError> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let (items, upto, ticket) = {
            let mut pipe = lock(&self.pipe);
            (
                std::mem::take(&mut pipe.items),
                wal.submitted(),
                pipe.queued,
            )
        };
        let result = self.publish_all(wal, items, upto);
        // On failure the taken appends are dropped, never published: they count as done,
        // and their waiters see `failed`. Stored only now, so a waiter that sees its ticket
        // covered sees its append published.
        self.published.store(ticket, Ordering::Release);
        result
    }

    /// Flushes the log through `upto`, publishes `items` at once (durable, not yet in the
    /// index: reads find them in their tasks' unapplied sets) and hands them to the applier.
    fn publish_all(&self, wal: &Wal, items: Vec<Pending>, upto: u64) -> Result<(), StoreError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Failed);
        }
        if items.is_empty() {
            return Ok(());
        }
        self.fail_stop(wal.flush_through(upto).map_err(StoreError::Wal))?;
        let items: Vec<Arc<Pending>> = items.into_iter().map(Arc::new).collect();
        // Into each task's set first, then the applier's queue: the applier takes an append
        // out of its task's set only after applying it, so it must find it there.
        for p in &items {
            self.publish(p, true);
        }
        {
            let mut unapplied = lock(&self.unapplied);
            unapplied.bytes += items.iter().map(|p| p.footprint()).sum::<u64>();
            unapplied.items.extend(items);
        }
        self.apply_cond.notify_one();
        self.changes.notify();
        if upto.saturating_sub(self.checkpointed.load(Ordering::Relaxed)) > CHECKPOINT_BYTES {
            self.wake_checkpointer(false);
        }
        Ok(())
    }

    /// Makes a durable append visible: the task's published state, its read cache, and (when
    /// it is not yet in the index, `unapplied`) its task's unapplied set.
    fn publish(&self, p: &Arc<Pending>, unapplied: bool) {
        let mut st = lock(&p.slot.state);
        if unapplied {
            st.unapplied.push_back(Arc::clone(p));
        }
        let event_size = (p.event_type.len() + p.payload.len()) as u64;
        st.sizes
            .push_back(u32::try_from(event_size).unwrap_or(u32::MAX));
        st.bytes += event_size;
        if let Some(r) = p.new_record_bytes {
            st.record_bytes = r;
        }
        let floor = p.floor.unwrap_or(st.earliest).max(st.earliest);
        let dropped = st.drop_sizes_before(floor);
        // The append reserved its size less `events_freed`, an estimate from the oldest sizes
        // it saw; what was really dropped settles the difference.
        if dropped > p.events_freed {
            self.free(dropped - p.events_freed);
        } else if dropped < p.events_freed {
            self.stored_bytes
                .fetch_add(p.events_freed - dropped, Ordering::AcqRel);
        }
        self.dropped_since_rebuild
            .fetch_add(dropped, Ordering::Relaxed);
        st.next = p.next;
        st.earliest = floor;
        st.visible = true;
        if st.ahead.is_some_and(|a| a.next == p.next) {
            st.ahead = None;
        }
        if let Some(r) = &p.new_record {
            st.record = r.clone();
        }
        if st.record.status.is_terminal() {
            st.cache = None;
        } else if let (Ok(ty), Ok(payload)) =
            (EventType::new(&p.event_type), Payload::new(&p.payload))
        {
            let cache = st
                .cache
                .get_or_insert_with(|| Box::new(Cache::resuming_at(p.seq)));
            cache_append(cache, p.seq, p.at, ty, payload, floor);
        } else if let Some(cache) = &mut st.cache {
            // Cannot happen (both were validated); a cache that would miss it must not stay.
            cache.reset(p.next);
        }
    }

    /// Takes `size` bytes of the store-wide budget for an event whose append frees `freed`
    /// (events the count limit pushes out). A task's creation is refused once the budget is
    /// spent, an event too when it would overspend it; a task's end never is (it is small, and
    /// a task must be able to end), nor is an append that frees at least what it takes.
    fn reserve(&self, size: u64, freed: u64, finishing: bool) -> Result<(), AppendError> {
        let limit = self.max_store_bytes;
        let always = finishing || size <= freed;
        let updated = self
            .stored_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                let new = cur.saturating_sub(freed).saturating_add(size);
                (always || new <= limit).then_some(new)
            });
        match updated {
            Ok(_) => Ok(()),
            Err(stored) => Err(AppendError::StoreFull { stored, limit }),
        }
    }

    /// Gives back what [`reserve`](Self::reserve) took, for an append that failed.
    fn release(&self, size: u64, freed: u64) {
        // Both directions saturate, so a failed append cannot wrap the counter.
        let _ = self
            .stored_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                Some(cur.saturating_add(freed).saturating_sub(size))
            });
    }

    /// Returns `bytes` to the budget (events truncated or removed).
    fn free(&self, bytes: u64) {
        self.release(bytes, 0);
    }

    /// The bytes of retained events now counted against the budget.
    pub(crate) fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Acquire)
    }

    /// Logs `bytes` (durably with `wait`) and applies the change to sled, inside the gate. A
    /// failure of either is fail-stop.
    fn write(
        &self,
        bytes: &[u8],
        wait: bool,
        apply: impl FnOnce(&Index) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let submitted = {
            let _gate = lock_read(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // What is published but not yet in the index goes first, so the index gets every
            // change in log order (a truncation or removal after the events it drops).
            self.apply_locked()?;
            let result = match &self.wal {
                Some(wal) => wal.submit(bytes, wait).map_err(StoreError::Wal),
                None => Ok(()),
            }
            .and_then(|()| apply(&self.index()));
            if result.is_err() {
                self.set_failed();
            }
            result?;
            self.wal.as_ref().map_or(0, Wal::submitted)
        };
        if submitted.saturating_sub(self.checkpointed.load(Ordering::Relaxed)) > CHECKPOINT_BYTES {
            self.wake_checkpointer(false);
        }
        Ok(())
    }

    /// Stops the store for good (fail-stop) and wakes every waiter on the change signal, so
    /// the server learns of it at once.
    fn set_failed(&self) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            crate::log::log!(
                Error,
                "storage failed: the store refuses every write from now on"
            );
        }
        self.changes.notify();
    }

    /// `result`, after making an error of it fail-stop.
    fn fail_stop<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.set_failed();
        }
        result
    }

    /// Whether a write or flush failure stopped the store.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// What the checkpoint record lists: every task the index holds (visible, not removed)
    /// and its next seq. The caller holds the gate exclusively, so every logged change is in
    /// the index; a task's published `next` may lag its index by the one append under way
    /// (never more: appends of a task hold its lock), which only makes the check at open
    /// more lenient by one.
    fn checkpoint_table(&self) -> Vec<(String, u64)> {
        let tasks = lock_read(&self.tasks);
        let mut table: Vec<(String, u64)> = tasks
            .iter()
            .filter_map(|(id, slot)| {
                let st = lock(&slot.state);
                (st.visible && !st.removed).then(|| (id.clone(), st.next.get()))
            })
            .collect();
        table.sort();
        table
    }

    pub(crate) fn task(&self, task_id: &str) -> Option<TaskView> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        view(&st)
    }

    pub(crate) fn tasks(&self) -> Vec<TaskView> {
        let slots: Vec<Arc<Slot>> = lock_read(&self.tasks).values().cloned().collect();
        let mut all: Vec<TaskView> = slots.iter().filter_map(|s| view(&lock(&s.state))).collect();
        all.sort_by(|a, b| {
            (a.record.created_at, &a.record.task_id).cmp(&(b.record.created_at, &b.record.task_id))
        });
        all
    }

    /// The retained range of a task, if it is visible.
    fn retained(&self, task_id: &str) -> Option<Retained> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        retained_of(&st)
    }

    /// The retained range of a task and, if `from` is in its read cache, up to `max` events
    /// from there (handed to `push`; their count is returned); if it is not, what of the task
    /// is not yet in the index, taken in the same look as the range.
    fn retained_or_cached(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        mut push: impl FnMut(RawEvent),
    ) -> Option<(Retained, usize, Tail)> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        let retained = retained_of(&st)?;
        let from = from.max(retained.earliest());
        let mut n = 0;
        if let Some(cache) = &st.cache {
            if cache.retained().contains(from) {
                for e in cache.iter_from(from).take(max) {
                    push(RawEvent::copied(e.seq, e.at, e.event_type, e.payload));
                    n += 1;
                }
            }
        }
        let tail = if n == 0 {
            Tail {
                start: st.unapplied.front().map(|p| p.seq),
                events: st
                    .unapplied
                    .iter()
                    .filter(|p| p.seq >= from)
                    .take(max)
                    .cloned()
                    .collect(),
            }
        } else {
            Tail::default()
        };
        Some((retained, n, tail))
    }

    pub(crate) fn event(&self, task_id: &str, seq: Seq) -> Result<Option<StoredEvent>, StoreError> {
        let mut cached = None;
        let Some((retained, n, tail)) =
            self.retained_or_cached(task_id, seq, 1, |e| cached = Some(e.to_stored()))
        else {
            return Ok(None);
        };
        if !retained.contains(seq) {
            return Ok(None);
        }
        if n == 1 {
            return Ok(cached);
        }
        if tail.start.is_some_and(|start| seq >= start) {
            return Ok(tail
                .events
                .first()
                .filter(|p| p.seq == seq)
                .map(|p| RawEvent::copied(p.seq, p.at, &p.event_type, &p.payload).to_stored()));
        }
        match self.index().event(task_id, seq)? {
            None => Ok(None),
            Some(raw) => RawEvent::from_index(raw, task_id, seq).map(|e| Some(e.to_stored())),
        }
    }

    /// Hands up to `max` retained events of a task from `from` on, in seq order, to `push`;
    /// returns how many. Stops early at a seq that retention dropped meanwhile.
    pub(crate) fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        mut push: impl FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        if max == 0 {
            return Ok(0);
        }
        let Some((retained, cached, tail)) = self.retained_or_cached(task_id, from, max, &mut push)
        else {
            return Ok(0);
        };
        if cached > 0 {
            return Ok(cached);
        }
        let from = from.max(retained.earliest());
        if from >= retained.next() {
            return Ok(0);
        }
        // The index holds every visible event before the task's first unapplied one (taken
        // in the same look as the range, so an event applied since is in both places).
        let index_end = tail
            .start
            .map_or(retained.next(), |start| start.min(retained.next()));
        let mut expected = from;
        let mut n = 0;
        if from < index_end {
            for raw in self.index().events(task_id, from, index_end).take(max) {
                match RawEvent::from_index(raw?, task_id, expected) {
                    Ok(ev) => push(ev),
                    // A hole: retention dropped these meanwhile. Stop; the caller re-checks
                    // the retained range (and answers `events_gone`).
                    Err(StoreError::Corrupt(_)) if self.gone(task_id, expected) => return Ok(n),
                    Err(e) => return Err(e),
                }
                n += 1;
                match expected.next() {
                    Some(s) => expected = s,
                    None => return Ok(n),
                }
            }
        }
        if expected < index_end {
            // The index read stopped at `max` (or short of it, which the next read resolves).
            return Ok(n);
        }
        let first = expected;
        for p in tail.events.iter().filter(|p| p.seq >= first) {
            if n >= max || p.seq != expected {
                break;
            }
            push(RawEvent::copied(p.seq, p.at, &p.event_type, &p.payload));
            n += 1;
            match expected.next() {
                Some(s) => expected = s,
                None => break,
            }
        }
        Ok(n)
    }

    pub(crate) fn read_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        out: &mut Vec<StoredEvent>,
    ) -> Result<usize, StoreError> {
        self.read_raw_from(task_id, from, max, |e| out.push(e.to_stored()))
    }

    /// Whether `seq` is no longer retained.
    fn gone(&self, task_id: &str, seq: Seq) -> bool {
        self.retained(task_id).is_none_or(|r| seq < r.earliest())
    }

    pub(crate) fn sweep(&self, now: Millis) -> usize {
        let slots: Vec<(String, Arc<Slot>)> = lock_read(&self.tasks)
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let mut removed = 0;
        let mut changed = false;
        for (id, slot) in slots {
            match self.sweep_task(&id, &slot, now) {
                Ok(Swept::Removed) => {
                    removed += 1;
                    changed = true;
                }
                Ok(Swept::Truncated) => changed = true,
                Ok(Swept::Kept) | Err(_) => {}
            }
        }
        if changed {
            self.changes.notify();
        }
        removed
    }

    fn sweep_task(&self, id: &str, slot: &Slot, now: Millis) -> Result<Swept, StoreError> {
        let _append = lock(&slot.append);
        self.settle(slot)?;
        let (record_expired, earliest, next) = {
            let st = lock(&slot.state);
            if st.removed || !st.visible {
                return Ok(Swept::Kept);
            }
            let expired = st.record.status.is_terminal()
                && self
                    .retention
                    .is_task_expired(st.record.last_updated_at, now);
            (expired, st.earliest, st.next)
        };
        if record_expired {
            let rec = Record::Remove { task_id: id };
            let mut buf = Vec::new();
            encode_into(&rec, &mut buf)?;
            self.write(&buf, false, |index| {
                index.apply(&rec, &buf)?;
                // Inside the gate, so a checkpoint never lists a task its index no longer has.
                lock(&slot.state).removed = true;
                Ok(())
            })?;
            let freed = {
                let mut st = lock(&slot.state);
                st.removed = true;
                st.sizes = VecDeque::new();
                std::mem::take(&mut st.bytes) + std::mem::take(&mut st.record_bytes)
            };
            self.free(freed);
            lock_write(&self.tasks).remove(id);
            self.removed_since_rebuild.fetch_add(1, Ordering::Relaxed);
            return Ok(Swept::Removed);
        }
        // Retention by age: events are in time order, so drop from the front.
        let mut floor = earliest;
        for raw in self.index().events(id, earliest, next) {
            let raw = raw?;
            let (rec, _) = record::decode(&raw).map_err(StoreError::Record)?;
            let Some(ev) = rec.event() else { break };
            if !self.retention.is_expired(ev.at, now) {
                break;
            }
            floor = ev.seq.next().unwrap_or(next);
        }
        self.truncate(id, slot, earliest, floor)
    }

    /// Publishes a task's pending appends, if it has any (the caller holds its append lock,
    /// so it has none after this).
    fn settle(&self, slot: &Slot) -> Result<(), StoreError> {
        if lock(&slot.state).ahead.is_some() {
            self.drain()?;
        }
        // And applies them, so the sweep's reads of the index see every published event.
        if !lock(&slot.state).unapplied.is_empty() {
            self.apply_unapplied()?;
        }
        Ok(())
    }

    /// The flusher's loop (`group` and `none` mode): drains the pipe whenever it holds appends, so an
    /// append that did not wait becomes durable and visible at once, in batches that grow
    /// with the load; until stopped.
    pub(crate) fn run_flusher(&self) {
        loop {
            {
                let mut pipe = lock(&self.pipe);
                while pipe.items.is_empty() && !pipe.stop {
                    pipe = self
                        .pipe_cond
                        .wait(pipe)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if pipe.items.is_empty() {
                    return;
                }
            }
            // A failure is fail-stop (and the appends it took are never published); the
            // queue is still drained, so nothing waits on it.
            let _ = self.drain();
        }
    }

    /// Stops the flusher once it has drained the pipe.
    pub(crate) fn stop_flusher(&self) {
        lock(&self.pipe).stop = true;
        self.pipe_cond.notify_all();
    }

    /// Whether the unapplied set is past its bounds (appenders then apply it themselves).
    fn unapplied_over_limit(&self) -> bool {
        let unapplied = lock(&self.unapplied);
        unapplied.items.len() >= MAX_UNAPPLIED || unapplied.bytes >= MAX_UNAPPLIED_BYTES
    }

    /// Applies every published append not yet in the index to it, in log order.
    pub(crate) fn apply_unapplied(&self) -> Result<(), StoreError> {
        let _gate = lock_read(&self.gate);
        self.apply_locked()
    }

    /// [`apply_unapplied`](Self::apply_unapplied) for a caller that holds the gate (shared,
    /// or exclusive: a checkpoint, so that its LSN covers only what the index has).
    fn apply_locked(&self) -> Result<(), StoreError> {
        if lock(&self.unapplied).items.is_empty() {
            return Ok(());
        }
        let _one = lock(&self.applying);
        while self.apply_batch()? > 0 {}
        Ok(())
    }

    /// Applies up to [`APPLY_BATCH`] of the oldest unapplied appends to the index in one sled
    /// batch, then takes them out of the unapplied set (after: a reader that finds one in
    /// neither place would see a gap); returns how many. The caller holds the gate and
    /// `applying`. A failure is fail-stop, and leaves them in the set (they are durable and
    /// readable there).
    fn apply_batch(&self) -> Result<usize, StoreError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Failed);
        }
        // Only the holder of `applying` takes from the front, so these stay the front.
        let batch: Vec<Arc<Pending>> = lock(&self.unapplied)
            .items
            .iter()
            .take(APPLY_BATCH)
            .cloned()
            .collect();
        if batch.is_empty() {
            return Ok(0);
        }
        let index = self.index();
        self.fail_stop(index.apply_all(batch.iter().flat_map(|p| p.records())))?;
        for p in &batch {
            let mut st = lock(&p.slot.state);
            if st.unapplied.front().is_some_and(|f| Arc::ptr_eq(f, p)) {
                st.unapplied.pop_front();
            }
        }
        let mut unapplied = lock(&self.unapplied);
        let freed: u64 = batch.iter().map(|p| p.footprint()).sum();
        unapplied.items.drain(..batch.len());
        unapplied.bytes = unapplied.bytes.saturating_sub(freed);
        Ok(batch.len())
    }

    /// The applier's loop (`group` and `none` mode): applies published appends to the index in batches
    /// while there are any, off the path that makes them visible; until stopped (what is left
    /// then is applied by the close's checkpoint).
    pub(crate) fn run_applier(&self) {
        loop {
            {
                let mut unapplied = lock(&self.unapplied);
                while (unapplied.items.is_empty() || self.failed.load(Ordering::Acquire))
                    && !unapplied.stop
                {
                    unapplied = self
                        .apply_cond
                        .wait(unapplied)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if unapplied.stop {
                    return;
                }
            }
            let _gate = lock_read(&self.gate);
            let _one = lock(&self.applying);
            // One batch per turn, so a checkpoint waiting for the gate gets it between
            // batches. A failure is fail-stop (the loop then waits for the stop).
            let _ = self.apply_batch();
        }
    }

    /// Stops the applier.
    pub(crate) fn stop_applier(&self) {
        lock(&self.unapplied).stop = true;
        self.apply_cond.notify_all();
    }

    /// Drops the events of a task before `floor` (the caller holds its append lock).
    pub(crate) fn truncate(
        &self,
        id: &str,
        slot: &Slot,
        earliest: Seq,
        floor: Seq,
    ) -> Result<Swept, StoreError> {
        if floor <= earliest {
            return Ok(Swept::Kept);
        }
        let rec = Record::Truncate {
            task_id: id,
            before: floor,
        };
        let mut buf = Vec::new();
        encode_into(&rec, &mut buf)?;
        // Not waited for: a lost truncation is redone by the next sweep or open.
        self.write(&buf, false, |index| index.apply(&rec, &buf))?;
        let mut st = lock(&slot.state);
        let freed = st.drop_sizes_before(floor);
        st.earliest = floor;
        if let Some(cache) = &mut st.cache {
            cache.evict_before(floor);
        }
        drop(st);
        self.free(freed);
        self.dropped_since_rebuild
            .fetch_add(freed, Ordering::Relaxed);
        Ok(Swept::Truncated)
    }

    /// Enforces the count limit on every task (after a restart with a smaller limit).
    pub(crate) fn enforce_count_limits(&self) -> Result<(), StoreError> {
        let slots: Vec<(String, Arc<Slot>)> = lock_read(&self.tasks)
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let max = u64::from(self.retention.max_events.max(1));
        for (id, slot) in slots {
            let _append = lock(&slot.append);
            self.settle(&slot)?;
            let (earliest, next) = {
                let st = lock(&slot.state);
                (st.earliest, st.next)
            };
            if next.distance_from(earliest) > max {
                let floor = Seq::new(next.get() - max).unwrap_or(next);
                self.truncate(&id, &slot, earliest, floor)?;
            }
        }
        Ok(())
    }

    /// Rotates the log, flushes sled to the device, then deletes the log before the rotation;
    /// then rebuilds the index if tasks were removed (or enough events dropped) and the rate
    /// limit allows.
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::IfDue)
    }

    /// The last checkpoint, on close: rebuilds the index whenever one is due but for the rate
    /// limit, so that a clean stop leaves no removed task's payload on disk.
    pub(crate) fn close(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::IfGarbage)
    }

    /// A checkpoint followed by an index rebuild, whatever the rate limit says.
    pub(crate) fn rebuild_index(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::Now)
    }

    fn checkpoint_then(&self, rebuild: Rebuild) -> Result<(), StoreError> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let _one = lock(&self.checkpointing);
        let (lsn, table) = {
            let _flushing = lock(&self.flushing);
            let _gate = lock_write(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // Every append logged so far is published and applied to the index before the LSN
            // is recorded: from the checkpoint on, an event is in the index or in the log.
            self.drain_locked()?;
            self.apply_locked()?;
            let lsn = self.fail_stop(wal.rotate().map_err(StoreError::Wal))?;
            self.fail_stop(self.index().set_checkpoint(lsn))?;
            (lsn, self.checkpoint_table())
        };
        let sync = self.durability != Durability::None;
        // A failed flush of the index leaves its file in an unknown state (as a failed
        // `fdatasync` does the log's): fail-stop, so the log it needs is never deleted.
        self.fail_stop(self.index().flush(sync))?;
        if let Some(dir) = &self.data_dir {
            self.fail_stop(checkpoint::write(dir, lsn, &table, sync))?;
        }
        wal.delete_before(lsn)?;
        self.checkpointed.store(lsn, Ordering::Relaxed);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        if self.stale_left.swap(false, Ordering::Relaxed) {
            self.delete_stale_dirs();
        }
        if self.rebuild_wanted(rebuild) {
            self.rebuild(wal, lsn)?;
        }
        Ok(())
    }

    /// Whether to rebuild the index now.
    fn rebuild_wanted(&self, rebuild: Rebuild) -> bool {
        if self.data_dir.is_none() {
            return false;
        }
        let dropped = self.dropped_since_rebuild.load(Ordering::Relaxed);
        let garbage = self.removed_since_rebuild.load(Ordering::Relaxed) > 0
            || dropped >= REBUILD_MIN_DROPPED.max(self.stored_bytes() / 2);
        match rebuild {
            Rebuild::Now => true,
            Rebuild::IfGarbage => garbage,
            Rebuild::IfDue => {
                garbage
                    && lock(&self.last_rebuild).is_none_or(|(end, took)| {
                        end.elapsed() >= REBUILD_EVERY.max(took * REBUILD_SPACING)
                    })
            }
        }
    }

    /// Rebuilds the index into a fresh sled directory holding only live data, so that what
    /// retention removed is gone from every file of the data dir. The caller holds
    /// `checkpointing` and has just checkpointed at `lsn`: the current index is durable up to
    /// there and the log holds everything after it.
    ///
    /// 1. Copy the current index into `index.<n+1>/` while writers go on applying to the
    ///    current one (and logging).
    /// 2. Under the exclusive gate: rotate the log at `end`, replay the records logged since
    ///    `lsn` into the new index, record `end` as its checkpoint, and make it the index in
    ///    use. Writers wait only for this replay.
    /// 3. Flush the new index to the device, switch `INDEX` to it (the commit point), delete
    ///    the log before `end`, then the old directory.
    ///
    /// A crash before the switch restarts from the old index and the whole log since `lsn`
    /// (still there: nothing before `end` is deleted until after the switch); a crash after it
    /// restarts from the new index, durable up to `end`. Either way the other directory is
    /// deleted at open.
    fn rebuild(&self, wal: &Wal, lsn: u64) -> Result<(), StoreError> {
        let (Some(data_dir), Some(current)) = (&self.data_dir, lock(&self.generation).clone())
        else {
            return Ok(());
        };
        let started = Instant::now();
        let removed = self.removed_since_rebuild.swap(0, Ordering::Relaxed);
        let dropped = self.dropped_since_rebuild.swap(0, Ordering::Relaxed);
        let next = current.next(data_dir);
        let result = self.rebuild_into(wal, lsn, data_dir, &next);
        let took = started.elapsed();
        *lock(&self.last_rebuild) = Some((Instant::now(), took));
        match result {
            Ok(done) => {
                self.rebuilds.fetch_add(1, Ordering::Relaxed);
                *lock(&self.generation) = Some(next);
                crate::log::log!(
                    Info,
                    "index rebuilt without {removed} removed task(s) and {dropped} bytes of dropped \
                     events: {} events copied, {} records replayed, {} ms in all, writers held {} ms",
                    done.copied,
                    done.replayed,
                    took.as_millis(),
                    done.blocked.as_millis()
                );
                self.retire(done.old);
                Ok(())
            }
            Err(e) => {
                // The removed tasks are still in the old index: the next rebuild is for them.
                self.removed_since_rebuild
                    .fetch_add(removed, Ordering::Relaxed);
                self.dropped_since_rebuild
                    .fetch_add(dropped, Ordering::Relaxed);
                crate::log::log!(Warn, "index rebuild failed: {e}");
                if !self.failed.load(Ordering::Acquire) {
                    // Not switched: the new directory is garbage, for now or for the next open.
                    let _ = std::fs::remove_dir_all(&next.dir);
                }
                Err(e)
            }
        }
    }

    fn rebuild_into(
        &self,
        wal: &Wal,
        lsn: u64,
        data_dir: &Path,
        next: &Generation,
    ) -> Result<Rebuilt, StoreError> {
        let sync = self.durability != Durability::None;
        // Left by an earlier attempt that failed.
        if next.dir.exists() {
            std::fs::remove_dir_all(&next.dir).map_err(StoreError::io("deleting", &next.dir))?;
        }
        super::fsutil::create_private_dir(&next.dir)
            .map_err(StoreError::io("creating", &next.dir))?;
        if sync {
            super::fsutil::sync_dir(data_dir).map_err(StoreError::io("fsync of", data_dir))?;
        }
        let new = Arc::new(Index::open(Some(&next.dir))?);
        let old = self.index();
        let copied = new.copy_from(&old)?;
        let (end, replayed, blocked, table) = {
            let _flushing = lock(&self.flushing);
            let _gate = lock_write(&self.gate);
            let held = Instant::now();
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // The pending appends go to the old index (and with the log's replay, to the new).
            self.drain_locked()?;
            self.apply_locked()?;
            let end = wal.rotate()?;
            let replayed =
                wal::read_range(wal.dir(), lsn, end, StoreError::Corrupt, |rec, raw| {
                    new.replay(rec, raw)
                })?;
            new.set_checkpoint(end)?;
            *lock_write(&self.index) = Arc::clone(&new);
            (end, replayed, held.elapsed(), self.checkpoint_table())
        };
        // The new index takes every write from here on, but a restart still opens the old one
        // (and replays the log since `lsn`) until the switch; a failure now leaves the two
        // apart, so it stops the store rather than let a later checkpoint delete that log.
        let switched = new
            .flush(sync)
            .and_then(|()| layout::switch(data_dir, next, sync))
            .and_then(|()| checkpoint::write(data_dir, end, &table, sync));
        if let Err(e) = switched {
            self.set_failed();
            return Err(e);
        }
        wal.delete_before(end)?;
        self.checkpointed.store(end, Ordering::Relaxed);
        Ok(Rebuilt {
            old,
            copied,
            replayed,
            blocked,
        })
    }

    /// Deletes the directory of a replaced index once nothing uses it: readers that took it
    /// before the switch finish their read, then sled's own threads let go of its file.
    fn retire(&self, old: Arc<Index>) {
        let Some(dir) = old.dir().map(Path::to_owned) else {
            return;
        };
        let deadline = Instant::now() + RETIRE_WAIT;
        let mut old = old;
        loop {
            match Arc::try_unwrap(old) {
                Ok(index) => {
                    drop(index);
                    break;
                }
                Err(still_shared) if Instant::now() < deadline => {
                    old = still_shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => {
                    self.stale_left.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        if !delete_released(&dir, deadline) {
            self.stale_left.store(true, Ordering::Relaxed);
        } else if self.durability != Durability::None {
            if let Some(data_dir) = &self.data_dir {
                // Best effort: a lost deletion is redone at open.
                let _ = super::fsutil::sync_dir(data_dir);
            }
        }
    }

    /// Deletes the index directories that are not in use and that sled has let go of.
    fn delete_stale_dirs(&self) {
        let (Some(data_dir), Some(current)) = (&self.data_dir, lock(&self.generation).clone())
        else {
            return;
        };
        let Ok(stale) = layout::stale_dirs(data_dir, &current) else {
            self.stale_left.store(true, Ordering::Relaxed);
            return;
        };
        for dir in stale {
            if !delete_released(&dir, Instant::now()) {
                self.stale_left.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The checkpoint thread's loop: checkpoints every [`CHECKPOINT_EVERY`] when the log grew,
    /// or at once when woken, until stopped.
    pub(crate) fn run_checkpointer(&self) {
        let mut wake = lock(&self.wake);
        loop {
            if *wake == Some(true) {
                return;
            }
            if wake.is_none() {
                wake = self
                    .wake_cond
                    .wait_timeout(wake, CHECKPOINT_EVERY)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            if *wake == Some(true) {
                return;
            }
            *wake = None;
            drop(wake);
            let grown = self
                .wal
                .as_ref()
                .is_some_and(|w| w.submitted() > self.checkpointed.load(Ordering::Relaxed));
            if grown || self.rebuild_wanted(Rebuild::IfDue) {
                // A failed checkpoint keeps the log; the next one retries.
                let _ = self.checkpoint();
            }
            wake = lock(&self.wake);
        }
    }

    fn wake_checkpointer(&self, stop: bool) {
        let mut wake = lock(&self.wake);
        if *wake != Some(true) {
            *wake = Some(stop);
        }
        self.wake_cond.notify_all();
    }

    pub(crate) fn stop_checkpointer(&self) {
        self.wake_checkpointer(true);
    }

    pub(crate) fn stats(&self) -> StoreStats {
        StoreStats {
            wal: self.wal.as_ref().map(Wal::stats).unwrap_or_default(),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            index_rebuilds: self.rebuilds.load(Ordering::Relaxed),
        }
    }
}

/// When a checkpoint rebuilds the index.
#[derive(Clone, Copy)]
enum Rebuild {
    /// When tasks were removed (or enough events dropped) since the last rebuild, and the rate
    /// limit allows.
    IfDue,
    /// When tasks were removed (or enough events dropped) since the last rebuild.
    IfGarbage,
    /// Always.
    Now,
}

/// What a rebuild did.
struct Rebuilt {
    /// The index it replaced.
    old: Arc<Index>,
    /// Events copied from it.
    copied: u64,
    /// Log records replayed into the new index.
    replayed: u64,
    /// How long writers waited.
    blocked: Duration,
}

/// Deletes an index directory once sled no longer holds the lock on its file (waiting until
/// `deadline`); returns whether it is gone.
fn delete_released(dir: &Path, deadline: Instant) -> bool {
    let db = dir.join("db");
    loop {
        let released = match std::fs::File::open(&db) {
            Ok(file) => file.try_lock().is_ok(),
            // No file: nothing holds it.
            Err(_) => true,
        };
        if released {
            return std::fs::remove_dir_all(dir).is_ok() || !dir.exists();
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A task's published events that are not yet in the index, as a read took them.
#[derive(Default)]
struct Tail {
    /// The first of them (every visible event before it is in the index).
    start: Option<Seq>,
    /// Those from the read's start on, up to its most.
    events: Vec<Arc<Pending>>,
}

/// What a sweep did to one task.
pub(crate) enum Swept {
    Kept,
    Truncated,
    Removed,
}

/// Adds a durable event to a running task's read cache, keeping the cache a suffix of the log:
/// anything unexpected (an event too large for it, a seq it did not predict) empties it.
fn cache_append(
    cache: &mut Cache,
    seq: Seq,
    at: Millis,
    ty: EventType<'_>,
    payload: Payload<'_>,
    floor: Seq,
) {
    // The store has already applied the retention policy; the ring only bounds itself.
    let policy = RetentionPolicy {
        max_events: u32::MAX,
        max_bytes: u32::MAX,
        max_payload_bytes: u32::MAX,
        ..RetentionPolicy::DEFAULT
    };
    let next = seq.next().unwrap_or(Seq::MAX);
    if cache.next_seq() != seq {
        cache.reset(seq);
    }
    match cache.append(at, ty, payload, &policy) {
        Ok(appended) if appended.seq == seq => {
            cache.evict_before(floor);
        }
        _ => cache.reset(next),
    }
}

fn view(st: &SlotState) -> Option<TaskView> {
    Some(TaskView {
        retained: retained_of(st)?,
        record: st.record.clone(),
    })
}

/// The retained range of a visible task, without copying its record.
fn retained_of(st: &SlotState) -> Option<Retained> {
    if !st.visible || st.removed {
        return None;
    }
    Some(Retained::new(st.earliest, st.next).unwrap_or(Retained::EMPTY))
}

#[cfg(test)]
mod tests;
