//! The write-ahead log: segment files of core log records (`taskstream_core::record`), written
//! append-only and made durable with a real `fdatasync` (`File::sync_data`) as the
//! [`Durability`] mode says, before the writer is told the record is in.
//!
//! Layout: `wal/<start LSN as 16 hex digits>.wal`. An LSN is a byte offset in the logical log,
//! which runs through the segments in order; a segment holds the records from its start LSN on,
//! laid end to end. Segments are rotated only at checkpoints, when the log is quiescent
//! ([`Wal::rotate`]); segments wholly before a checkpoint are deleted ([`Wal::delete_before`]).
//!
//! Durability modes:
//! - `event`: the submitting thread writes its records and calls `fdatasync` itself, holding
//!   the segment lock, so every event gets its own device flush before `submit` returns.
//! - `group`: group commit by leader and followers. Submitters append their bytes to a shared
//!   pending buffer; whichever waiter finds no flush running becomes the leader, takes the whole
//!   buffer, writes it with one `write` and one `fdatasync`, and wakes every waiter it covered;
//!   if records arrived meanwhile it flushes them next, at once. Records submitted while a
//!   flush runs are therefore all covered by the next one. Waiting submissions and
//!   `flush_through` share that code (`Wal::commit`); they differ only in which batch a
//!   waiter sleeps on and how many batches a leader flushes in a row.
//! - `none`: records are written (they survive a process crash) but never flushed.
//!
//! Any write or flush failure is sticky (fail-stop): after an `fdatasync` error the state of the
//! page cache is unknown, so every later submission fails with [`WalError::Failed`].
//!
//! Invariants (cited as W1..W6 by the `debug_assert!`s and the tests that check them):
//! - **W1** `durable <= submitted`, always (both are read and moved under the queue's lock).
//! - **W2** `submitted`, `durable` and a segment's synced mark never move back: each move sets
//!   a value at least the old one.
//! - **W3** `durable` moves to an LSN only after every byte of log below it was written to its
//!   segment and, unless the mode is `none`, covered by an `fdatasync` of that segment that
//!   succeeded (`Segment::synced` records how far one did). A write or sync that fails never
//!   moves it.
//! - **W4** One failure state ([`Wal`]'s `failed`): set by any failed write, `fdatasync` or
//!   segment creation, never cleared; once set no submission succeeds, no flush is reported
//!   durable and no mark moves.
//! - **W5** At most one leader flushes at a time (`flushing`, under the queue's lock); it takes
//!   the whole pending buffer, so the bytes written to the segment are always the submitted
//!   ones in LSN order (`segment start + len` after a flush is the batch's end LSN).
//! - **W6** A segment is succeeded by a new one only after a sync covered all of it (modes but
//!   `none`), so only the last segment can hold a torn tail. At open, recovery syncs the last
//!   segment before the log goes on in a new one (a killed process's writes may still be
//!   only in the page cache).
//! - **W7** The synced-through mark (`wal.synced` beside `wal/`, modes but `none`) never claims more than was
//!   synced: after each successful `fdatasync` of a segment through LSN `n`, `n` is written
//!   (not synced) to one of the file's two checksummed slots, alternately; recovery takes the
//!   highest valid slot, 0 if none. A slot's write that is lost or torn leaves an older value
//!   or none, so the mark read back is at most the log's real synced point. At open a mark
//!   past the recovered end (log a repair gave up) is written back to the end and synced.
//!
//! Power loss is not damage. Unsynced writes may reach the disk in any order and torn at any
//! sector (page writeback and disk caches promise no order), so after a power loss the
//! unsynced end of the last segment may hold holes with valid records after them. Such bytes
//! were never acknowledged: an acknowledgement waits for a sync (W3). What tells them from
//! damage to synced log is the mark: in the last segment, a bad record at or above the mark
//! is a torn tail and is cut there, whatever follows; a bad record below it, in an earlier
//! segment, or log ending before the mark, is damage. A per-batch commit marker in the log
//! would have said the same at the cost of a change to the record format and of bytes per
//! commit; the mark costs one small `pwrite` per sync and no format change. What it gives up:
//! the mark lags the real synced point by whatever of its own writes a power loss took, and
//! in that window (synced, acknowledged, but above the surviving mark) damage by the device
//! would be cut as a torn tail rather than refused; a power loss alone never damages that
//! window, which it cannot tear.
//!
//! Lock order: `segment` → `queue` → `SegmentFiles::map`. The queue's lock is never held while
//! taking the segment's (a leader drops it first); the condition variables `flushed[0..2]`
//! wait on the queue's lock only.
//!
//! Recovery ([`recover`]) replays the records from a checkpoint LSN on. A record that does not
//! decode in the last segment at or above the synced-through mark is a torn tail, cut off.
//! Anything else that does not decode, log missing between segments, or log ending before the
//! mark, is damage: recovery refuses it unless told to repair (skip it, keep every valid
//! record after it). For a record that does not decode the rule is one table, [`decide`],
//! from the facts about it ([`Facts`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use taskstream_core::record::{self, Record, RecordError};

use super::model::{Durability, WalStats};
use super::storage::{read_at_most, StdStorage, Storage, StorageFile};
use super::sync::{lock, lock_read, lock_write};

/// Batches a group-commit leader flushes before it returns and lets a waiter lead.
const MAX_LEAD_ROUNDS: u32 = 8;

/// A failure of the write-ahead log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A file operation failed.
    #[error("write-ahead log: {context} {}: {source}", path.display())]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// An earlier write or flush failed; the log refuses every later write (fail-stop).
    #[error("write-ahead log: an earlier write or flush failed; refusing further writes")]
    Failed,
    /// Recovery found damage (not a torn tail) and was not told to repair it.
    #[error(
        "the write-ahead log is damaged: {damage}. This is not a torn write: records that were \
         durable are lost, and starting would re-use their seqs. No log record was changed. \
         Restore the data dir from a backup, or run `taskstream repair --data-dir {}` to keep \
         every valid record (tasks that were running end failed, after every seq they may \
         have used)",
        data_dir_of(.0).display(),
        damage = .0
    )]
    Damaged(Damage),
}

/// The data dir a damaged segment is in (`DIR/wal/<lsn>.wal`), for the advice.
fn data_dir_of(d: &Damage) -> &Path {
    d.segment
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| Path::new("DIR"))
}

fn io_err<'a>(context: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> WalError + 'a {
    move |source| WalError::Io {
        context,
        path: path.to_owned(),
        source,
    }
}

struct Counters {
    syncs: AtomicU64,
    writes: AtomicU64,
    bytes: AtomicU64,
    segments: AtomicU64,
    batch_records: crate::stats::AtomicHistogram,
    commit_wait_micros: crate::stats::AtomicHistogram,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            syncs: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            segments: AtomicU64::new(0),
            batch_records: crate::stats::AtomicHistogram::new(&crate::stats::BATCH_BOUNDS),
            commit_wait_micros: crate::stats::AtomicHistogram::new(&crate::stats::MICROS_BOUNDS),
        }
    }
}

/// The active segment.
struct Segment {
    /// Opened for writing and reading; the same handle is in [`SegmentFiles`].
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    start: u64,
    len: u64,
    /// The LSN through which an `fdatasync` of this segment succeeded (W3): `start` until one
    /// does.
    synced: u64,
}

/// The group-commit queue.
#[derive(Default)]
struct Queue {
    /// Bytes submitted but not yet written.
    pending: Vec<u8>,
    /// Records in `pending`.
    pending_records: u64,
    /// When the first record of `pending` was submitted.
    pending_since: Option<std::time::Instant>,
    /// A recycled buffer for the next batch.
    spare: Vec<u8>,
    /// The LSN after everything submitted.
    submitted: u64,
    /// The LSN up to which everything is written (and flushed, in `group` mode).
    durable: u64,
    /// Whether a leader is writing a batch right now (W5).
    flushing: bool,
    /// The number of the batch `pending` accumulates; waiters of batch `n` sleep on
    /// `flushed[n % 2]`, so finishing a batch wakes only its own waiters (while batch `n`
    /// flushes, only batch `n + 1` can accumulate).
    batch: u64,
}

impl Queue {
    /// Moves `submitted` on by `n` bytes (W1, W2).
    fn advance_submitted(&mut self, n: u64) {
        let next = self.submitted + n;
        debug_assert!(next >= self.submitted, "W2: submitted never moves back");
        self.submitted = next;
        debug_assert!(self.durable <= self.submitted, "W1: durable <= submitted");
    }

    /// Moves `durable` to `to`, which a successful write (and, unless `written_only`, a sync
    /// reaching `synced`) covered (W1, W2, W3).
    fn advance_durable(&mut self, to: u64, synced: u64, written_only: bool) {
        debug_assert!(to >= self.durable, "W2: durable never moves back");
        debug_assert!(to <= self.submitted, "W1: durable <= submitted");
        debug_assert!(
            written_only || synced >= to,
            "W3: durable moves only through a successful sync ({to} > {synced})"
        );
        self.durable = to;
    }
}

/// The write-ahead log, shared by every appending thread.
pub(crate) struct Wal {
    dir: PathBuf,
    mode: Durability,
    /// Lock order: taken before `queue`, never while holding it.
    segment: Mutex<Segment>,
    /// Lock order: after `segment`; held by no one who then takes `segment`.
    queue: Mutex<Queue>,
    /// Waiters of batch `n` sleep on `flushed[n % 2]`, on the queue's lock.
    flushed: [Condvar; 2],
    /// The log's one failure state (W4): set once, never cleared. Set while holding the
    /// segment's lock (by a failed write, sync or rotation); a leader that set it takes the
    /// queue's lock afterwards and wakes every waiter, who reads it under that lock.
    failed: AtomicBool,
    /// Test-only fault injection: the number (from 1, counted like [`WalStats::syncs`]) of
    /// the `fdatasync` to fail with `EIO`; 0 for none.
    #[cfg(test)]
    fail_sync: AtomicU64,
    /// The LSN after everything submitted (a copy of the queue's, readable without its lock).
    submitted: AtomicU64,
    counters: Counters,
    /// Every segment on disk, open for reading: the log is where events are read from.
    files: Arc<SegmentFiles>,
    /// The synced-through mark's file (W7), modes but `none`.
    mark: Option<Arc<dyn StorageFile>>,
    /// Marks written so far: the next goes to slot `marks % 2`.
    marks: AtomicU64,
}

/// The log's segment files, open for reading, by start LSN: the store's events are read from
/// the log itself (`store/src/events.rs` says where each one is). A reader keeps the
/// `Arc<dyn StorageFile>` it took, so a segment deleted meanwhile stays readable for it.
/// It also holds the [`Storage`] every file of the log is on.
pub(crate) struct SegmentFiles {
    map: RwLock<BTreeMap<u64, OpenSegment>>,
    storage: Arc<dyn Storage>,
}

/// A segment open for reading, with its path for the errors that name it.
#[derive(Clone)]
struct OpenSegment {
    file: Arc<dyn StorageFile>,
    path: Arc<Path>,
}

impl OpenSegment {
    /// The error of a failed read of this segment.
    fn read_error(&self, source: io::Error) -> WalError {
        WalError::Io {
            context: "reading",
            path: self.path.to_path_buf(),
            source,
        }
    }
}

impl SegmentFiles {
    /// An empty set on the real file system, filled by [`load`](Self::load) and by the log's
    /// new segments.
    pub(crate) fn new() -> Arc<SegmentFiles> {
        SegmentFiles::on(StdStorage::shared())
    }

    /// An empty set on `storage`.
    pub(crate) fn on(storage: Arc<dyn Storage>) -> Arc<SegmentFiles> {
        Arc::new(SegmentFiles {
            map: RwLock::default(),
            storage,
        })
    }

    /// The storage the log's files are on.
    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Opens every segment of `dir` for reading.
    pub(crate) fn load(&self, dir: &Path) -> Result<(), WalError> {
        for (start, path) in list_segments(&*self.storage, dir)? {
            let file = self
                .storage
                .open(&path, false)
                .map_err(io_err("opening", &path))?;
            self.insert(start, file, &path);
        }
        Ok(())
    }

    fn insert(&self, start: u64, file: Arc<dyn StorageFile>, path: &Path) {
        let path = Arc::from(path);
        lock_write(&self.map).insert(start, OpenSegment { file, path });
    }

    fn remove(&self, start: u64) {
        lock_write(&self.map).remove(&start);
    }

    /// The start LSNs of the segments, in order.
    pub(crate) fn starts(&self) -> Vec<u64> {
        lock_read(&self.map).keys().copied().collect()
    }

    /// The segment holding `lsn`: its start, file and path.
    fn holding(&self, lsn: u64) -> Option<(u64, OpenSegment)> {
        lock_read(&self.map)
            .range(..=lsn)
            .next_back()
            .map(|(start, open)| (*start, open.clone()))
    }

    /// The `len` bytes of log at `lsn`, or `None` if no segment holds them (deleted, or cut).
    ///
    /// # Errors
    /// [`WalError::Io`] naming the segment file, if it cannot be read.
    pub(crate) fn read(&self, lsn: u64, len: usize) -> Result<Option<Vec<u8>>, WalError> {
        let Some((start, open)) = self.holding(lsn) else {
            return Ok(None);
        };
        let mut buf = vec![0; len];
        match read_at_most(&*open.file, &mut buf, lsn - start) {
            Ok(got) if got == len => Ok(Some(buf)),
            Ok(_) => Ok(None),
            Err(e) => Err(open.read_error(e)),
        }
    }

    /// Several runs of log at once, each `(lsn, len)`, read with one `pread` per stretch of
    /// the same segment no more than `GAP` bytes apart; `None` for one no segment holds.
    ///
    /// # Errors
    /// [`WalError::Io`] naming the segment file, if one cannot be read.
    pub(crate) fn read_many(&self, runs: &[(u64, u32)]) -> Result<Vec<Option<Vec<u8>>>, WalError> {
        const GAP: u64 = 16 << 10;
        const MAX_SPAN: u64 = 1 << 20;
        let mut out = Vec::with_capacity(runs.len());
        let mut i = 0;
        while i < runs.len() {
            let (lsn, len) = runs[i];
            let Some((start, open)) = self.holding(lsn) else {
                out.push(None);
                i += 1;
                continue;
            };
            let seg_end = lock_read(&self.map)
                .range(lsn + 1..)
                .next()
                .map_or(u64::MAX, |(s, _)| *s);
            // The stretch: runs after this one, ascending, in the same segment, close enough.
            let mut end = lsn + u64::from(len);
            let mut j = i + 1;
            while j < runs.len() {
                let (l, n) = runs[j];
                let e = l + u64::from(n);
                if l < lsn || e > seg_end || l > end + GAP || e - lsn > MAX_SPAN {
                    break;
                }
                end = end.max(e);
                j += 1;
            }
            let mut buf = vec![0; usize::try_from(end - lsn).unwrap_or(0)];
            let got =
                read_at_most(&*open.file, &mut buf, lsn - start).map_err(|e| open.read_error(e))?;
            for &(l, n) in &runs[i..j] {
                let from = usize::try_from(l - lsn).unwrap_or(usize::MAX);
                let to = from.saturating_add(n as usize);
                out.push((to <= got).then(|| buf[from..to].to_vec()));
            }
            i = j;
        }
        Ok(out)
    }
}

impl Wal {
    /// Opens the log for writing at `lsn` (the end of the recovered log), in a new segment,
    /// which joins `files`.
    pub(crate) fn open(
        dir: &Path,
        mode: Durability,
        lsn: u64,
        files: Arc<SegmentFiles>,
    ) -> Result<Wal, WalError> {
        let counters = Counters::default();
        let mark = if mode == Durability::None {
            None
        } else {
            Some(open_mark(&*files.storage, dir, lsn)?)
        };
        let segment = create_segment(
            &*files.storage,
            dir,
            lsn,
            mode != Durability::None,
            &counters,
        )?;
        files.insert(lsn, Arc::clone(&segment.file), &segment.path);
        Ok(Wal {
            files,
            dir: dir.to_owned(),
            mode,
            segment: Mutex::new(segment),
            queue: Mutex::new(Queue {
                submitted: lsn,
                durable: lsn,
                ..Queue::default()
            }),
            flushed: [Condvar::new(), Condvar::new()],
            failed: AtomicBool::new(false),
            #[cfg(test)]
            fail_sync: AtomicU64::new(0),
            submitted: AtomicU64::new(lsn),
            counters,
            mark,
            marks: AtomicU64::new(0),
        })
    }

    /// Appends `bytes` (whole encoded records) to the log and returns the LSN they start at.
    /// With `wait`, returns once they are durable as the mode says; without, they are only
    /// ordered before every later submission (and written no later than the next durable
    /// submission or rotation).
    ///
    /// In `none` mode a submission is written at once whether or not it waits (only
    /// [`submit_deferred`](Self::submit_deferred) leaves one in the buffer).
    pub(crate) fn submit(&self, bytes: &[u8], wait: bool) -> Result<u64, WalError> {
        match self.mode {
            Durability::Event => {
                let mut seg = lock(&self.segment);
                let at = seg.start + seg.len;
                self.write(&mut seg, bytes)?;
                if wait {
                    self.sync(&mut seg)?;
                }
                Ok(at)
            }
            Durability::Group => self.submit_queued(bytes, wait),
            Durability::None => self.submit_queued(bytes, true),
        }
    }

    /// Appends `bytes` to the log's buffer without writing them, in every mode but `event`
    /// (where this is `submit` without waiting): they are written (and flushed, in `group`
    /// mode) by the next [`flush_through`](Self::flush_through) covering them, a waiting
    /// submission, or a rotation. For the pipeline, which publishes nothing before such a
    /// flush: in `none` mode, one `write` then covers a whole batch instead of one each.
    pub(crate) fn submit_deferred(&self, bytes: &[u8]) -> Result<u64, WalError> {
        match self.mode {
            Durability::Event => self.submit(bytes, false),
            Durability::Group | Durability::None => self.submit_queued(bytes, false),
        }
    }

    /// A submission through the buffer (`group` and `none` mode): with `wait`, the caller
    /// leads (or waits for) the write of everything pending, flushed in `group` mode.
    fn submit_queued(&self, bytes: &[u8], wait: bool) -> Result<u64, WalError> {
        let mut q = lock(&self.queue);
        self.check()?;
        let at = q.submitted;
        if q.pending_records == 0 {
            q.pending_since = Some(std::time::Instant::now());
        }
        q.pending_records += 1;
        q.pending.extend_from_slice(bytes);
        q.advance_submitted(bytes.len() as u64);
        self.submitted.store(q.submitted, Ordering::Relaxed);
        let mine = q.submitted;
        let my_batch = q.batch;
        if !wait {
            return Ok(at);
        }
        self.commit(q, mine, Some(my_batch), MAX_LEAD_ROUNDS)?;
        Ok(at)
    }

    /// The group commit, written once: returns once `durable` reaches `target` (W3), leading
    /// flushes whenever none runs, or with the log's failure (W4). While a leader flushes, the
    /// caller sleeps on its own batch's condition variable when it has one (`batch`: a
    /// submitter, whose bytes are in that batch; woken when it is flushed), else on the
    /// batch in flight (`flush_through`: woken when that one ends, whether or not `target` was
    /// in it; it then looks again). A leader goes on with the next batch while one is waiting,
    /// up to `max_rounds` batches, so the next flush starts as soon as the previous one ends
    /// instead of after a wake-up.
    fn commit<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        target: u64,
        batch: Option<u64>,
        max_rounds: u32,
    ) -> Result<(), WalError> {
        loop {
            if q.durable >= target {
                return Ok(());
            }
            self.check()?;
            if q.flushing {
                let on = batch.unwrap_or_else(|| q.batch.wrapping_sub(1));
                q = self.flushed[parity(on)]
                    .wait(q)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // Lead (W5): take every pending byte, including other threads' records.
            q.flushing = true;
            let mut rounds = 0;
            let outcome = loop {
                let (relocked, number, result) = self.flush_pending(q);
                q = relocked;
                self.flushed[parity(number)].notify_all();
                rounds += 1;
                if result.is_err() || q.pending.is_empty() || rounds >= max_rounds {
                    break result;
                }
            };
            q.flushing = false;
            if outcome.is_err() || !q.pending.is_empty() {
                // The next batch's waiters (one of them leads it) or, after a failure,
                // everyone must look again.
                self.flushed[parity(q.batch)].notify_all();
                self.flushed[parity(q.batch + 1)].notify_all();
            }
            outcome?;
        }
    }

    /// Returns once everything submitted before `lsn` is durable as the mode says (group
    /// mode: written and covered by an `fdatasync`, by this thread as the leader, or by the
    /// leader already flushing it; `none` mode: written, with no `fdatasync`). In `event` mode
    /// a submission is written at once; this flushes it.
    pub(crate) fn flush_through(&self, lsn: u64) -> Result<(), WalError> {
        if self.mode == Durability::Event {
            let mut seg = lock(&self.segment);
            return self.sync(&mut seg);
        }
        // One batch a lead: the engine's drain publishes as soon as its own batch is durable.
        self.commit(lock(&self.queue), lsn, None, 1)
    }

    /// One group-commit flush, led by the caller (who set `flushing`): takes every pending
    /// byte (the spare buffer takes its place), writes and syncs it without holding the queue,
    /// then records the outcome (`durable` moved up to the batch's end, or `failed`). Returns
    /// the queue locked again, the batch's number (whose waiters the caller wakes) and the
    /// outcome.
    fn flush_pending<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
    ) -> (MutexGuard<'a, Queue>, u64, Result<(), WalError>) {
        let spare = std::mem::take(&mut q.spare);
        let mut batch = std::mem::replace(&mut q.pending, spare);
        let end = q.submitted;
        let number = q.batch;
        q.batch += 1;
        let records = std::mem::take(&mut q.pending_records);
        let since = q.pending_since.take();
        drop(q);
        let (result, synced) = {
            let mut seg = lock(&self.segment);
            let result = self.write(&mut seg, &batch).and_then(|()| {
                debug_assert_eq!(seg.start + seg.len, end, "W5: the log is written in order");
                if self.mode == Durability::Group {
                    self.sync(&mut seg)
                } else {
                    Ok(())
                }
            });
            (result, seg.synced)
        };
        batch.clear();
        let mut q = lock(&self.queue);
        q.spare = batch;
        if result.is_ok() {
            q.advance_durable(end, synced, self.mode == Durability::None);
            self.record_commit(records, since);
        }
        // A failure was recorded by `write` or `sync` (W4); the caller wakes every waiter.
        (q, number, result)
    }

    /// `Err(Failed)` once the log has failed (W4).
    fn check(&self) -> Result<(), WalError> {
        if self.failed.load(Ordering::Acquire) {
            Err(WalError::Failed)
        } else {
            Ok(())
        }
    }

    /// Records a failure (W4): every later submission, flush and rotation fails.
    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }

    fn write(&self, seg: &mut Segment, bytes: &[u8]) -> Result<(), WalError> {
        self.check()?;
        if bytes.is_empty() {
            return Ok(());
        }
        let result = seg.file.write_at(bytes, seg.len);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        if let Err(source) = result {
            self.fail();
            return Err(WalError::Io {
                context: "writing",
                path: seg.path.clone(),
                source,
            });
        }
        seg.len += bytes.len() as u64;
        self.counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// `fdatasync` of the active segment; on success `seg.synced` moves to its end (W3), on
    /// failure the log fails (W4).
    fn sync(&self, seg: &mut Segment) -> Result<(), WalError> {
        self.check()?;
        let number = self.counters.syncs.fetch_add(1, Ordering::Relaxed) + 1;
        if let Err(source) = self.sync_data(&*seg.file, number) {
            self.fail();
            return Err(WalError::Io {
                context: "fdatasync of",
                path: seg.path.clone(),
                source,
            });
        }
        let end = seg.start + seg.len;
        debug_assert!(end >= seg.synced, "W2: the synced mark never moves back");
        seg.synced = end;
        self.write_mark(end);
        Ok(())
    }

    /// Records (W7) that the log is synced through `lsn`: written, never synced, in the slot
    /// after the last one. A failure is ignored: the mark only ever lags, which is safe.
    fn write_mark(&self, lsn: u64) {
        if let Some(file) = &self.mark {
            let slot = self.marks.fetch_add(1, Ordering::Relaxed) % 2;
            let _ = file.write_at(&encode_mark(lsn), slot * MARK_SLOT);
        }
    }

    /// `fdatasync` of `file`, the log's `number`th; in tests, failed with `EIO` when it is
    /// the one `fail_sync` names.
    #[cfg_attr(not(test), allow(clippy::unused_self))]
    fn sync_data(&self, file: &dyn StorageFile, number: u64) -> io::Result<()> {
        #[cfg(test)]
        if self.fail_sync.load(Ordering::Relaxed) == number {
            return Err(io::Error::from(rustix::io::Errno::IO));
        }
        let _ = number;
        file.sync_data()
    }

    /// The LSN after everything submitted so far.
    pub(crate) fn submitted(&self) -> u64 {
        match self.mode {
            Durability::Group | Durability::None => self.submitted.load(Ordering::Relaxed),
            Durability::Event => {
                let seg = lock(&self.segment);
                seg.start + seg.len
            }
        }
    }

    /// Starts a new segment at the current end of the log and returns its start LSN. Records
    /// submitted without waiting are written (and flushed, unless the mode is `none`) first.
    ///
    /// The caller guarantees quiescence: no submission runs concurrently (the store holds its
    /// checkpoint gate exclusively).
    ///
    /// `durable` moves to the end of the log only once the write and (unless the mode is
    /// `none`) the `fdatasync` covering it succeeded (W3); a failure of either fails the log
    /// (W4), so no later `flush_through` reports those bytes durable. The new segment is
    /// created only after that sync (W6).
    pub(crate) fn rotate(&self) -> Result<u64, WalError> {
        // Lock order: segment, then queue (held across the write and sync: the log is
        // quiescent, and no leader holds the queue's lock while it waits for the segment's).
        let mut seg = lock(&self.segment);
        let mut queue = (self.mode != Durability::Event).then(|| lock(&self.queue));
        self.check()?;
        let mut committed = (0, None);
        if let Some(q) = queue.as_deref_mut() {
            debug_assert!(!q.flushing, "rotate runs only when the log is quiescent");
            let batch = std::mem::take(&mut q.pending);
            // The commit's figures are taken with the batch; recorded once it is durable.
            committed = (
                std::mem::take(&mut q.pending_records),
                q.pending_since.take(),
            );
            self.write(&mut seg, &batch)?;
            debug_assert_eq!(
                seg.start + seg.len,
                q.submitted,
                "W5: the log is written in order"
            );
        }
        if seg.len > 0 && self.mode != Durability::None {
            self.sync(&mut seg)?;
        }
        let end = seg.start + seg.len;
        if let Some(q) = queue.as_deref_mut() {
            q.advance_durable(end, seg.synced, self.mode == Durability::None);
            self.record_commit(committed.0, committed.1);
        }
        drop(queue);
        if seg.len == 0 {
            return Ok(seg.start);
        }
        let sync = self.mode != Durability::None;
        let storage = &*self.files.storage;
        let next =
            create_segment(storage, &self.dir, end, sync, &self.counters).inspect_err(|_| {
                self.fail();
            })?;
        self.files.insert(end, Arc::clone(&next.file), &next.path);
        *seg = next;
        Ok(end)
    }

    /// Deletes every segment that ends at or before `lsn` (a segment start returned by
    /// [`rotate`](Self::rotate) whose records are all checkpointed) but those in `keep` (whose
    /// start is there: they hold retained events).
    pub(crate) fn delete_before(&self, lsn: u64, keep: &BTreeSet<u64>) -> Result<(), WalError> {
        let storage = &*self.files.storage;
        let segments = list_segments(storage, &self.dir)?;
        let mut deleted = false;
        for (start, path) in segments {
            if start < lsn && !keep.contains(&start) {
                self.files.remove(start);
                storage.remove(&path).map_err(io_err("deleting", &path))?;
                deleted = true;
            }
        }
        if deleted && self.mode != Durability::None {
            storage
                .sync_dir(&self.dir)
                .map_err(io_err("fsync of", &self.dir))?;
        }
        Ok(())
    }

    /// The start LSNs of the segments on disk, in order.
    pub(crate) fn segment_starts(&self) -> Vec<u64> {
        self.files.starts()
    }

    /// The log's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The storage the log's files are on.
    pub(crate) fn storage(&self) -> &dyn Storage {
        &*self.files.storage
    }

    /// What the log did so far.
    pub(crate) fn stats(&self) -> WalStats {
        WalStats {
            syncs: self.counters.syncs.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            segments: self.counters.segments.load(Ordering::Relaxed),
            batch_records: self.counters.batch_records.snapshot(),
            commit_wait_micros: self.counters.commit_wait_micros.snapshot(),
        }
    }

    /// Records a commit of `records` records, the first submitted at `since`.
    fn record_commit(&self, records: u64, since: Option<std::time::Instant>) {
        if records == 0 {
            return;
        }
        self.counters.batch_records.record(records);
        if let Some(since) = since {
            let micros = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.counters.commit_wait_micros.record(micros);
        }
    }
}

fn parity(batch: u64) -> usize {
    usize::from(batch % 2 == 1)
}

/// The start LSN a segment's file name gives.
pub(crate) fn segment_start(path: &Path) -> Option<u64> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".wal")?;
    (stem.len() == 16).then(|| u64::from_str_radix(stem, 16).ok())?
}

fn segment_path(dir: &Path, start: u64) -> PathBuf {
    dir.join(format!("{start:016x}.wal"))
}

/// The file beside the log's directory that holds the synced-through mark (W7): `wal.synced`
/// for `wal/`. Outside it, so that the directory holds segments only.
pub(crate) fn mark_path(dir: &Path) -> PathBuf {
    dir.with_extension("synced")
}
/// The distance between the mark's two slots: each in a sector of its own.
const MARK_SLOT: u64 = 512;
const MARK_MAGIC: [u8; 4] = *b"TSSY";

/// One slot of the mark: magic, the LSN (little-endian), a CRC-32C of both.
fn encode_mark(lsn: u64) -> [u8; 16] {
    let mut out = [0; 16];
    out[..4].copy_from_slice(&MARK_MAGIC);
    out[4..12].copy_from_slice(&lsn.to_le_bytes());
    let crc = crc32c::crc32c(&out[..12]);
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode_mark(slot: &[u8]) -> Option<u64> {
    let slot: &[u8; 16] = slot.get(..16)?.try_into().ok()?;
    let crc = u32::from_le_bytes(slot[12..].try_into().ok()?);
    if slot[..4] != MARK_MAGIC || crc32c::crc32c(&slot[..12]) != crc {
        return None;
    }
    Some(u64::from_le_bytes(slot[4..12].try_into().ok()?))
}

/// The synced-through mark of the log in `dir` (W7): the highest LSN a valid slot holds, 0 if
/// there is none (no mark file, or nothing in it survived). Every byte of log below it was
/// covered by a successful `fdatasync`.
///
/// # Errors
/// [`WalError::Io`] if the file is there but cannot be read.
pub(crate) fn read_mark(storage: &dyn Storage, dir: &Path) -> Result<u64, WalError> {
    let path = mark_path(dir);
    let bytes = match storage.read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_err("reading", &path)(e)),
    };
    let slot = |at: u64| {
        usize::try_from(at)
            .ok()
            .and_then(|at| bytes.get(at..))
            .and_then(decode_mark)
    };
    Ok(slot(0)
        .into_iter()
        .chain(slot(MARK_SLOT))
        .max()
        .unwrap_or(0))
}

/// Opens (creating) the mark file of the log in `dir`, which goes on at `lsn`. A mark past
/// `lsn` (left by log that a repair gave up) is brought back to `lsn` in both slots and
/// synced, so that it never claims log that is not there; recovery synced the log through
/// `lsn`.
fn open_mark(
    storage: &dyn Storage,
    dir: &Path,
    lsn: u64,
) -> Result<Arc<dyn StorageFile>, WalError> {
    let path = mark_path(dir);
    let new = match storage.open(&path, false) {
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(io_err("opening", &path)(e)),
    };
    let past = read_mark(storage, dir)? > lsn;
    let file = storage.create(&path).map_err(io_err("creating", &path))?;
    if new {
        // Its name made durable once, so that the marks written to it can survive.
        if let Some(parent) = path.parent() {
            storage
                .sync_dir(parent)
                .map_err(io_err("fsync of", parent))?;
        }
    }
    if past {
        let mark = encode_mark(lsn);
        file.write_at(&mark, 0)
            .and_then(|()| file.write_at(&mark, MARK_SLOT))
            .and_then(|()| file.sync_data())
            .map_err(io_err("writing", &path))?;
    }
    Ok(file)
}

/// Creates (or, when one was left empty at exactly this LSN, reuses) the segment starting at
/// `start`, and (with `sync`) makes its directory entry durable.
fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    start: u64,
    sync: bool,
    counters: &Counters,
) -> Result<Segment, WalError> {
    let path = segment_path(dir, start);
    let file = storage.create(&path).map_err(io_err("creating", &path))?;
    // A file already there at this LSN holds no valid record past it (recovery truncated it),
    // so anything in it is garbage to drop before appending.
    file.set_len(0).map_err(io_err("truncating", &path))?;
    if sync {
        file.sync_data().map_err(io_err("fsync of", &path))?;
        storage.sync_dir(dir).map_err(io_err("fsync of", dir))?;
    }
    counters.segments.fetch_add(1, Ordering::Relaxed);
    Ok(Segment {
        file,
        path,
        start,
        len: 0,
        synced: start,
    })
}

/// The segment files of `dir`, by start LSN. Other files are ignored.
fn list_segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let mut out = Vec::new();
    for path in storage.list(dir).map_err(io_err("listing", dir))? {
        if let Some(start) = segment_start(&path) {
            out.push((start, path));
        }
    }
    out.sort();
    Ok(out)
}

/// Where recovery found the log to end early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The segment file.
    pub segment: PathBuf,
    /// The offset in it of the first record that did not decode; the file was cut there.
    pub offset: u64,
    /// Why that record did not decode.
    pub error: RecordError,
}

/// Damage in the log: a stretch that holds no valid record (a record that does not decode, or
/// log missing between segments) with valid records after it. A torn write can only leave a
/// bad *tail* (segments before the last one were flushed before it was created), so this is
/// not one: records that were durable, and perhaps sent to clients, are lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The segment file the damage is in (or, for a missing stretch, the first file after it).
    pub segment: PathBuf,
    /// The offset in that file where it starts.
    pub offset: u64,
    /// How many bytes of log it spans, when known (`None`: log is missing up to an unknown
    /// end).
    pub bytes: Option<u64>,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at offset {}: {}",
            self.segment.display(),
            self.offset,
            self.what
        )?;
        if let Some(b) = self.bytes {
            write!(f, " ({b} bytes)")?;
        }
        Ok(())
    }
}

/// What [`recover`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// The LSN after the last valid record: where the log goes on.
    pub(crate) end: u64,
    /// Records replayed from the checkpoint on (archived segments, read for where their events
    /// are, not counted).
    pub(crate) records: u64,
    /// The torn or corrupt tail that was cut off, if any.
    pub(crate) torn: Option<TornTail>,
    /// Whether records between the checkpoint and the first segment are missing (only with
    /// `repair`; otherwise that is [`Damage`]).
    pub(crate) gap: bool,
    /// Bytes cut off: the torn tail and any segment that did not follow on.
    pub(crate) discarded_bytes: u64,
    /// The damaged stretches a repair skipped (empty unless `repair`).
    pub(crate) damage: Vec<Damage>,
}

/// Where a valid record starts in `bytes` at or after `from`, if one does. With `to_end`, only
/// a record that begins a run of valid records reaching the end of `bytes` counts, so that a
/// record a client embedded in a payload (whose enclosing record is followed by its checksum,
/// never by the end of the run) is not taken for a real one.
fn next_valid(bytes: &[u8], from: usize, to_end: bool) -> Option<usize> {
    let mut at = from;
    while at < bytes.len() {
        let rel = bytes[at..].iter().position(|b| *b == record::MAGIC[0])?;
        let y = at + rel;
        if record::decode(&bytes[y..]).is_ok() && (!to_end || runs_to_end(bytes, y)) {
            return Some(y);
        }
        at = y + 1;
    }
    None
}

/// Whether valid records lie end to end from `from` to the end of `bytes`.
fn runs_to_end(bytes: &[u8], mut from: usize) -> bool {
    while from < bytes.len() {
        match record::decode(&bytes[from..]) {
            Ok((_, used)) => from += used,
            Err(_) => return false,
        }
    }
    true
}

/// What the frame header of a record that did not decode says ([`record::peek_frame_len`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Header {
    /// Magic, version or the header itself is missing or wrong.
    Unreadable,
    /// Readable, but the length it claims runs past the end of the segment (or beyond
    /// [`record::MAX_BODY_BYTES`]).
    RunsPast,
    /// Readable, and the whole frame it claims is in the segment: what is bad is its checksum
    /// or its body. The frame's total length.
    Whole(usize),
}

impl Header {
    /// The header of the bad record at the start of `bytes`.
    fn of(bytes: &[u8]) -> Header {
        match record::peek_frame_len(bytes) {
            None => Header::Unreadable,
            Some(total)
                if total - record::OVERHEAD_BYTES <= record::MAX_BODY_BYTES
                    && total <= bytes.len() =>
            {
                Header::Whole(total)
            }
            Some(_) => Header::RunsPast,
        }
    }

    /// How far past the bad record's start the search for the next record begins: past the
    /// whole frame when it is whole (its body may be a payload holding anything, records
    /// included), else at the next byte.
    fn skip(self) -> usize {
        match self {
            Header::Whole(total) => total,
            Header::Unreadable | Header::RunsPast => 1,
        }
    }
}

/// The facts about a record that did not decode, from which [`decide`] rules. Every
/// position is an offset in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Facts {
    /// What its header says.
    header: Header,
    /// The first valid record after it (searched from [`Header::skip`] on), if any.
    valid_after: Option<usize>,
    /// The first record after it that begins a run of valid records reaching the end of the
    /// segment, if any.
    run_to_end_after: Option<usize>,
    /// Whether this is the log's last segment.
    last_segment: bool,
    /// Whether the bad record starts below the synced-through mark (W7): its bytes were
    /// covered by a successful `fdatasync`.
    below_mark: bool,
    /// Whether recovery was told to repair.
    repair: bool,
}

/// What recovery does about a record that did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// A torn tail: cut the segment at the bad record and go on writing there.
    CutTail,
    /// Damage, refused (no repair): recovery stops, changing nothing. The damaged stretch ends
    /// at `to`; `valid_follow` says whether valid records follow in the segment (else later
    /// segments do).
    Refuse {
        /// Where the damaged stretch ends.
        to: usize,
        /// Whether valid records follow it in the segment.
        valid_follow: bool,
    },
    /// Damage, repaired: reported, and replay goes on at `to`.
    Skip {
        /// Where the damaged stretch ends and replay goes on.
        to: usize,
        /// Whether valid records follow it in the segment.
        valid_follow: bool,
    },
}

/// The rule "torn tail or damage", in one place. A power loss can leave bad records only in
/// log that no successful `fdatasync` covered: at the end of the last segment (W6: every
/// earlier segment was synced whole before the next one was created), above the
/// synced-through mark (W7). There, unsynced writes may have reached the disk in any order and
/// torn, so bad bytes may have valid records after them. So:
///
/// 1. In the last segment, a bad record at or above the mark: a torn tail, cut off (in repair
///    mode too), whatever follows it. Nothing there was acknowledged as durable unless a sync
///    covered it after the mark was last written (see W7 for that window).
/// 2. Anywhere else (an earlier segment, or below the mark): damage to synced log, refused
///    without `repair`, skipped with it (up to the next valid record, or the segment's end).
///    What counts as a valid record following: one beginning a run of valid records to the
///    end of the segment when the bad record's length runs past the end (a record after a
///    damaged length field is followed by the rest of the log, while one inside a payload is
///    followed by the payload's end) or when repairing (a repair must not take a record
///    inside a payload for a real one); otherwise any valid record.
///
/// The decode error itself (checksum, truncation, body) does not enter the decision: a bad
/// record is judged by where it is and what follows it. `end` is the segment's length.
fn decide(f: &Facts, end: usize) -> Decision {
    let follows = match (f.header, f.repair) {
        (Header::RunsPast, _) | (_, true) => f.run_to_end_after,
        (Header::Unreadable | Header::Whole(_), false) => f.valid_after,
    };
    let unsynced_tail = f.last_segment && !f.below_mark;
    match (unsynced_tail, follows, f.repair) {
        (true, _, _) => Decision::CutTail,
        (false, Some(to), false) => Decision::Refuse {
            to,
            valid_follow: true,
        },
        (false, None, false) => Decision::Refuse {
            to: end,
            valid_follow: false,
        },
        (false, Some(to), true) => Decision::Skip {
            to,
            valid_follow: true,
        },
        (false, None, true) => Decision::Skip {
            to: end,
            valid_follow: false,
        },
    }
}

/// The facts about the bad record at `offset` in `bytes` (a whole segment).
fn facts(bytes: &[u8], offset: usize, last_segment: bool, below_mark: bool, repair: bool) -> Facts {
    let header = Header::of(&bytes[offset..]);
    let from = offset + header.skip();
    Facts {
        header,
        valid_after: next_valid(bytes, from, false),
        run_to_end_after: next_valid(bytes, from, true),
        last_segment,
        below_mark,
        repair,
    }
}

/// Replays the log of `dir`, calling `apply` for every valid record (with its encoded bytes,
/// its LSN, and whether it is *archived*: in a segment wholly before `checkpoint`, kept because
/// it holds retained events) in order, and cuts a torn tail off the last segment. Creates and
/// deletes nothing. Archived segments need not follow on from one another (those between them
/// held no retained event and were deleted); from the segment holding `checkpoint` on, the log
/// must run end to end.
///
/// A bad record with valid records after it, log missing between the checkpoint and the first
/// segment or between two segments, or a bad record in any segment but the last, is not a torn
/// write but [`Damage`]: without `repair` recovery stops there with [`WalError::Damaged`] and
/// changes no segment (records before it may have been applied to the index: every record is
/// a blind write).
/// With `repair` the damaged stretch is skipped, every valid record after it is applied, and
/// the damage is reported in [`Recovered::damage`].
///
/// # Errors
/// [`WalError::Damaged`]; [`WalError::Io`] if a segment cannot be read, cut or deleted; the
/// error of `apply`, as is.
pub(crate) fn recover<E: From<WalError>>(
    storage: &dyn Storage,
    dir: &Path,
    checkpoint: u64,
    sync: bool,
    repair: bool,
    mut apply: impl FnMut(&Record<'_>, &[u8], u64, bool) -> Result<(), E>,
) -> Result<Recovered, E> {
    let segments = list_segments(storage, dir)?;
    let mark = read_mark(storage, dir)?;
    let mut out = Recovered {
        end: checkpoint,
        ..Recovered::default()
    };
    let hole = |out: &mut Recovered, damage: Damage| -> Result<(), WalError> {
        if repair {
            out.damage.push(damage);
            Ok(())
        } else {
            Err(WalError::Damaged(damage))
        }
    };
    // Segments wholly before the checkpoint: archived (they hold retained events), or left
    // over by a crash during a checkpoint. The log from the checkpoint on starts in the
    // segment that holds the checkpoint (or, if none does, in the first after it).
    let mut first = 0;
    for (start, path) in &segments {
        let len = storage
            .open(path, false)
            .and_then(|f| f.len())
            .map_err(io_err("reading", path))?;
        if start.saturating_add(len) > checkpoint || *start >= checkpoint {
            break;
        }
        first += 1;
    }
    let (archived, live) = segments.split_at(first);
    if checkpoint > 0 && live.is_empty() {
        // A checkpoint always leaves the segment it rotated to.
        hole(
            &mut out,
            Damage {
                segment: segment_path(dir, checkpoint),
                offset: 0,
                bytes: None,
                what: format!(
                    "the log segment at the checkpoint (LSN {checkpoint}) and everything after \
                     it is missing"
                ),
            },
        )?;
    }
    let mut changed = false;
    let count = archived.len() + live.len();
    for (i, (start, path)) in archived.iter().chain(live).enumerate() {
        let last = i + 1 == count;
        let archive = i < archived.len();
        let i = i.wrapping_sub(archived.len());
        let end = out.end;
        if archive {
            // Archived segments need not follow on: nothing to check.
        } else if *start > end {
            // Log is missing between the checkpoint (or the previous segment) and this one.
            hole(
                &mut out,
                Damage {
                    segment: path.clone(),
                    offset: 0,
                    bytes: Some(*start - end),
                    what: format!("the log from LSN {end} to {start} is missing"),
                },
            )?;
            if i == 0 {
                out.gap = true;
            }
        } else if *start < end && i > 0 {
            hole(
                &mut out,
                Damage {
                    segment: path.clone(),
                    offset: 0,
                    bytes: Some(0),
                    what: format!(
                        "this segment starts at LSN {start}, inside the previous one (which \
                         ends at {end}); it is ignored"
                    ),
                },
            )?;
            continue;
        }
        // The checkpoint may fall inside the first segment: replaying its head again is
        // harmless (every record is a blind write).
        if !archive {
            out.end = *start;
        }
        let bytes = storage.read(path).map_err(io_err("reading", path))?;
        let mut offset = 0usize;
        // `offset < bytes.len()` in the loop, and `decode` never reports more bytes used than
        // it was given, so the slices below stay in bounds.
        while offset < bytes.len() {
            let error = match record::decode(&bytes[offset..]) {
                Ok((record, used)) => {
                    let lsn = start + offset as u64;
                    apply(&record, &bytes[offset..offset + used], lsn, archive)?;
                    out.records += u64::from(!archive);
                    offset += used;
                    continue;
                }
                Err(error) => error,
            };
            let below_mark = start + (offset as u64) < mark;
            let decision = decide(
                &facts(&bytes, offset, last, below_mark, repair),
                bytes.len(),
            );
            let (to, valid_follow) = match decision {
                Decision::CutTail => {
                    let file = storage.open(path, true).map_err(io_err("opening", path))?;
                    file.set_len(offset as u64)
                        .map_err(io_err("truncating", path))?;
                    if sync {
                        file.sync_data().map_err(io_err("fsync of", path))?;
                    }
                    out.torn = Some(TornTail {
                        segment: path.clone(),
                        offset: offset as u64,
                        error,
                    });
                    out.discarded_bytes += (bytes.len() - offset) as u64;
                    changed = true;
                    break;
                }
                Decision::Refuse { to, valid_follow } | Decision::Skip { to, valid_follow } => {
                    (to, valid_follow)
                }
            };
            let damage = Damage {
                segment: path.clone(),
                offset: offset as u64,
                bytes: Some((to - offset) as u64),
                what: if valid_follow {
                    format!("{error}, and valid records follow")
                } else if last {
                    format!("{error}, in log synced before (through LSN {mark})")
                } else {
                    format!("{error}, and later log segments follow")
                },
            };
            if let Decision::Refuse { .. } = decision {
                return Err(WalError::Damaged(damage).into());
            }
            out.damage.push(damage);
            out.discarded_bytes += (to - offset) as u64;
            offset = to;
        }
        if !archive {
            out.end = start + offset as u64;
        }
    }
    let end = out.end;
    if let (true, Some((start, path))) = (end < mark, live.last()) {
        // W7: the log was synced through the mark, so it cannot end before it.
        hole(
            &mut out,
            Damage {
                segment: path.clone(),
                offset: end.saturating_sub(*start),
                bytes: Some(mark - end),
                what: format!("the log ends at LSN {end}, but it was synced through LSN {mark}"),
            },
        )?;
    }
    if sync {
        // The log goes on in a new segment after this one, so this one must be durable whole
        // first (W6): a process that died left its unsynced writes in the page cache, and a
        // power loss after the restart could still take them, leaving a hole before the new
        // segment.
        if let Some((_, path)) = segments.last() {
            storage
                .open(path, true)
                .and_then(|f| f.sync_data())
                .map_err(io_err("fdatasync of", path))?;
        }
    }
    if changed && sync {
        storage.sync_dir(dir).map_err(io_err("fsync of", dir))?;
    }
    Ok(out)
}

/// Reads the records of the log of `dir` from LSN `from` to LSN `to` (both segment starts
/// returned by [`Wal::rotate`], so the records between them are whole and written), calling
/// `apply` for each in order. An index rebuild uses it to bring the new index up to `to`.
///
/// # Errors
/// [`WalError::Io`] if a segment cannot be read, or (as `corrupt`'s error) if the segments do
/// not cover `from .. to` end to end with valid records: the log between two rotations was
/// written by this process, so that means it changed under it. The error of `apply`, as is.
pub(crate) fn read_range<E: From<WalError>>(
    storage: &dyn Storage,
    dir: &Path,
    from: u64,
    to: u64,
    corrupt: impl Fn(String) -> E,
    mut apply: impl FnMut(&Record<'_>, &[u8], u64) -> Result<(), E>,
) -> Result<u64, E> {
    let mut at = from;
    let mut records = 0;
    for (start, path) in list_segments(storage, dir)? {
        if start < from || start >= to {
            continue;
        }
        if start != at {
            return Err(corrupt(format!(
                "the log has no records from LSN {at} to {start}"
            )));
        }
        let bytes = storage.read(&path).map_err(io_err("reading", &path))?;
        let mut offset = 0usize;
        // `decode` never reports more bytes used than it was given, so the slices stay in
        // bounds.
        while offset < bytes.len() {
            let (rec, used) = record::decode(&bytes[offset..])
                .map_err(|e| corrupt(format!("{} at offset {offset}: {e:?}", path.display())))?;
            apply(&rec, &bytes[offset..offset + used], start + offset as u64)?;
            records += 1;
            offset += used;
        }
        at = start + offset as u64;
    }
    if at != to {
        return Err(corrupt(format!("the log ends at LSN {at}, before {to}")));
    }
    Ok(records)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod sim_tests;
