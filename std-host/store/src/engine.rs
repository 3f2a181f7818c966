//! The running store: the in-memory task table, appends (seq allocation, log, sled, visibility),
//! reads, retention, the store-wide budget, checkpoints and index rebuilds.
//!
//! A running task keeps its newest events in a core `EventRing` as a read cache (bounded:
//! [`CACHE_EVENTS`](super::cache::CACHE_EVENTS) events in
//! [`CACHE_BYTES`](super::cache::CACHE_BYTES) bytes per running task; a small ring until the
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
//!
//! Retention invariant (cited as R1 by the code and the test that checks it):
//! - **R1** The count limit (`max_events`) counts real events only: a retained seq with no
//!   event (one a repair skipped so no seq is used twice, or whose event damage took) never
//!   pushes a retained event out. `LiveTaskState::empty` counts them, and
//!   `LiveTaskState::count_floor` sets the floor past the oldest real events beyond the limit
//!   (`recovery::tests::empty_seqs_a_repair_skips_never_push_retained_events_out`).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use taskstream_core::record::{self, EventRecord, Record};
use taskstream_core::{EventType, Millis, Payload, Retained, RetentionPolicy, Seq};

use super::checkpoint;
use super::error::{AppendError, StoreError};
use super::frame::{encode_checked_into, encode_into};
use super::index::Index;
use super::layout::{self, Generation};
use super::model::{
    ChangeSignal, Durability, StoreStats, StoredEvent, TaskRecord, TaskStatus, TaskView,
    STATUS_EVENT_TYPE,
};
use super::raw::RawEvent;
use super::sync::{lock, lock_read, lock_write};
use super::wal::{self, Wal};

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
/// How long a waiting appender that leads a drain waits at most for the appenders of the
/// last batch to queue again before it flushes (group mode): the appenders a flush released
/// re-queue one by one, and a leader that flushed at once would take only the first few,
/// leaving the rest to a second flush.
const GATHER_WAIT: Duration = Duration::from_millis(1);

/// Unapplied appends the applier writes to sled in one batch at most.
const APPLY_BATCH: usize = 4096;

/// An append logged (in `group` mode: submitted to the log without waiting) and not yet
/// published: everything needed to apply it to the index and to make it visible.
pub(crate) struct Pending {
    slot: Arc<LiveTask>,
    seq: Seq,
    next: Seq,
    at: Millis,
    /// The task's new record, for a creation or an end (a `Transition`).
    state: Option<Vec<u8>>,
    /// The count limit's new floor, if this append pushes events out (a `Truncate`).
    floor: Option<Seq>,
    /// One allocation for all the append carries: the encoded records (the event's, to
    /// `event_len`, then the truncation's, to `records_len`), then the event's type
    /// (`type_len` bytes, copied from a `&str`) and its payload.
    buf: Vec<u8>,
    event_len: usize,
    records_len: usize,
    type_len: usize,
    /// Where the records are in the log: set once, when they are logged, under the lock that
    /// hands the append on (0 in memory).
    lsn: AtomicU64,
    new_record: Option<TaskRecord>,
    new_record_bytes: Option<u64>,
    /// What the append's reservation counted as freed by the truncation.
    events_freed: u64,
}

impl Pending {
    /// The memory the unapplied set counts for it.
    fn footprint(&self) -> u64 {
        self.buf.len() as u64
    }

    /// The encoded records, in log order: what is logged.
    fn encoded(&self) -> &[u8] {
        self.buf.get(..self.records_len).unwrap_or_default()
    }

    /// The event's type. (Its bytes were copied from a `&str`, so they always are UTF-8.)
    fn event_type(&self) -> &str {
        let end = self.records_len + self.type_len;
        self.buf
            .get(self.records_len..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    /// The event's payload, in its stored (compact) form.
    fn payload(&self) -> &[u8] {
        self.buf
            .get(self.records_len + self.type_len..)
            .unwrap_or_default()
    }

    /// The size the budget counts for the event: its type plus its payload.
    fn event_size(&self) -> u64 {
        (self.type_len + self.payload().len()) as u64
    }

    fn lsn(&self) -> u64 {
        self.lsn.load(Ordering::Relaxed)
    }

    fn record(&self) -> Record<'_> {
        let event = EventRecord {
            task_id: &self.slot.id,
            seq: self.seq,
            at: self.at,
            event_type: self.event_type(),
            payload: self.payload(),
        };
        match &self.state {
            Some(state) => Record::Transition { event, state },
            None => Record::Event(event),
        }
    }

    fn truncate(&self) -> Option<Record<'_>> {
        self.floor.map(|before| Record::Truncate {
            task_id: &self.slot.id,
            before,
        })
    }

    /// Its records with their encodings and LSNs, in log order.
    fn records(&self) -> impl Iterator<Item = (Record<'_>, &[u8], u64)> {
        self.records_at(self.lsn())
    }

    /// The same, logged at `lsn`.
    fn records_at(&self, lsn: u64) -> impl Iterator<Item = (Record<'_>, &[u8], u64)> {
        let after = lsn + self.event_len as u64;
        let (event, truncate) = self
            .encoded()
            .split_at(self.event_len.min(self.records_len));
        std::iter::once((self.record(), event, lsn))
            .chain(self.truncate().map(|t| (t, truncate, after)))
    }
}

/// The appends queued for publication, in log order.
#[derive(Default)]
struct Pipe {
    items: Vec<Arc<Pending>>,
    /// The flusher is to stop (once the queue is empty).
    stop: bool,
    /// Appends queued so far: the ticket of the last one.
    queued: u64,
    /// A waiter is draining (the leader); the others wait in `waiters`.
    draining: bool,
    /// The threads waiting for the drain under way to end: each parked, woken by the leader
    /// on its own (no condition variable whose waiters all wake and queue for this lock).
    waiters: Vec<Waiter>,
    /// While a leader gathers (waits for the appenders of the last batch to queue again before
    /// it flushes): how many queued appends end its wait. 0 otherwise.
    gather_target: usize,
}

/// A thread parked until the append with `ticket` is published, or until a drain ends that
/// does not cover it (then it may lead the next one).
struct Waiter {
    ticket: u64,
    thread: std::thread::Thread,
}

/// The pipeline's (`group` and `none` mode) published appends that are durable but not yet in
/// the index, in log order
/// (each is also in its task's `LiveTaskState::unapplied`, where reads find it).
#[derive(Default)]
struct Unapplied {
    items: VecDeque<Arc<Pending>>,
    /// The sum of their footprints.
    bytes: u64,
    /// The applier is to stop.
    stop: bool,
}

/// A task the store holds: its append lock and its state (record, seq range, cache, sizes).
pub(crate) struct LiveTask {
    /// The task's id (as in its record, which never changes it).
    pub(crate) id: Box<str>,
    /// Held across a whole append, so a task's records are in seq order in log and sled.
    append: Mutex<()>,
    pub(crate) state: Mutex<LiveTaskState>,
}

/// What a [`LiveTask`]'s `state` lock guards.
pub(crate) struct LiveTaskState {
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
    /// How many of `sizes` are 0: retained seqs with no event, which only a repair leaves
    /// (seqs skipped so none is used twice, or events lost to damage). The count limit counts
    /// real events only, so these never push a retained event out (R1).
    pub(crate) empty: u64,
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

impl LiveTaskState {
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
        let mut empty = 0;
        let freed: u64 = self
            .sizes
            .drain(..n)
            .inspect(|s| empty += u64::from(*s == 0))
            .map(u64::from)
            .sum();
        self.empty = self.empty.saturating_sub(empty);
        self.bytes = self.bytes.saturating_sub(freed);
        freed
    }

    /// Records one more retained seq of `size` bytes (0: a seq with no event).
    pub(crate) fn push_size(&mut self, size: u32) {
        self.sizes.push_back(size);
        self.bytes += u64::from(size);
        self.empty += u64::from(size == 0);
    }

    /// The retention floor the count limit sets for a task whose retained seqs run from
    /// `earliest` to before `next` once the append under way lands (`earliest` at or after
    /// the published `self.earliest`, the seqs past `sizes` all real events still pending):
    /// the oldest real events beyond `max` are pushed out, and empty seqs count for nothing
    /// (R1: a repair's skipped seqs never push a retained event out).
    pub(crate) fn count_floor(&self, earliest: Seq, next: Seq, max: u64) -> Seq {
        let span = next.distance_from(earliest);
        if span <= max {
            return earliest;
        }
        if self.empty == 0 {
            // Every seq an event: the common case, in constant time.
            return Seq::new(next.get() - max).unwrap_or(next);
        }
        let skip = usize::try_from(earliest.distance_from(self.earliest)).unwrap_or(usize::MAX);
        let empty = self.sizes.iter().skip(skip).filter(|s| **s == 0).count() as u64;
        let real = span.saturating_sub(empty);
        if real <= max {
            return earliest;
        }
        // Past the `real - max` oldest real events.
        let mut drop = real - max;
        let mut at = earliest;
        for size in self.sizes.iter().skip(skip) {
            at = at.next().unwrap_or(next);
            if *size != 0 {
                drop -= 1;
                if drop == 0 {
                    return at;
                }
            }
        }
        // The rest are pending appends, every one a real event.
        Seq::new(at.get().saturating_add(drop))
            .unwrap_or(next)
            .min(next)
    }
}

impl LiveTask {
    pub(crate) fn new(state: LiveTaskState) -> Arc<LiveTask> {
        Arc::new(LiveTask {
            id: state.record.task_id.clone().into_boxed_str(),
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

/// The running store: the task table, the log, the index and the background threads' state,
/// shared by the store's handle and those threads. Its methods are cut along their seams:
/// `append.rs`, `read.rs`, `retention.rs`, `apply.rs`, `checkpointing.rs`.
pub(crate) struct Engine {
    pub(crate) retention: RetentionPolicy,
    pub(crate) durability: Durability,
    /// The most bytes (types plus payloads) of retained events across all tasks.
    max_store_bytes: u64,
    /// The bound of sled's page cache, for the index and every rebuilt one.
    index_cache_bytes: u64,
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
    /// One drain of the pipe at a time (taken before the gate), so appends are published in
    /// log order.
    flushing: Mutex<()>,
    /// The ticket of the last append published (or dropped by a failed drain: see `failed`).
    published: AtomicU64,
    /// How many appends the last drain published (what a gathering leader waits for).
    last_batch: AtomicUsize,
    /// Wakes a gathering leader once `Pipe::gather_target` appends are queued.
    gathered: Condvar,
    /// Published appends not yet applied to the index, in log order.
    unapplied: Mutex<Unapplied>,
    /// Wakes the applier when the unapplied set gets appends (or it is to stop).
    apply_cond: Condvar,
    /// One application to the index at a time (taken inside the gate), so the index gets
    /// the unapplied appends in log order.
    applying: Mutex<()>,
    pub(crate) tasks: RwLock<HashMap<String, Arc<LiveTask>>>,
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

impl Engine {
    /// The engine of a store opened with `config`, on `index` and `wal`, with the tasks
    /// recovery found.
    pub(crate) fn new(
        config: &crate::model::StoreConfig,
        index: Index,
        wal: Option<Wal>,
        on_disk: Option<(PathBuf, Generation)>,
        tasks: HashMap<String, Arc<LiveTask>>,
    ) -> Engine {
        let checkpointed = wal.as_ref().map_or(0, Wal::submitted);
        let (data_dir, generation) = on_disk.unzip();
        let stored: u64 = tasks
            .values()
            .map(|slot| {
                let st = lock(&slot.state);
                st.bytes + st.record_bytes
            })
            .sum();
        Engine {
            retention: config.retention,
            durability: config.durability,
            max_store_bytes: config.max_store_bytes,
            index_cache_bytes: config.index_cache_bytes,
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
            flushing: Mutex::new(()),
            published: AtomicU64::new(0),
            last_batch: AtomicUsize::new(0),
            gathered: Condvar::new(),
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

    fn slot(&self, task_id: &str) -> Option<Arc<LiveTask>> {
        lock_read(&self.tasks).get(task_id).cloned()
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

fn view(st: &LiveTaskState) -> Option<TaskView> {
    Some(TaskView {
        retained: retained_of(st)?,
        record: st.record.clone(),
    })
}

/// The retained range of a visible task, without copying its record.
fn retained_of(st: &LiveTaskState) -> Option<Retained> {
    if !st.visible || st.removed {
        return None;
    }
    Some(Retained::new(st.earliest, st.next).unwrap_or(Retained::EMPTY))
}

mod append;
mod apply;
mod checkpointing;
mod read;
mod retention;
#[cfg(test)]
pub(crate) mod tests;
