//! Which open streams follow which tasks, and how far each has been delivered: what the status
//! page (`GET /status.json`) shows per task and what `/metrics` turns into the per-stream lag
//! histogram, `taskstream_stream_lag_events`.
//!
//! Each open `tasks/stream` holds a [`Follower`] (inside its [`OpenStream`](crate::metrics::OpenStream)),
//! registered here for as long as it lives. The delivery thread records each frame it writes
//! with a relaxed atomic store and load ([`Follower::delivered`]; the load ends the stream's replay span, [`crate::otel`], when it has one); everything else is read only when
//! the page or a scrape asks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One open stream as the registry sees it.
#[derive(Debug)]
struct Entry {
    /// The task id as the client sent it.
    task_id: String,
    /// The next seq this stream will deliver (its start, then one past each frame written).
    next: AtomicU64,
    /// The seq after the stream's replay while its replay span is open (0: none open).
    replay_end: AtomicU64,
    /// The stream's trace spans: the stream's ends when the entry does, the replay's when
    /// its last event is delivered.
    spans: Mutex<crate::otel::StreamSpans>,
}

impl Entry {
    /// The frame carrying `seq` was written; the replay's span ends with its last event.
    fn delivered(&self, seq: u64) {
        self.next.store(seq + 1, Ordering::Relaxed);
        let end = self.replay_end.load(Ordering::Relaxed);
        if end != 0 && seq + 1 >= end {
            self.replay_end.store(0, Ordering::Relaxed);
            self.spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replay = None;
        }
    }
}

/// The open streams of the process, by a registration number.
struct Registry {
    next_id: u64,
    streams: HashMap<u64, Arc<Entry>>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let registry = guard.get_or_insert_with(|| Registry {
        next_id: 0,
        streams: HashMap::new(),
    });
    f(registry)
}

/// An open stream's place in the registry; removed when dropped.
#[derive(Debug)]
pub(crate) struct Follower {
    id: u64,
    entry: Arc<Entry>,
}

impl Follower {
    /// Registers a stream of `task_id` whose first frame will carry seq `start`.
    pub(crate) fn new(task_id: &str, start: u64, spans: crate::otel::StreamSpans) -> Follower {
        let replay_end = spans.replay.as_ref().map_or(0, |(_, end)| *end);
        let entry = Arc::new(Entry {
            task_id: task_id.to_owned(),
            next: AtomicU64::new(start),
            replay_end: AtomicU64::new(replay_end),
            spans: Mutex::new(spans),
        });
        let id = with_registry(|r| {
            let id = r.next_id;
            r.next_id += 1;
            r.streams.insert(id, Arc::clone(&entry));
            id
        });
        Follower { id, entry }
    }

    /// The frame carrying `seq` was written to the client.
    pub(crate) fn delivered(&self, seq: u64) {
        self.entry.delivered(seq);
    }

    /// A handle that records deliveries of this stream from wherever its frames are written.
    pub(crate) fn delivery(&self) -> Delivery {
        Delivery(Arc::clone(&self.entry))
    }
}

/// Records a stream's deliveries ([`Follower::delivery`]); registers nothing of its own.
#[derive(Debug)]
pub(crate) struct Delivery(Arc<Entry>);

impl Delivery {
    /// The frame carrying `seq` was written to the client.
    pub(crate) fn delivered(&self, seq: u64) {
        self.0.delivered(seq);
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        with_registry(|r| r.streams.remove(&self.id));
    }
}

/// Every open stream now: (task id, the next seq it will deliver).
pub(crate) fn snapshot() -> Vec<(String, u64)> {
    with_registry(|r| {
        r.streams
            .values()
            .map(|e| (e.task_id.clone(), e.next.load(Ordering::Relaxed)))
            .collect()
    })
}

/// A stream's lag: events the task has (its next seq `task_next`) that the stream has not
/// delivered yet (it delivers `stream_next` next).
pub(crate) fn lag(task_next: u64, stream_next: u64) -> u64 {
    task_next.saturating_sub(stream_next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_listed_while_it_lives_with_what_it_delivered() {
        let task = "follow-test-task-a";
        let f = Follower::new(task, 3, crate::otel::StreamSpans::none());
        let mine = |s: Vec<(String, u64)>| {
            s.into_iter()
                .filter(|(t, _)| t == task)
                .map(|(_, n)| n)
                .collect::<Vec<_>>()
        };
        assert_eq!(mine(snapshot()), vec![3]);
        f.delivered(3);
        f.delivered(4);
        assert_eq!(mine(snapshot()), vec![5]);
        drop(f);
        assert!(mine(snapshot()).is_empty());
    }

    #[test]
    fn lag_is_what_the_task_has_beyond_the_stream() {
        assert_eq!(lag(10, 4), 6);
        assert_eq!(lag(10, 10), 0);
        assert_eq!(lag(3, 5), 0);
    }
}
