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
//! When the host cannot read an event the pump handed out (retention dropped it in between, or
//! storage failed), it goes back to the table: [`StreamTable::missed`] decides how that stream
//! ends, by the same rule as the pump. The host never decides `events_gone` itself.
//!
//! The table stores no events and no bytes; it tracks, per stream, the next seq to send and
//! whatever the host needs to write that stream's frames (`M`, say the task id as sent and the
//! era), so that no second per-stream map exists beside it to drift out of step.
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

/// The next thing to write for some stream. `M` is the stream's host data, handed back when the
/// stream is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pump<T, M = ()> {
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
        /// The stream's host data.
        meta: M,
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
        /// The stream's host data.
        meta: M,
    },
}

/// How a stream ends whose event could not be read ([`StreamTable::missed`]). The stream has
/// been removed in every case: it cannot go on without a gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missed<T, M = ()> {
    /// Retention dropped the event after the pump handed it out: answer request `id` with
    /// `events_gone` (RS-07), never skip it.
    Gone {
        /// The `tasks/stream` request to answer.
        id: RequestId,
        /// Its task.
        task: T,
        /// The oldest retained seq, past the missed one.
        earliest: Seq,
        /// The stream's host data.
        meta: M,
    },
    /// The task no longer exists (expired): complete the stream, as the pump would
    /// (MCP-DIGEST A-09).
    Complete {
        /// The `tasks/stream` request to answer.
        id: RequestId,
        /// Its task.
        task: T,
        /// The stream's host data.
        meta: M,
    },
    /// The event is still retained but could not be read (a storage fault): answer an internal
    /// error. Not `events_gone`: the event exists, and a client told it is gone would resume
    /// from a seq that is not the oldest retained one.
    Unreadable {
        /// The `tasks/stream` request to answer.
        id: RequestId,
        /// Its task.
        task: T,
        /// The stream's host data.
        meta: M,
    },
}

#[derive(Clone, Debug)]
struct Entry<T, M> {
    id: RequestId,
    task: T,
    /// The next seq to deliver.
    next: Seq,
    /// The host's data for this stream.
    meta: M,
}

/// The active streams of one connection: at most `N` (and at most the configured limit).
///
/// `T` identifies a task (an index, a hash, a short id): anything `Copy + Eq`. `M` is what the
/// host keeps per stream to write its frames (`()` when it needs nothing); the table owns it
/// from [`open_with`](Self::open_with) until the stream is removed, and hands it back then.
#[derive(Clone, Debug)]
pub struct StreamTable<T, const N: usize, M = ()> {
    entries: heapless::Vec<Entry<T, M>, N>,
    limit: usize,
    /// Where the next [`poll`](Self::poll) starts, for round-robin fairness.
    turn: usize,
}

impl<T: Copy + Eq, const N: usize, M> StreamTable<T, N, M> {
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

    /// Opens the stream of request `id` for `task`, starting as [`crate::resume::decide`] said,
    /// with `meta` as its host data. A start with nothing to send completes at once, whatever
    /// the number of active streams (and `meta` is dropped); any other needs a free slot.
    ///
    /// # Errors
    /// [`OpenError`]; nothing is added then.
    pub fn open_with(
        &mut self,
        id: RequestId,
        task: T,
        start: Resume,
        meta: M,
    ) -> Result<Opened, OpenError> {
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
            .push(Entry {
                id,
                task,
                next,
                meta,
            })
            .map_err(|_| OpenError::StreamLimit)?;
        Ok(Opened::Streaming)
    }

    /// The host data of `task`'s active stream.
    #[must_use]
    pub fn meta(&self, task: T) -> Option<&M> {
        self.entries
            .iter()
            .find(|e| e.task == task)
            .map(|e| &e.meta)
    }

    /// The request ids of the active streams, in table order.
    pub fn ids(&self) -> impl Iterator<Item = &RequestId> {
        self.entries.iter().map(|e| &e.id)
    }

    /// Cancels the stream of request `id` (TS-08): it is removed and nothing more is produced
    /// for it, not even a response (DX-04). The task itself is untouched. Returns its task, or
    /// `None` if no active stream has that id (unknown ids are ignored, MCP-DIGEST a.6).
    #[must_use = "`None` means `id` named no stream: it may name another pending request"]
    pub fn cancel(&mut self, id: &RequestId) -> Option<T> {
        let i = self.entries.iter().position(|e| &e.id == id)?;
        Some(self.remove(i)?.task)
    }

    /// The host could not read event `seq` of `task`, which the pump handed out: retention
    /// dropped it in between, or storage failed. The stream is removed, and the answer is
    /// decided by the pump's rule against `now`, the task's progress read after the failed
    /// read: `events_gone` if the event is below what is retained (RS-07), complete if the
    /// task no longer exists, unreadable if the event is still retained. `None` if `task` has
    /// no active stream.
    #[must_use = "the stream was removed; its request is owed an answer"]
    pub fn missed(&mut self, task: T, seq: Seq, now: Option<Progress>) -> Option<Missed<T, M>> {
        let i = self.entries.iter().position(|e| e.task == task)?;
        let Entry { id, meta, .. } = self.remove(i)?;
        Some(match now {
            None => Missed::Complete { id, task, meta },
            Some(p) if seq < p.retained.earliest() => Missed::Gone {
                id,
                task,
                earliest: p.retained.earliest(),
                meta,
            },
            Some(_) => Missed::Unreadable { id, task, meta },
        })
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
    pub fn poll(&mut self, mut progress: impl FnMut(T) -> Option<Progress>) -> Option<Pump<T, M>> {
        let n = self.entries.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let entry = self.entries.get(i)?;
            let task = entry.task;
            let next = entry.next;
            let Some(p) = progress(task) else {
                let Entry { id, meta, .. } = self.remove(i)?;
                return Some(Pump::Complete { id, task, meta });
            };
            if next < p.retained.earliest() {
                let Entry { id, meta, .. } = self.remove(i)?;
                return Some(Pump::Gone {
                    id,
                    task,
                    earliest: p.retained.earliest(),
                    meta,
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
                let Entry { id, meta, .. } = self.remove(i)?;
                return Some(Pump::Complete { id, task, meta });
            }
        }
        None
    }

    /// Removes entry `i`, keeping the order of the others (the round-robin turn depends on it).
    /// By adjacent swaps rather than `Vec::remove`, whose overlapping move links the general
    /// `memmove`, 1.5 KiB of flash on a microcontroller; there are at most `N` entries.
    fn remove(&mut self, i: usize) -> Option<Entry<T, M>> {
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

impl<T: Copy + Eq, const N: usize> StreamTable<T, N> {
    /// [`open_with`](Self::open_with) for a table that keeps no host data.
    ///
    /// # Errors
    /// [`OpenError`]; nothing is added then.
    pub fn open(&mut self, id: RequestId, task: T, start: Resume) -> Result<Opened, OpenError> {
        self.open_with(id, task, start, ())
    }
}

#[cfg(test)]
mod tests;
