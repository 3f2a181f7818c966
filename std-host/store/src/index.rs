//! The sled store behind the log: the materialised state that reads are served from. In
//! memory (`--in-memory`) the same trees are ordered maps in process memory (`tree`), and
//! nothing is written anywhere.
//!
//! A data dir's events are not in sled: they stay in the write-ahead log, and an
//! [`EventTable`] in memory says where each is (`store/src/events.rs`). In memory the events are
//! a tree like the others.
//!
//! Trees:
//! - `events` (in memory; in a data dir only in versions before events stayed in the log, and
//!   moved to the log at open: [`Index::legacy_events`]): `[task id length: u8][task id][seq:
//!   u64 big endian]` → the event's core record (`Record::Event`, framed and checksummed), so
//!   one task's events are contiguous and in seq order.
//! - `tasks`: task id → the host's `TaskRecord` as JSON.
//! - `floors`: task id → the earliest seq retention keeps (u64 big endian); absent means 0.
//! - `meta`: `checkpoint` → the WAL LSN from which recovery replays (u64 big endian);
//!   `hole:<task id>` → present if a repair knowingly left a hole in that task's seqs.
//!
//! Every change is applied through [`Index::apply`] from a log record, and every record is a
//! blind write (a put or a delete of keys it names), so replaying a log suffix over a state that
//! already holds part of it yields the same state: recovery needs no "already applied" check.
//!
//! sled 0.34's `flush` ends in `sync_file_range`, which survives a process crash but not a power
//! cut; [`Index::flush`] follows it with a real `fdatasync` of sled's data file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use taskstream_core::record::{EventRecord, Record};
use taskstream_core::Seq;

use std::ops::Bound;

use super::error::{IndexError, IndexErrorKind, StoreError};
use super::events::{EventTable, Loc};
use super::frame::encode_into;
use super::fsutil;
use super::tree::Tree;

const CHECKPOINT_KEY: &[u8] = b"checkpoint";

/// The store's error for a failure of sled while `context`: an [`IndexError`] of the kind the
/// failure is, with a message of our own; sled's error is kept as its `source()`, for logs.
/// sled's types stay in this module and `tree`; the public API never shows them.
pub(crate) fn index_error(context: &'static str, e: sled::Error) -> StoreError {
    let (kind, message) = match &e {
        sled::Error::Io(io) => (IndexErrorKind::Io, io.to_string()),
        sled::Error::Corruption { at, .. } => (
            IndexErrorKind::Corrupt,
            match at {
                Some(at) => format!("its files hold corrupt data (at {at:?})"),
                None => "its files hold corrupt data".to_owned(),
            },
        ),
        sled::Error::CollectionNotFound(name) => (
            IndexErrorKind::Other,
            format!("tree {:?} does not exist", String::from_utf8_lossy(name)),
        ),
        sled::Error::Unsupported(what) => (IndexErrorKind::Other, format!("unsupported: {what}")),
        sled::Error::ReportableBug(what) => {
            (IndexErrorKind::Other, format!("internal error: {what}"))
        }
    };
    StoreError::Index(IndexError::new(context, kind, message, e))
}

/// Where the events are: a tree (in memory), or the log, by an [`EventTable`] (a data dir).
pub(crate) enum Events {
    Tree(Tree),
    Log(Arc<EventTable>),
}

/// The sled database (none in memory) and its trees.
pub(crate) struct Index {
    db: Option<sled::Db>,
    pub(crate) events: Events,
    /// A data dir's `events` tree, where versions before events stayed in the log kept them.
    legacy_events: Option<Tree>,
    tasks: Tree,
    floors: Tree,
    meta: Tree,
    /// sled's directory and data file, for `fdatasync` (none when temporary).
    files: Option<(PathBuf, File)>,
    /// Whether sled's `conf` file has been synced (once, at the first synced flush).
    conf_synced: std::sync::atomic::AtomicBool,
}

impl Index {
    /// Opens (or creates) the database in `dir` with sled's page cache bounded to
    /// `cache_bytes`, or with `None` an empty index in process memory (see `tree`).
    /// With a directory the events are those of `table` (a new one reads from no segment).
    pub(crate) fn open(
        dir: Option<&Path>,
        cache_bytes: u64,
        table: Option<Arc<EventTable>>,
    ) -> Result<Index, StoreError> {
        let Some(dir) = dir else {
            // In-memory stores of earlier versions kept sled files in scratch directories;
            // those of processes that died without removing theirs are reaped here.
            reap_dead_scratch_dirs(&scratch_base());
            return Ok(Index {
                db: None,
                events: Events::Tree(Tree::memory()),
                legacy_events: None,
                tasks: Tree::memory(),
                floors: Tree::memory(),
                meta: Tree::memory(),
                files: None,
                conf_synced: std::sync::atomic::AtomicBool::new(false),
            });
        };
        let config = sled::Config::new()
            .cache_capacity(cache_bytes)
            // Checkpoints flush; sled's own timer thread would only add device flushes.
            .flush_every_ms(None)
            .path(dir);
        let db = open_when_released(&config)?;
        let tree = |name: &str| {
            db.open_tree(name)
                .map(Tree::Sled)
                .map_err(|e| index_error("opening a tree of", e))
        };
        fsutil::restrict_tree(dir).map_err(StoreError::io("restricting", dir))?;
        let path = dir.join("db");
        let file = File::open(&path).map_err(StoreError::io("opening", &path))?;
        let table =
            table.unwrap_or_else(|| Arc::new(EventTable::new(super::wal::SegmentFiles::new())));
        Ok(Index {
            events: Events::Log(table),
            legacy_events: Some(tree("events")?),
            tasks: tree("tasks")?,
            floors: tree("floors")?,
            meta: tree("meta")?,
            db: Some(db),
            files: Some((dir.to_owned(), file)),
            conf_synced: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Applies one log record (a blind write; see the module docs); `raw` is its encoding and
    /// `lsn` where it is in the log.
    pub(crate) fn apply(&self, rec: &Record<'_>, raw: &[u8], lsn: u64) -> Result<(), StoreError> {
        self.apply_from(rec, raw, lsn, false)
    }

    /// Applies log records in order (each with its encoding and LSN), runs of plain events in
    /// memory as one batch; the same state as [`apply`](Self::apply) of each in turn.
    pub(crate) fn apply_all<'r>(
        &self,
        records: impl IntoIterator<Item = (Record<'r>, &'r [u8], u64)>,
    ) -> Result<(), StoreError> {
        let Events::Tree(events) = &self.events else {
            for (rec, raw, lsn) in records {
                self.apply(&rec, raw, lsn)?;
            }
            return Ok(());
        };
        let mut run: Vec<(sled::IVec, sled::IVec)> = Vec::new();
        for (rec, raw, lsn) in records {
            if let Record::Event(event) = &rec {
                run.push((event_key(event.task_id, event.seq).into(), raw.into()));
                continue;
            }
            if !run.is_empty() {
                events
                    .insert_all(std::mem::take(&mut run))
                    .map_err(|e| index_error("writing events", e))?;
            }
            self.apply(&rec, raw, lsn)?;
        }
        if !run.is_empty() {
            events
                .insert_all(run)
                .map_err(|e| index_error("writing events", e))?;
        }
        Ok(())
    }

    /// Applies one log record replayed over a state that may be ahead of it (recovery, or an
    /// index rebuild replaying what changed during its copy). A truncation then deletes every
    /// event of the task below its new floor, not just those from the current floor on: the
    /// floor stored may be a later one than the record's, and an event the replay put back
    /// below it must still go.
    pub(crate) fn replay(&self, rec: &Record<'_>, raw: &[u8], lsn: u64) -> Result<(), StoreError> {
        self.apply_from(rec, raw, lsn, true)
    }

    /// Applies one log record replayed into a rebuilt index, which shares the event table
    /// of the index it replaces (already up to date): sled's trees only.
    pub(crate) fn replay_rebuilt(
        &self,
        rec: &Record<'_>,
        raw: &[u8],
        lsn: u64,
    ) -> Result<(), StoreError> {
        if matches!(self.events, Events::Tree(_)) {
            return self.replay(rec, raw, lsn);
        }
        match rec {
            Record::Event(_) => Ok(()),
            Record::Transition { event, state } => self
                .tasks
                .insert(event.task_id.as_bytes(), state)
                .map_err(|e| index_error("writing a task", e)),
            Record::Truncate { task_id, before } => self
                .floors
                .insert(task_id.as_bytes(), &before.get().to_be_bytes())
                .map_err(|e| index_error("writing a floor", e)),
            Record::Remove { task_id } => {
                self.meta
                    .remove(&hole_key(task_id))
                    .map_err(|e| index_error("removing a hole mark", e))?;
                self.floors
                    .remove(task_id.as_bytes())
                    .map_err(|e| index_error("removing a floor", e))?;
                self.tasks
                    .remove(task_id.as_bytes())
                    .map_err(|e| index_error("removing a task", e))?;
                Ok(())
            }
        }
    }

    /// Takes from a record of an archived segment (one wholly before the checkpoint, kept for
    /// the retained events in it) only where its event is; the rest of it is in sled already
    /// (and a later record the checkpoint covers may have changed it since).
    pub(crate) fn replay_archived(&self, rec: &Record<'_>, raw: &[u8], lsn: u64) {
        if let (Events::Log(table), Some(event)) = (&self.events, rec.event()) {
            table.put(event.task_id, event.seq, loc(raw, lsn));
        }
    }

    fn apply_from(
        &self,
        rec: &Record<'_>,
        raw: &[u8],
        lsn: u64,
        from_zero: bool,
    ) -> Result<(), StoreError> {
        match rec {
            Record::Event(event) => self.put_event(event, raw, lsn, true),
            Record::Transition { event, state } => {
                self.tasks
                    .insert(event.task_id.as_bytes(), state)
                    .map_err(|e| index_error("writing a task", e))?;
                self.put_event(event, raw, lsn, false)
            }
            Record::Truncate { task_id, before } => {
                self.delete_events(task_id, Some(*before), from_zero)?;
                self.floors
                    .insert(task_id.as_bytes(), &before.get().to_be_bytes())
                    .map_err(|e| index_error("writing a floor", e))?;
                Ok(())
            }
            Record::Remove { task_id } => {
                self.delete_events(task_id, None, true)?;
                self.meta
                    .remove(&hole_key(task_id))
                    .map_err(|e| index_error("removing a hole mark", e))?;
                self.floors
                    .remove(task_id.as_bytes())
                    .map_err(|e| index_error("removing a floor", e))?;
                self.tasks
                    .remove(task_id.as_bytes())
                    .map_err(|e| index_error("removing a task", e))?;
                Ok(())
            }
        }
    }

    /// Records an event: in the log, where it is (`raw`, the record at `lsn`, which is the
    /// event's own or, for a status event, its `Transition`); in memory, its `Event` record.
    /// `own`: `raw` is the event's own `Event` record.
    fn put_event(
        &self,
        event: &EventRecord<'_>,
        raw: &[u8],
        lsn: u64,
        own: bool,
    ) -> Result<(), StoreError> {
        match &self.events {
            Events::Log(table) => {
                table.put(event.task_id, event.seq, loc(raw, lsn));
                Ok(())
            }
            Events::Tree(events) => {
                let key = event_key(event.task_id, event.seq);
                let value;
                let value = if own {
                    raw
                } else {
                    value = encode(&Record::Event(*event))?;
                    &value[..]
                };
                events
                    .insert(&key, value)
                    .map_err(|e| index_error("writing an event", e))?;
                Ok(())
            }
        }
    }

    /// Deletes the events of a task before `before` (all with `None`), from seq 0 with
    /// `from_zero`, else from its floor.
    fn delete_events(
        &self,
        task_id: &str,
        before: Option<Seq>,
        from_zero: bool,
    ) -> Result<(), StoreError> {
        let events = match &self.events {
            Events::Log(table) => {
                match before {
                    Some(before) => table.truncate(task_id, before),
                    None => table.remove(task_id),
                }
                return Ok(());
            }
            Events::Tree(events) => events,
        };
        // Everything below the floor is already gone from a state built in order: start there,
        // so that trimming one event from a long-lived task costs the same as from a new one.
        let start = if from_zero {
            Seq::ZERO
        } else {
            self.floor(task_id)?
        };
        let from = event_key(task_id, start);
        let keys = match before {
            Some(before) => events.keys(&from, Bound::Excluded(&event_key(task_id, before))),
            None => events.prefix_keys(&task_prefix(task_id)),
        }
        .map_err(|e| index_error("listing events of", e))?;
        if keys.is_empty() {
            return Ok(());
        }
        events
            .remove_all(keys)
            .map_err(|e| index_error("deleting events", e))
    }

    /// The stored event `seq` of a task: its raw record (an `Event` record, or in the log the
    /// `Transition` of a status event).
    pub(crate) fn event(&self, task_id: &str, seq: Seq) -> Result<Option<Bytes>, StoreError> {
        match &self.events {
            Events::Log(table) => table.event(task_id, seq),
            Events::Tree(events) => events
                .get(&event_key(task_id, seq))
                .map(|v| v.map(Bytes::from_owner))
                .map_err(|e| index_error("reading an event", e)),
        }
    }

    /// The stored events of a task with seqs in `from .. to`, in order; `want` is how many
    /// the caller expects to take (a log read takes that many at first).
    pub(crate) fn events(
        &self,
        task_id: &str,
        from: Seq,
        to: Seq,
        want: usize,
    ) -> Box<dyn Iterator<Item = Result<Bytes, StoreError>> + '_> {
        match &self.events {
            Events::Log(table) => Box::new(LogEvents {
                table,
                task_id: task_id.to_owned(),
                next: Some(from),
                to,
                chunk: want.clamp(1, MAX_LOG_CHUNK),
                ready: std::collections::VecDeque::new(),
            }),
            Events::Tree(events) => Box::new(
                events
                    .values(&event_key(task_id, from), &event_key(task_id, to))
                    .map(|v| {
                        v.map(Bytes::from_owner)
                            .map_err(|e| index_error("reading events", e))
                    }),
            ),
        }
    }

    /// The first and last stored seq of a task, if it has any event.
    pub(crate) fn bounds(&self, task_id: &str) -> Result<Option<(Seq, Seq)>, StoreError> {
        let events = match &self.events {
            Events::Log(table) => return Ok(table.bounds(task_id)),
            Events::Tree(events) => events,
        };
        let (first, last) = events
            .prefix_bounds(&task_prefix(task_id))
            .map_err(|e| index_error("reading events", e))?;
        let Some(first) = first else {
            return Ok(None);
        };
        let first = key_seq(&first)?;
        let last = match last {
            Some(last) => key_seq(&last)?,
            None => first,
        };
        Ok(Some((first, last)))
    }

    /// The segments of the log that hold a retained event (none in memory).
    pub(crate) fn segments_in_use(&self) -> std::collections::BTreeSet<u64> {
        match &self.events {
            Events::Log(table) => table.segments_in_use(),
            Events::Tree(_) => std::collections::BTreeSet::new(),
        }
    }

    /// After recovery: forgets the places of events the index says are gone (of tasks it no
    /// longer holds, below a task's floor), whose truncation or removal may have been in a
    /// segment deleted since.
    pub(crate) fn settle_events(&self) -> Result<(), StoreError> {
        let Events::Log(table) = &self.events else {
            return Ok(());
        };
        let mut keep = std::collections::HashMap::new();
        for id in table.task_ids() {
            let held = self
                .tasks
                .get(id.as_bytes())
                .map_err(|e| index_error("reading a task", e))?
                .is_some();
            if held {
                keep.insert(id.clone(), self.floor(&id)?);
            }
        }
        table.retain(|id| keep.get(id).copied());
        Ok(())
    }

    /// The events tree of a data dir written by a version that kept events in sled (empty
    /// once they moved to the log).
    pub(crate) fn legacy_events(&self) -> Option<&Tree> {
        self.legacy_events.as_ref()
    }

    /// The retention floor of a task (0 if never truncated).
    pub(crate) fn floor(&self, task_id: &str) -> Result<Seq, StoreError> {
        match self
            .floors
            .get(task_id.as_bytes())
            .map_err(|e| index_error("reading a floor", e))?
        {
            None => Ok(Seq::ZERO),
            Some(v) => read_u64(&v)
                .and_then(Seq::new)
                .ok_or_else(|| StoreError::corrupt(format!("floor of task {task_id:?}"))),
        }
    }

    /// Every stored task: id and JSON record.
    pub(crate) fn tasks(&self) -> impl Iterator<Item = Result<(String, sled::IVec), StoreError>> {
        self.tasks.entries().map(|item| {
            let (k, v) = item.map_err(|e| index_error("reading tasks", e))?;
            let id = String::from_utf8(k.to_vec())
                .map_err(|_| StoreError::corrupt("a task id is not UTF-8".to_owned()))?;
            Ok((id, v))
        })
    }

    /// Copies every task, floor and event of `from` into this (empty) index, in batches, and
    /// returns how many events it copied. `from` may change meanwhile: the copy is then a mix of
    /// its states, which the caller brings up to date by [`replay`](Self::replay)ing every record
    /// logged since the copy began (every record is a blind write of keys it names).
    pub(crate) fn copy_from(&self, from: &Index) -> Result<u64, StoreError> {
        let tasks = copy_tree(&from.tasks, &self.tasks)?;
        copy_tree(&from.floors, &self.floors)?;
        // The hole marks (and the old checkpoint LSN, which the rebuild then replaces).
        copy_tree(&from.meta, &self.meta)?;
        match (&from.events, &self.events) {
            (Events::Tree(from), Events::Tree(to)) => copy_tree(from, to),
            // The events stay where they are, in the log; the new index shares the table.
            _ => Ok(tasks),
        }
    }

    /// The event table (a data dir's), for a rebuilt index to share.
    pub(crate) fn table(&self) -> Option<Arc<EventTable>> {
        match &self.events {
            Events::Log(table) => Some(Arc::clone(table)),
            Events::Tree(_) => None,
        }
    }

    /// sled's directory (none when temporary).
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.files.as_ref().map(|(dir, _)| dir.as_path())
    }

    /// Marks that a repair knowingly left a hole in a task's seqs (events lost to damage, or
    /// seqs skipped so none is used twice), so later opens do not refuse it as damage. Durable
    /// with the next [`flush`](Self::flush).
    pub(crate) fn mark_hole(&self, task_id: &str) -> Result<(), StoreError> {
        self.meta
            .insert(&hole_key(task_id), b"1")
            .map_err(|e| index_error("writing a hole mark", e))?;
        Ok(())
    }

    /// Whether a repair left a hole in the task's seqs ([`mark_hole`](Self::mark_hole)).
    pub(crate) fn has_hole(&self, task_id: &str) -> Result<bool, StoreError> {
        self.meta
            .get(&hole_key(task_id))
            .map(|v| v.is_some())
            .map_err(|e| index_error("reading a hole mark", e))
    }

    /// The LSN recovery replays from.
    pub(crate) fn checkpoint(&self) -> Result<u64, StoreError> {
        match self
            .meta
            .get(CHECKPOINT_KEY)
            .map_err(|e| index_error("reading the checkpoint", e))?
        {
            None => Ok(0),
            Some(v) => read_u64(&v).ok_or_else(|| StoreError::corrupt("checkpoint LSN".to_owned())),
        }
    }

    /// Records the LSN recovery replays from (durable with the next [`flush`](Self::flush)).
    pub(crate) fn set_checkpoint(&self, lsn: u64) -> Result<(), StoreError> {
        self.meta
            .insert(CHECKPOINT_KEY, &lsn.to_be_bytes())
            .map_err(|e| index_error("writing the checkpoint", e))?;
        Ok(())
    }

    /// Makes everything applied so far durable: sled's flush, then (with `sync`) `fdatasync` of
    /// its data file (and, the first time, of its `conf`) and `fsync` of its directory.
    pub(crate) fn flush(&self, sync: bool) -> Result<(), StoreError> {
        if let Some(db) = &self.db {
            db.flush().map_err(|e| index_error("flushing", e))?;
        }
        if let (true, Some((dir, file))) = (sync, &self.files) {
            file.sync_data()
                .map_err(StoreError::io("fdatasync of", &dir.join("db")))?;
            // sled writes its `conf` (with two plain writes, never synced) when it creates
            // the index, and cannot open the index without it: made durable here, once,
            // before anything (the `INDEX` switch, a checkpoint) relies on the index.
            if !self.conf_synced.load(std::sync::atomic::Ordering::Relaxed) {
                let conf = dir.join("conf");
                match File::open(&conf) {
                    Ok(f) => f
                        .sync_data()
                        .map_err(StoreError::io("fdatasync of", &conf))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io("opening", &conf)(e)),
                }
                self.conf_synced
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            fsutil::sync_dir(dir).map_err(StoreError::io("fsync of", dir))?;
            // sled may have created files (snapshots) since the last look.
            fsutil::restrict_tree(dir).map_err(StoreError::io("restricting", dir))?;
        }
        Ok(())
    }
}

/// The most events one read from the log takes. A reader's first read takes as many as it
/// said it wants, each further one twice as many, so a sweep looking at the oldest event reads
/// a few and a replay reads in long runs.
const MAX_LOG_CHUNK: usize = 512;

/// A task's events read from the log a chunk at a time, as its reader goes.
struct LogEvents<'a> {
    table: &'a EventTable,
    task_id: String,
    next: Option<Seq>,
    to: Seq,
    chunk: usize,
    ready: std::collections::VecDeque<Bytes>,
}

impl Iterator for LogEvents<'_> {
    type Item = Result<Bytes, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() {
            let from = self.next.take()?;
            match self.table.events(&self.task_id, from, self.to, self.chunk) {
                Ok((events, go_on)) => {
                    self.ready = events.into();
                    self.next = go_on;
                    self.chunk = (self.chunk * 2).min(MAX_LOG_CHUNK);
                }
                Err(e) => return Some(Err(e)),
            }
        }
        self.ready.pop_front().map(Ok)
    }
}

/// Copies every entry of `src` into `dst` in batches; returns how many it copied.
fn copy_tree(src: &Tree, dst: &Tree) -> Result<u64, StoreError> {
    const BATCH: usize = 1024;
    let mut batch = Vec::with_capacity(BATCH);
    let mut copied = 0;
    for item in src.entries() {
        batch.push(item.map_err(|e| index_error("reading for a rebuild", e))?);
        copied += 1;
        if batch.len() == BATCH {
            dst.insert_all(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                .map_err(|e| index_error("writing a rebuild", e))?;
        }
    }
    dst.insert_all(batch)
        .map_err(|e| index_error("writing a rebuild", e))?;
    Ok(copied)
}

/// Where a record (`raw`, at `lsn`) is in the log.
fn loc(raw: &[u8], lsn: u64) -> Loc {
    Loc {
        lsn,
        len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
    }
}

fn encode(rec: &Record<'_>) -> Result<Vec<u8>, StoreError> {
    let mut buf = Vec::new();
    encode_into(rec, &mut buf)?;
    Ok(buf)
}

/// The `meta` key of a task's hole mark.
fn hole_key(task_id: &str) -> Vec<u8> {
    let mut key = b"hole:".to_vec();
    key.extend_from_slice(task_id.as_bytes());
    key
}

fn task_prefix(task_id: &str) -> Vec<u8> {
    let id = task_id.as_bytes();
    let mut key = Vec::with_capacity(1 + id.len() + 8);
    // Task ids are at most `record::MAX_TASK_ID_BYTES` (255) bytes; records enforce it.
    key.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
    key.extend_from_slice(id);
    key
}

/// The key of a task's seq in the `events` tree, for tests that write a data dir as versions
/// before events stayed in the log did.
#[cfg(test)]
pub(crate) fn legacy_event_key(task_id: &str, seq: Seq) -> Vec<u8> {
    event_key(task_id, seq)
}

fn event_key(task_id: &str, seq: Seq) -> Vec<u8> {
    let mut key = task_prefix(task_id);
    key.extend_from_slice(&seq.get().to_be_bytes());
    key
}

fn key_seq(key: &[u8]) -> Result<Seq, StoreError> {
    key.len()
        .checked_sub(8)
        .and_then(|at| key.get(at..))
        .and_then(read_u64)
        .and_then(Seq::new)
        .ok_or_else(|| StoreError::corrupt("an event key".to_owned()))
}

fn read_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// The prefix of the scratch directories of in-memory stores.
const SCRATCH_PREFIX: &str = "taskstream-mem-";

/// Where in-memory stores of earlier versions kept their sled files: a memory-backed file
/// system where there is one (`/dev/shm`), else the temp dir.
fn scratch_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    }
}

/// Removes the scratch directories under `base` whose process no longer exists. Best effort:
/// a directory that cannot be read or removed is left alone.
fn reap_dead_scratch_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long to wait for sled's own lock on its files.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens sled, waiting (bounded) for its file lock. Our `LOCK` file already excludes every other
/// server, so a held sled lock can only belong to this process's previous `Store` on the same
/// directory, whose background threads release it a moment after it was dropped.
fn open_when_released(config: &sled::Config) -> Result<sled::Db, StoreError> {
    let start = std::time::Instant::now();
    loop {
        match config.open() {
            Err(sled::Error::Io(e))
                if e.to_string().starts_with("could not acquire lock")
                    && start.elapsed() < LOCK_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other.map_err(|e| index_error("opening", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::io;

    use super::index_error;
    use crate::error::{IndexErrorKind, StoreError};

    #[test]
    fn a_failure_of_sled_is_an_index_error_that_never_names_sled() {
        let full = io::Error::from_raw_os_error(28); // ENOSPC
        let e = index_error("writing a task", sled::Error::Io(full));
        let shown = e.to_string();
        assert!(!shown.to_lowercase().contains("sled"), "{shown}");
        assert!(shown.starts_with("index: writing a task: "), "{shown}");
        assert!(shown.contains("No space left on device"), "{shown}");
        assert!(e.is_io(), "a full disk is an I/O error, not damage: {e:?}");
        assert!(!e.is_damage());
        let StoreError::Index(index) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(index.kind(), IndexErrorKind::Io);
        assert_eq!(index.context(), "writing a task");
        // The chain goes on to sled's own error, for logs.
        let inner = e.source().and_then(|s| s.source()).expect("a source");
        assert!(inner.downcast_ref::<sled::Error>().is_some(), "{inner:?}");

        let e = index_error("reading a task", sled::Error::Unsupported("x".to_owned()));
        let StoreError::Index(index) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(index.kind(), IndexErrorKind::Other);
        assert!(!e.is_io());
        assert_eq!(e.to_string(), "index: reading a task: unsupported: x");
    }
}
