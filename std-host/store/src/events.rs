//! Where a data dir's retained events are: in the write-ahead log itself. The log's segments
//! are the event store; this table says, for every retained event, where its record lies
//! (`(lsn, len)`: an `Event` record, or the `Transition` record whose status event it is), in
//! memory, 16 bytes an event. A segment is deleted once it is wholly before a checkpoint and
//! no retained event is in it ([`EventTable::segments_in_use`]), so the log a checkpoint would
//! have dropped stays exactly as long as retention keeps an event of it.
//!
//! The table is not written anywhere: recovery rebuilds it by reading every segment (archived
//! ones for their events only, `wal::recover`), then drops what the index says is gone (tasks
//! it no longer holds, events below a task's retention floor), so a truncation or removal
//! whose record was in a deleted segment still holds.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use taskstream_core::record::{self, Record};
use taskstream_core::Seq;

use super::error::StoreError;
use super::frame::encode_into;
use super::sync::{lock_read, lock_write};
use super::wal::SegmentFiles;
use bytes::Bytes;

fn encode(rec: &Record<'_>) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    encode_into(rec, &mut out)?;
    Ok(out)
}

/// Where one event's record is in the log; `len == 0` marks a seq whose event is not there
/// (lost to damage a repair skipped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) lsn: u64,
    pub(crate) len: u32,
}

impl Loc {
    const MISSING: Loc = Loc { lsn: 0, len: 0 };

    fn present(self) -> bool {
        self.len > 0
    }
}

/// One task's events: the place of seq `first + i` at `i`.
struct TaskLocs {
    first: Seq,
    locs: VecDeque<Loc>,
}

impl TaskLocs {
    fn end(&self) -> u64 {
        self.first.get() + self.locs.len() as u64
    }

    /// Drops missing places at both ends, so `first` and the last are present.
    fn trim(&mut self) {
        while self.locs.front().is_some_and(|l| !l.present()) {
            self.locs.pop_front();
            self.first = self.first.next().unwrap_or(Seq::MAX);
        }
        while self.locs.back().is_some_and(|l| !l.present()) {
            self.locs.pop_back();
        }
    }
}

/// The places of every retained event of a data dir, and the segments they are read from.
pub(crate) struct EventTable {
    tasks: RwLock<HashMap<Box<str>, TaskLocs>>,
    files: Arc<SegmentFiles>,
}

impl EventTable {
    /// An empty table over the log's `files`.
    pub(crate) fn new(files: Arc<SegmentFiles>) -> EventTable {
        EventTable {
            tasks: RwLock::new(HashMap::new()),
            files,
        }
    }

    /// Records that event `seq` of a task is the record at `loc` (a later place of the same
    /// event replaces an earlier one: replay is idempotent).
    pub(crate) fn put(&self, task_id: &str, seq: Seq, loc: Loc) {
        let mut tasks = lock_write(&self.tasks);
        let Some(t) = tasks.get_mut(task_id) else {
            tasks.insert(
                task_id.into(),
                TaskLocs {
                    first: seq,
                    locs: VecDeque::from([loc]),
                },
            );
            return;
        };
        if t.locs.is_empty() {
            t.first = seq;
        }
        if seq < t.first {
            // Before the first: fill the gap (a replayed log may put events out of order only
            // after damage a repair skipped).
            let gap = t.first.distance_from(seq);
            for _ in 1..gap {
                t.locs.push_front(Loc::MISSING);
            }
            t.locs.push_front(loc);
            t.first = seq;
            return;
        }
        let i = seq.distance_from(t.first);
        let Ok(i) = usize::try_from(i) else { return };
        if i < t.locs.len() {
            t.locs[i] = loc;
            return;
        }
        while t.locs.len() < i {
            t.locs.push_back(Loc::MISSING);
        }
        t.locs.push_back(loc);
    }

    /// Forgets a task's events before `before`.
    pub(crate) fn truncate(&self, task_id: &str, before: Seq) {
        let mut tasks = lock_write(&self.tasks);
        let Some(t) = tasks.get_mut(task_id) else {
            return;
        };
        let n = usize::try_from(before.distance_from(t.first)).unwrap_or(usize::MAX);
        if before > t.first {
            let n = n.min(t.locs.len());
            t.locs.drain(..n);
            t.first = before;
        }
        t.trim();
        if t.locs.is_empty() {
            tasks.remove(task_id);
        }
    }

    /// Forgets every event of a task.
    pub(crate) fn remove(&self, task_id: &str) {
        lock_write(&self.tasks).remove(task_id);
    }

    /// Keeps only the tasks `keep` names, each from the floor it gives on (after recovery: the
    /// index's word on what is retained).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&str) -> Option<Seq>) {
        let mut tasks = lock_write(&self.tasks);
        tasks.retain(|id, t| {
            let Some(floor) = keep(id) else {
                return false;
            };
            if floor > t.first {
                let n = usize::try_from(floor.distance_from(t.first)).unwrap_or(usize::MAX);
                let n = n.min(t.locs.len());
                t.locs.drain(..n);
                t.first = floor;
            }
            t.trim();
            !t.locs.is_empty()
        });
    }

    /// The ids of the tasks with events.
    pub(crate) fn task_ids(&self) -> Vec<String> {
        lock_read(&self.tasks)
            .keys()
            .map(|k| k.to_string())
            .collect()
    }

    /// The places of a task's events with seqs in `from .. to` that are there, with their seqs.
    fn places(&self, task_id: &str, from: Seq, to: Seq) -> Vec<(Seq, Loc)> {
        self.places_at_most(task_id, from, to, usize::MAX)
    }

    /// The same, at most `max` of them.
    fn places_at_most(&self, task_id: &str, from: Seq, to: Seq, max: usize) -> Vec<(Seq, Loc)> {
        let tasks = lock_read(&self.tasks);
        let Some(t) = tasks.get(task_id) else {
            return Vec::new();
        };
        let lo = from.max(t.first);
        let hi = to.get().min(t.end());
        let mut out = Vec::new();
        let mut seq = lo;
        while seq.get() < hi && out.len() < max {
            let i = usize::try_from(seq.distance_from(t.first)).unwrap_or(usize::MAX);
            if let Some(loc) = t.locs.get(i).filter(|l| l.present()) {
                out.push((seq, *loc));
            }
            match seq.next() {
                Some(s) => seq = s,
                None => break,
            }
        }
        out
    }

    /// The record of event `seq` of a task, if it is there.
    pub(crate) fn event(&self, task_id: &str, seq: Seq) -> Result<Option<Bytes>, StoreError> {
        let Some(next) = seq.next() else {
            return Ok(None);
        };
        let Some((_, loc)) = self.places(task_id, seq, next).pop() else {
            return Ok(None);
        };
        self.files
            .read(loc.lsn, loc.len as usize)
            .map(|b| b.map(Bytes::from))
            .map_err(StoreError::Wal)
    }

    /// The records of up to `max` of a task's events with seqs in `from .. to` that are
    /// there, in seq order, read in runs (one `pread` for neighbours in a segment), and the seq
    /// to go on from (`None`: the range is done, or an event is gone from the log).
    pub(crate) fn events(
        &self,
        task_id: &str,
        from: Seq,
        to: Seq,
        max: usize,
    ) -> Result<(Vec<Bytes>, Option<Seq>), StoreError> {
        let places = self.places_at_most(task_id, from, to, max);
        let runs: Vec<(u64, u32)> = places.iter().map(|(_, l)| (l.lsn, l.len)).collect();
        let read = self.files.read_many(&runs).map_err(StoreError::Wal)?;
        let mut out = Vec::with_capacity(places.len());
        for bytes in read {
            match bytes {
                Some(b) => out.push(Bytes::from(b)),
                // Gone from the log (its segment deleted once retention dropped it): the run
                // stops, as at any hole; the reader re-checks the retained range.
                None => return Ok((out, None)),
            }
        }
        let go_on = match places.last() {
            Some((last, _)) if places.len() == max => last.next().filter(|n| *n < to),
            _ => None,
        };
        Ok((out, go_on))
    }

    /// The first and last seq of a task's events that are there, if any.
    pub(crate) fn bounds(&self, task_id: &str) -> Option<(Seq, Seq)> {
        let tasks = lock_read(&self.tasks);
        let t = tasks.get(task_id)?;
        let last = t.locs.len().checked_sub(1)?;
        Some((t.first, Seq::new(t.first.get() + last as u64)?))
    }

    /// The start LSNs of the segments that hold a retained event.
    pub(crate) fn segments_in_use(&self) -> BTreeSet<u64> {
        let starts = self.files.starts();
        let mut used = BTreeSet::new();
        let tasks = lock_read(&self.tasks);
        for t in tasks.values() {
            // A segment's range is `start .. next start`; a task's places mostly ascend, so
            // the segment found last is tried first.
            let mut current: Option<(u64, u64)> = None;
            for loc in t.locs.iter().filter(|l| l.present()) {
                if let Some((lo, hi)) = current {
                    if (lo..hi).contains(&loc.lsn) {
                        continue;
                    }
                }
                let i = starts.partition_point(|s| *s <= loc.lsn);
                let Some(at) = i.checked_sub(1) else { continue };
                let lo = starts[at];
                let hi = starts.get(i).copied().unwrap_or(u64::MAX);
                used.insert(lo);
                current = Some((lo, hi));
            }
        }
        used
    }

    /// Logs again, through `log` (which returns where it put them), the records of every
    /// event in the segments `from` (a status event's `Transition` as the plain `Event` record
    /// of its event, so a replay never moves a task back to an earlier state), `RELOCATE_CHUNK`
    /// at a time; after each chunk `sync` makes them readable and durable, and only then are
    /// the events placed at their copies (each only if it is still where it was read: one
    /// retention dropped meanwhile stays dropped). Returns how many moved. Once the copies are
    /// checkpointed, nothing retained is left in `from`, which can then be deleted.
    pub(crate) fn relocate(
        &self,
        from: &BTreeSet<u64>,
        mut log: impl FnMut(&[u8]) -> Result<u64, StoreError>,
        mut sync: impl FnMut() -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        const RELOCATE_CHUNK: usize = 4096;
        let starts = self.files.starts();
        let in_from = |lsn: u64| {
            let i = starts.partition_point(|s| *s <= lsn);
            i.checked_sub(1)
                .is_some_and(|at| from.contains(&starts[at]))
        };
        let moving: Vec<(String, Seq, Loc)> = {
            let tasks = lock_read(&self.tasks);
            let mut out = Vec::new();
            for (id, t) in tasks.iter() {
                for (i, loc) in t.locs.iter().enumerate() {
                    if loc.present() && in_from(loc.lsn) {
                        if let Some(seq) = Seq::new(t.first.get() + i as u64) {
                            out.push((id.to_string(), seq, *loc));
                        }
                    }
                }
            }
            // In log order, so the reads run through each segment once.
            out.sort_by_key(|(_, _, loc)| loc.lsn);
            out
        };
        let mut moved = 0;
        for chunk in moving.chunks(RELOCATE_CHUNK) {
            let runs: Vec<(u64, u32)> = chunk.iter().map(|(_, _, l)| (l.lsn, l.len)).collect();
            let read = self.files.read_many(&runs).map_err(StoreError::Wal)?;
            let mut placed = Vec::with_capacity(chunk.len());
            for ((id, seq, old), raw) in chunk.iter().zip(read) {
                // Gone (its segment deleted): retention dropped it.
                let Some(raw) = raw else { continue };
                let (rec, _) = record::decode(&raw).map_err(StoreError::Record)?;
                let Some(event) = rec.event() else { continue };
                let plain;
                let bytes = if matches!(rec, Record::Event(_)) {
                    &raw[..]
                } else {
                    plain = encode(&Record::Event(*event))?;
                    &plain[..]
                };
                let lsn = log(bytes)?;
                let new = Loc {
                    lsn,
                    len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
                };
                placed.push((id, *seq, *old, new));
            }
            sync()?;
            let mut tasks = lock_write(&self.tasks);
            for (id, seq, old, new) in placed {
                let Some(t) = tasks.get_mut(id.as_str()) else {
                    continue;
                };
                let Ok(i) = usize::try_from(seq.distance_from(t.first)) else {
                    continue;
                };
                if seq >= t.first && t.locs.get(i) == Some(&old) {
                    t.locs[i] = new;
                    moved += 1;
                }
            }
        }
        Ok(moved)
    }

    /// How many events the table places, for tests and reports.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock_read(&self.tasks)
            .values()
            .map(|t| t.locs.iter().filter(|l| l.present()).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: u64) -> Seq {
        Seq::new(n).unwrap()
    }

    fn loc(lsn: u64) -> Loc {
        Loc { lsn, len: 10 }
    }

    #[test]
    fn places_follow_puts_truncations_and_removals() {
        let t = EventTable::new(SegmentFiles::new());
        for i in 0..10 {
            t.put("a", seq(i), loc(i * 10));
        }
        assert_eq!(t.bounds("a"), Some((seq(0), seq(9))));
        // A replayed put of the same event is the same state.
        t.put("a", seq(3), loc(30));
        assert_eq!(t.len(), 10);
        t.truncate("a", seq(4));
        assert_eq!(t.bounds("a"), Some((seq(4), seq(9))));
        assert_eq!(t.places("a", seq(0), seq(6)).len(), 2);
        // A hole (a repair skipped damage) is missing, not an error.
        t.put("b", seq(0), loc(500));
        t.put("b", seq(3), loc(530));
        assert_eq!(t.places("b", seq(0), seq(10)).len(), 2);
        assert_eq!(t.bounds("b"), Some((seq(0), seq(3))));
        t.truncate("b", seq(1));
        assert_eq!(
            t.bounds("b"),
            Some((seq(3), seq(3))),
            "trimmed to what is there"
        );
        t.remove("a");
        assert_eq!(t.bounds("a"), None);
        t.retain(|id| (id == "b").then(|| seq(4)));
        assert_eq!(t.bounds("b"), None, "below the floor the index gives");
        assert_eq!(t.len(), 0);
    }
}
