//! The PostgreSQL replica's cache of committed events (`--store-cache-mb`), consulted before
//! the database by [`read_raw_from`](crate::TaskStore::read_raw_from).
//!
//! What it holds and why that is safe:
//!
//! - **Only committed events.** It is filled by this replica's writer after a batch's
//!   statement committed, and only with the events of the tasks whose row the statement moved
//!   (a batch the fence refused, a deposed writer's, never enters), by a creation and an end
//!   after their transaction committed, and by reads of rows the database returned. A
//!   task's events are immutable once committed: `(task_id, seq)` names one event, ever.
//! - **Never below the floor.** Each task's entry keeps the highest floor this replica has
//!   seen for it (a lookup of the task's row, this replica's own batches and ends, its own
//!   retention sweep) and holds no event below it. The server looks a task up, and decides
//!   `events_gone` and `earliestSeq` from the database's floor, before it reads the task's
//!   events, so a read never hands out an event below the floor the decision used. A sweep on
//!   another replica that moved floors says so in its notification, and every replica then
//!   drops its whole cache.
//! - **Bounded.** By bytes (each event's type and payload, plus [`OVERHEAD`]): past the
//!   budget whole tasks go, least recently used first, and a task larger than the budget on
//!   its own keeps its newest events.
//!
//! An entry is one run of consecutive seqs; events that do not touch it replace it (the
//! newer run wins), so a cache miss costs one read of the database, as without a cache.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use taskstream_core::{Millis, Seq};

use super::raw::RawEvent;
use super::sync::lock;

/// Bytes counted per cached event beyond its type and payload (its place in the entry and
/// the allocation's own).
pub(crate) const OVERHEAD: usize = 64;

/// One committed event, type then payload in one shared buffer.
pub(crate) struct Cached {
    /// When it was appended.
    pub(crate) at: Millis,
    /// Type then payload.
    pub(crate) bytes: bytes::Bytes,
    /// How many of `bytes` are the type.
    pub(crate) type_len: usize,
}

impl Cached {
    /// An event from its type and compact payload.
    pub(crate) fn new(at: Millis, event_type: &str, payload: &[u8]) -> Cached {
        let mut b = Vec::with_capacity(event_type.len() + payload.len());
        b.extend_from_slice(event_type.as_bytes());
        b.extend_from_slice(payload);
        Cached {
            at,
            bytes: bytes::Bytes::from(b),
            type_len: event_type.len(),
        }
    }

    fn cost(&self) -> usize {
        self.bytes.len() + OVERHEAD
    }
}

/// One task's cached run of consecutive events.
struct Entry {
    /// The highest floor seen for the task: no event below it is held.
    floor: i64,
    /// The seq of `events[0]`.
    first: i64,
    events: VecDeque<Cached>,
    /// What `events` cost against the budget.
    bytes: usize,
    /// When it was last used (the cache's clock), for eviction.
    used: u64,
}

impl Entry {
    fn end(&self) -> i64 {
        self.first + i64::try_from(self.events.len()).unwrap_or(i64::MAX)
    }

    /// Drops the events below `floor`; returns the bytes freed.
    fn raise_floor(&mut self, floor: i64) -> usize {
        self.floor = self.floor.max(floor);
        let mut freed = 0;
        while self.first < self.floor {
            let Some(e) = self.events.pop_front() else {
                break;
            };
            freed += e.cost();
            self.first += 1;
        }
        if self.events.is_empty() {
            self.first = self.first.max(self.floor);
        }
        self.bytes -= freed;
        freed
    }
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    bytes: usize,
    clock: u64,
}

/// The cache (see the module docs). A budget of 0 turns it off.
pub(crate) struct EventCache {
    budget: usize,
    inner: Mutex<Inner>,
}

/// What the cache counts, for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Bytes held, as counted against the budget.
    pub bytes: usize,
    /// Tasks with events held.
    pub tasks: usize,
    /// The budget in bytes.
    pub budget: usize,
}

impl EventCache {
    /// A cache of at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> EventCache {
        EventCache {
            budget,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Whether it holds anything at all.
    pub(crate) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// What it holds now.
    pub(crate) fn usage(&self) -> CacheUsage {
        let inner = lock(&self.inner);
        CacheUsage {
            bytes: inner.bytes,
            tasks: inner.tasks.len(),
            budget: self.budget,
        }
    }

    /// Adds committed events of `task_id`, consecutive from seq `from`. Those below the
    /// task's known floor, and those below `floor`, are not kept (the floor is raised to it).
    pub(crate) fn insert(
        &self,
        task_id: &str,
        floor: i64,
        from: i64,
        events: impl IntoIterator<Item = Cached>,
    ) {
        if !self.enabled() {
            return;
        }
        let mut inner = lock(&self.inner);
        inner.clock += 1;
        let now = inner.clock;
        let Inner { tasks, bytes, .. } = &mut *inner;
        let entry = tasks.entry(task_id.to_owned()).or_insert_with(|| Entry {
            floor,
            first: from,
            events: VecDeque::new(),
            bytes: 0,
            used: now,
        });
        entry.used = now;
        *bytes -= entry.raise_floor(floor);
        let floor = entry.floor;
        let run: Vec<(i64, Cached)> = (from..)
            .zip(events)
            .filter(|(seq, _)| *seq >= floor)
            .collect();
        let (Some(lo), Some(hi)) = (run.first().map(|r| r.0), run.last().map(|r| r.0 + 1)) else {
            return;
        };
        if entry.events.is_empty() || hi < entry.first || lo > entry.end() {
            // Not touching the run held: the new one replaces it.
            *bytes -= entry.bytes;
            entry.events.clear();
            entry.bytes = 0;
            entry.first = lo;
        }
        let (first, end) = (entry.first, entry.end());
        let mut head = Vec::new();
        for (s, e) in run {
            if s < first {
                head.push(e);
            } else if s >= end {
                entry.bytes += e.cost();
                *bytes += e.cost();
                entry.events.push_back(e);
            }
        }
        for e in head.into_iter().rev() {
            entry.bytes += e.cost();
            *bytes += e.cost();
            entry.events.push_front(e);
            entry.first -= 1;
        }
        self.evict(&mut inner, task_id);
    }

    /// Frees room down to the budget: least recently used tasks other than `keep` first,
    /// then `keep`'s oldest events.
    fn evict(&self, inner: &mut Inner, keep: &str) {
        while inner.bytes > self.budget {
            let victim = inner
                .tasks
                .iter()
                .filter(|(id, _)| id.as_str() != keep)
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| id.clone());
            match victim {
                Some(id) => {
                    if let Some(e) = inner.tasks.remove(&id) {
                        inner.bytes -= e.bytes;
                    }
                }
                None => {
                    let Some(e) = inner.tasks.get_mut(keep) else {
                        return;
                    };
                    let Some(old) = e.events.pop_front() else {
                        return;
                    };
                    e.first += 1;
                    e.bytes -= old.cost();
                    inner.bytes -= old.cost();
                }
            }
        }
    }

    /// Raises the task's known floor to `floor`, dropping the events below it.
    pub(crate) fn raise_floor(&self, task_id: &str, floor: i64) {
        if !self.enabled() {
            return;
        }
        let mut inner = lock(&self.inner);
        let Inner { tasks, bytes, .. } = &mut *inner;
        if let Some(e) = tasks.get_mut(task_id) {
            *bytes -= e.raise_floor(floor);
        }
    }

    /// Drops everything held for the task.
    pub(crate) fn forget(&self, task_id: &str) {
        if !self.enabled() {
            return;
        }
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.tasks.remove(task_id) {
            inner.bytes -= e.bytes;
        }
    }

    /// Drops everything.
    pub(crate) fn clear(&self) {
        let mut inner = lock(&self.inner);
        inner.tasks.clear();
        inner.bytes = 0;
    }

    /// Up to `max` events of the task from seq `from`, if the cache holds `from` (none if it
    /// does not: the caller reads the database).
    pub(crate) fn read(&self, task_id: &str, from: Seq, max: usize, out: &mut Vec<RawEvent>) {
        if !self.enabled() || max == 0 {
            return;
        }
        let Ok(from_i) = i64::try_from(from.get()) else {
            return;
        };
        let mut inner = lock(&self.inner);
        inner.clock += 1;
        let now = inner.clock;
        let Some(e) = inner.tasks.get_mut(task_id) else {
            return;
        };
        if from_i < e.first || from_i < e.floor || from_i >= e.end() {
            return;
        }
        e.used = now;
        let skip = usize::try_from(from_i - e.first).unwrap_or(usize::MAX);
        let mut seq = from;
        for c in e.events.iter().skip(skip).take(max) {
            out.push(RawEvent::shared(seq, c.at, c.bytes.clone(), c.type_len));
            match seq.next() {
                Some(s) => seq = s,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(i: i64) -> Cached {
        Cached::new(Millis(1), "dev.t", format!("{{\"i\":{i:03}}}").as_bytes())
    }

    fn seqs(c: &EventCache, task: &str, from: u64, max: usize) -> Vec<u64> {
        let mut out = Vec::new();
        c.read(task, Seq::new(from).unwrap(), max, &mut out);
        out.iter().map(|e| e.seq().get()).collect()
    }

    #[test]
    fn serves_consecutive_runs_and_never_below_the_floor() {
        let c = EventCache::new(1 << 20);
        c.insert("t", 0, 0, (0..10).map(ev));
        assert_eq!(seqs(&c, "t", 3, 4), vec![3, 4, 5, 6]);
        c.insert("t", 0, 10, (10..12).map(ev));
        assert_eq!(seqs(&c, "t", 9, 10), vec![9, 10, 11]);
        assert_eq!(seqs(&c, "t", 12, 10), Vec::<u64>::new(), "not held yet");
        c.raise_floor("t", 5);
        assert_eq!(seqs(&c, "t", 4, 10), Vec::<u64>::new(), "below the floor");
        assert_eq!(seqs(&c, "t", 5, 2), vec![5, 6]);
        // Events below the floor that a read brings are not kept.
        c.insert("t", 0, 0, (0..5).map(ev));
        assert_eq!(seqs(&c, "t", 0, 10), Vec::<u64>::new());
        assert_eq!(seqs(&c, "t", 5, 1), vec![5]);
        // A later floor in an insert drops what is below it.
        c.insert("t", 8, 12, (12..13).map(ev));
        assert_eq!(seqs(&c, "t", 7, 10), Vec::<u64>::new());
        assert_eq!(seqs(&c, "t", 8, 10), vec![8, 9, 10, 11, 12]);
        let mut out = Vec::new();
        c.read("t", Seq::new(12).unwrap(), 1, &mut out);
        assert_eq!(out[0].payload(), br#"{"i":012}"#);
        assert_eq!(out[0].event_type(), "dev.t");
    }

    #[test]
    fn an_earlier_touching_run_is_prepended_and_a_disjoint_one_replaces() {
        let c = EventCache::new(1 << 20);
        c.insert("t", 0, 10, (10..20).map(ev));
        c.insert("t", 0, 5, (5..12).map(ev));
        assert_eq!(seqs(&c, "t", 5, 100), (5..20).collect::<Vec<u64>>());
        c.insert("t", 0, 30, (30..32).map(ev));
        assert_eq!(seqs(&c, "t", 5, 100), Vec::<u64>::new());
        assert_eq!(seqs(&c, "t", 30, 100), vec![30, 31]);
        c.forget("t");
        assert_eq!(seqs(&c, "t", 30, 100), Vec::<u64>::new());
        assert_eq!(c.usage().bytes, 0);
    }

    #[test]
    fn stays_within_its_budget() {
        let one = ev(0).cost();
        let c = EventCache::new(one * 10);
        c.insert("a", 0, 0, (0..6).map(ev));
        c.insert("b", 0, 0, (0..6).map(ev));
        // "a" was least recently used: it went whole.
        assert!(c.usage().bytes <= one * 10);
        assert_eq!(seqs(&c, "a", 0, 10), Vec::<u64>::new());
        assert_eq!(seqs(&c, "b", 0, 10).len(), 6);
        // One task past the budget keeps its newest events.
        c.insert("b", 0, 6, (6..30).map(ev));
        assert!(c.usage().bytes <= one * 10);
        assert_eq!(seqs(&c, "b", 20, 100), (20..30).collect::<Vec<u64>>());
        let off = EventCache::new(0);
        off.insert("a", 0, 0, (0..6).map(ev));
        assert_eq!(off.usage().bytes, 0);
        assert_eq!(seqs(&off, "a", 0, 10), Vec::<u64>::new());
    }
}
