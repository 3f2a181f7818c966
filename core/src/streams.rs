//! The active `tasks/stream` requests of one connection, and the pump that feeds them.
//!
//! [`StreamTable`] enforces the per-connection rules of SEP-2694: at most one active stream per
//! task (TS-05; a second is refused, TS-06), a stream limit (SE-07), cancellation by the id of
//! the `tasks/stream` request that stops delivery without touching the task (TS-08, DX-04).
//! [`StreamTable::poll`] is the pump: given each task's retained range and lifecycle it says
//! what to write next — an event, in seq order with no skip (EV-04, RS-07, DX-07), the empty
//! result once a terminal task is caught up (TS-03), or `events_gone` when retention dropped an
//! event before this stream could deliver it (a slow reader is never silently skipped).
//!
//! The table stores no events and no bytes; it only tracks, per stream, the next seq to send.
//! It does not decide where a stream starts: that is [`crate::resume::decide`].

use core::fmt;

use crate::id::RequestId;
use crate::resume::{Lifecycle, Resume, Retained};
use crate::seq::Seq;

/// Why a stream could not be opened. All are answered as invalid params (-32602).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The task already has an active stream on this connection (TS-05, TS-06).
    StreamActive,
    /// The connection has as many active streams as its limit allows (SE-07).
    StreamLimit,
    /// An active stream already uses this request id; ids must not be reused (JSON-RPC).
    DuplicateId,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenError::StreamActive => "the task already has an active stream on this connection",
            OpenError::StreamLimit => "too many active streams on this connection",
            OpenError::DuplicateId => "an active request already uses this id",
        })
    }
}

impl core::error::Error for OpenError {}

/// What [`StreamTable::open`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The stream is active; [`StreamTable::poll`] will feed it.
    Streaming,
    /// Nothing to send and nothing will come (RS-04, RS-06): nothing was added; answer the
    /// empty result now.
    Complete,
}

/// A task's state as the pump needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The seqs retained now.
    pub retained: Retained,
    /// Whether more events may come.
    pub lifecycle: Lifecycle,
}

/// The next thing to write for some stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pump<T> {
    /// Send event `seq` of `task` as `notifications/tasks/event`; the stream's cursor has moved
    /// past it.
    Event {
        /// The task.
        task: T,
        /// The event to send.
        seq: Seq,
    },
    /// The terminal task is caught up: the stream has been removed (it is no longer active),
    /// answer request `id` with the empty result.
    Complete {
        /// The `tasks/stream` request to answer.
        id: RequestId,
        /// Its task.
        task: T,
    },
    /// The next event this stream needs was dropped by retention before it could be delivered:
    /// the stream has been removed; answer request `id` with `events_gone` (RS-07).
    Gone {
        /// The `tasks/stream` request to answer.
        id: RequestId,
        /// Its task.
        task: T,
        /// The oldest retained seq.
        earliest: Seq,
    },
}

#[derive(Clone, Debug)]
struct Entry<T> {
    id: RequestId,
    task: T,
    /// The next seq to deliver.
    next: Seq,
}

/// The active streams of one connection: at most `N` (and at most the configured limit).
///
/// `T` identifies a task (an index, a hash, a short id): anything `Copy + Eq`.
#[derive(Clone, Debug)]
pub struct StreamTable<T, const N: usize> {
    entries: heapless::Vec<Entry<T>, N>,
    limit: usize,
    /// Where the next [`poll`](Self::poll) starts, for round-robin fairness.
    turn: usize,
}

impl<T: Copy + Eq, const N: usize> StreamTable<T, N> {
    /// An empty table that admits at most `limit` active streams (clamped to `N`).
    #[must_use]
    pub const fn new(limit: usize) -> Self {
        const { assert!(N > 0, "a stream table needs room for one stream") };
        Self {
            entries: heapless::Vec::new(),
            limit: if limit < N { limit } else { N },
            turn: 0,
        }
    }

    /// The number of active streams.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no stream is active.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The stream limit in force.
    #[must_use]
    pub const fn limit(&self) -> usize {
        self.limit
    }

    /// Whether `task` has an active stream.
    #[must_use]
    pub fn is_streaming(&self, task: T) -> bool {
        self.entries.iter().any(|e| e.task == task)
    }

    /// Whether `task` may get a stream: it has none active. Check this before deciding where
    /// the stream starts, so that a second stream is refused as such (TS-06) whatever its
    /// cursor. The limit of active streams is not checked here: a request answered at once
    /// (RS-04, RS-06) needs no slot, so only [`StreamTable::open`] knows whether it applies.
    ///
    /// # Errors
    /// [`OpenError::StreamActive`].
    pub fn check_open(&self, task: T) -> Result<(), OpenError> {
        if self.is_streaming(task) {
            Err(OpenError::StreamActive)
        } else {
            Ok(())
        }
    }

    /// Opens the stream of request `id` for `task`, starting as [`crate::resume::decide`] said.
    /// A start with nothing to send completes at once, whatever the number of active streams;
    /// any other needs a free slot.
    ///
    /// # Errors
    /// [`OpenError`]; nothing is added then.
    pub fn open(&mut self, id: RequestId, task: T, start: Resume) -> Result<Opened, OpenError> {
        self.check_open(task)?;
        if self.entries.iter().any(|e| e.id == id) {
            return Err(OpenError::DuplicateId);
        }
        let Some(next) = start.first_seq() else {
            return Ok(Opened::Complete);
        };
        if self.entries.len() >= self.limit {
            return Err(OpenError::StreamLimit);
        }
        self.entries
            .push(Entry { id, task, next })
            .map_err(|_| OpenError::StreamLimit)?;
        Ok(Opened::Streaming)
    }

    /// Cancels the stream of request `id` (TS-08): it is removed and nothing more is produced
    /// for it, not even a response (DX-04). The task itself is untouched. Returns its task, or
    /// `None` if no active stream has that id (unknown ids are ignored, MCP-DIGEST a.6).
    pub fn cancel(&mut self, id: &RequestId) -> Option<T> {
        let i = self.entries.iter().position(|e| &e.id == id)?;
        Some(self.remove(i)?.task)
    }

    /// The next seq the stream of request `id` will deliver.
    #[must_use]
    pub fn cursor(&self, id: &RequestId) -> Option<Seq> {
        self.entries.iter().find(|e| &e.id == id).map(|e| e.next)
    }

    /// The pump: finds, round-robin from where the last call stopped, the next stream with
    /// something to write and returns it; `None` when every stream is waiting for live events.
    ///
    /// `progress(task)` reports a task's retained range and lifecycle now; `None` means the task
    /// no longer exists (expired), and its streams complete (MCP-DIGEST A-09).
    #[must_use = "a pump that is dropped loses the frame it moved the cursor past"]
    pub fn poll(&mut self, mut progress: impl FnMut(T) -> Option<Progress>) -> Option<Pump<T>> {
        let n = self.entries.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let entry = self.entries.get(i)?;
            let task = entry.task;
            let next = entry.next;
            let Some(p) = progress(task) else {
                let id = self.remove(i)?.id;
                return Some(Pump::Complete { id, task });
            };
            if next < p.retained.earliest() {
                let id = self.remove(i)?.id;
                return Some(Pump::Gone {
                    id,
                    task,
                    earliest: p.retained.earliest(),
                });
            }
            if next < p.retained.next() {
                if let Some(e) = self.entries.get_mut(i) {
                    // `next < retained.next() <= Seq::MAX`, so there is a following seq.
                    e.next = next.next().unwrap_or(Seq::MAX);
                }
                self.turn = (i + 1) % n;
                return Some(Pump::Event { task, seq: next });
            }
            if p.lifecycle == Lifecycle::Terminal {
                let id = self.remove(i)?.id;
                return Some(Pump::Complete { id, task });
            }
        }
        None
    }

    /// Removes entry `i`, keeping the order of the others (the round-robin turn depends on it).
    /// By adjacent swaps rather than `Vec::remove`, whose overlapping move links the general
    /// `memmove`, 1.5 KiB of flash on a microcontroller; there are at most `N` entries.
    fn remove(&mut self, i: usize) -> Option<Entry<T>> {
        if i >= self.entries.len() {
            return None;
        }
        for j in i + 1..self.entries.len() {
            self.entries.swap(j - 1, j);
        }
        let e = self.entries.pop()?;
        if self.turn > i {
            self.turn -= 1;
        }
        if self.turn >= self.entries.len() {
            self.turn = 0;
        }
        Some(e)
    }
}

#[cfg(test)]
mod tests;
