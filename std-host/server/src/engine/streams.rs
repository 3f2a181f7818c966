//! The streams of one connection, and one stream delivered on its own (an HTTP response):
//! per-stream state, as the core's [`StreamTable`] keeps it, and the lines a stream ends with.
//! Nothing here knows the connection; [`super::stream`] admits streams into it and
//! [`super::delivery`] pumps them.
//!
//! **Architecture invariant**: the table (which carries each stream's metadata, so no second
//! map can drift from it) and every write of a stream frame happen under one lock (the
//! connection's [`Streams`]), so after `notifications/cancelled` is handled no frame of that
//! stream is written (DX-04), and a stream is removed from the table before its final result
//! is written (a client that reopens on reading it is never refused).

use std::collections::VecDeque;

use taskstream_core::rpc;
use taskstream_core::streams::{Missed, OpenError, Progress, Pump};
use taskstream_core::{RequestId, Seq, StreamTable};

use crate::config::MAX_STREAMS_CAPACITY;
use crate::log::log;
use crate::wire::task::{lifecycle, UNREADABLE};
use crate::wire::{self, ServerError};
use taskstream_store::{RawEvent, TaskStore};

/// The core's table of a connection, allocated on its first change: a connection that never
/// opens a stream (most HTTP requests) costs no table.
pub(crate) struct LazyTable {
    pub(crate) limit: usize,
    pub(crate) table: Option<Box<ConnTable>>,
}

/// The core's table as a connection holds it: keyed by task id as a `u128`, with each stream's
/// [`StreamMeta`].
pub(crate) type ConnTable = StreamTable<u128, MAX_STREAMS_CAPACITY, StreamMeta>;

/// What an unallocated table reads as: empty, so every check on it passes as on any empty
/// table with a limit of at least one.
static EMPTY: ConnTable = StreamTable::new(MAX_STREAMS_CAPACITY);

impl std::ops::Deref for LazyTable {
    type Target = ConnTable;
    fn deref(&self) -> &Self::Target {
        self.table.as_deref().unwrap_or(&EMPTY)
    }
}

impl std::ops::DerefMut for LazyTable {
    fn deref_mut(&mut self) -> &mut Self::Target {
        let limit = self.limit;
        self.table
            .get_or_insert_with(|| Box::new(StreamTable::new(limit)))
    }
}

/// The active streams of the connection.
pub(crate) struct Streams {
    /// The core's table, keyed by task id as a `u128`, carrying each stream's metadata.
    pub(crate) table: LazyTable,
}

/// What the host needs to write a stream's frames; the table keeps it with the stream.
#[derive(Debug)]
pub(crate) struct StreamMeta {
    /// Its era, for the shape of the final result (DX-01).
    pub(crate) era: rpc::Era,
    /// The task id as sent.
    pub(crate) task_id: String,
    /// Counts the stream as open, and follows its delivery, while the table holds it.
    pub(crate) open: crate::metrics::OpenStream,
}

impl Streams {
    /// An empty set admitting `limit` streams.
    pub(crate) fn new(limit: usize) -> Streams {
        Streams {
            table: LazyTable {
                limit: limit.max(1),
                table: None,
            },
        }
    }

    /// Cancels the stream of request `id` (TS-08): no further frame, no response (DX-04). The
    /// task is untouched. Returns its task, if there was one.
    pub(crate) fn cancel(&mut self, id: &RequestId) -> Option<u128> {
        self.table.table.as_mut()?.cancel(id)
    }

    /// Whether an active stream was opened by request `id`.
    pub(crate) fn uses_id(&self, id: &RequestId) -> bool {
        self.table.cursor(id).is_some()
    }
}

/// One `tasks/stream` delivered outside the connection's delivery thread (an HTTP response):
/// its own one-entry stream table, pumped by [`poll`](Self::poll) on a blocking thread each
/// time its task's wake-up fires. The rules are the core's, as on stdio: where it starts is
/// [`resume::decide`], what comes next is [`StreamTable::poll`].
pub(crate) struct Detached {
    /// Its own one-entry table.
    pub(crate) table: StreamTable<u128, 1>,
    /// The task, as a key and as sent.
    pub(crate) key: u128,
    pub(crate) task_id: String,
    /// The `tasks/stream` request.
    pub(crate) id: RequestId,
    /// Its era, for the shape of the final result.
    pub(crate) era: rpc::Era,
    /// Counts the stream as open while it lives, unless the connection's table holds it.
    pub(crate) _open: Option<crate::metrics::OpenStream>,
    /// Records each frame handed out, for the stream's lag.
    pub(crate) delivery: crate::follow::Delivery,
}

/// What a [`Detached`] stream writes next.
pub(crate) enum Frame {
    /// A `notifications/tasks/event` line for event `seq`.
    Event {
        /// The event's seq.
        seq: Seq,
        /// The JSON-RPC notification.
        line: Vec<u8>,
    },
    /// The stream's last message: its response (the empty result, or `events_gone`).
    End(Vec<u8>),
}

/// How a detached `tasks/stream` begins.
pub(crate) enum DetachedStart {
    /// Nothing to send and nothing will come: this is the whole answer (RS-04, RS-06).
    Complete(Vec<u8>),
    /// Events follow.
    Streaming(Box<Detached>),
}

impl Detached {
    /// Up to `max` frames, in order; empty while the stream waits for live events. After an
    /// [`Frame::End`] the stream is over and polls return nothing.
    pub(crate) fn poll(&mut self, store: &dyn TaskStore, max: usize) -> Vec<Frame> {
        let mut frames = Vec::new();
        let progress = match store.lookup(&self.task_id) {
            Ok(view) => view.map(|v| Progress {
                retained: v.retained,
                lifecycle: lifecycle(&v),
            }),
            // Unreadable now: wait as if nothing new had come (polled again), never "gone".
            Err(_) => Some(crate::wire::task::UNREADABLE),
        };
        let mut ahead: VecDeque<RawEvent> = VecDeque::new();
        let mut buf = Vec::new();
        while frames.len() < max {
            let Some(step) = self.table.poll(|_| progress) else {
                break;
            };
            match step {
                Pump::Event { seq, .. } => {
                    while ahead.front().is_some_and(|e| e.seq() < seq) {
                        ahead.pop_front();
                    }
                    if ahead.front().is_none_or(|e| e.seq() != seq) {
                        ahead.clear();
                        let want = max - frames.len();
                        if let Err(e) = store
                            .read_raw_from(&self.task_id, seq, want, &mut |e| ahead.push_back(e))
                        {
                            log!(Error, "reading events of task {}: {e}", self.task_id);
                        }
                    }
                    if let Some(ev) = ahead.pop_front().filter(|e| e.seq() == seq) {
                        let line = wire::event_line(
                            &mut buf,
                            &self.task_id,
                            seq,
                            ev.event_type(),
                            ev.payload(),
                        )
                        .to_vec();
                        self.delivery.delivered(seq.get());
                        frames.push(Frame::Event { seq, line });
                        continue;
                    }
                    // The read missed it (retention dropped it since the snapshot, or storage
                    // failed): the table says how the stream ends, never with a skip.
                    let now = progress_now(store, &self.task_id);
                    if let Some(end) = self.table.missed(self.key, seq, now) {
                        frames.push(Frame::End(missed_line(&end, &self.task_id, self.era)));
                    }
                    break;
                }
                Pump::Complete { id, .. } => {
                    frames.push(Frame::End(wire::stream_result_line(&id, self.era)));
                    break;
                }
                Pump::Gone { id, earliest, .. } => {
                    crate::metrics::METRICS.events_gone(crate::metrics::Gone::Overtaken);
                    let e = ServerError::EventsGone {
                        task_id: self.task_id.clone(),
                        earliest,
                    };
                    frames.push(Frame::End(e.line(Some(&id))));
                    break;
                }
            }
        }
        frames
    }
}

/// The last line of a stream whose event could not be read, as the table decided
/// ([`StreamTable::missed`]): `events_gone` (RS-07), the empty result of a task that expired
/// in between, or an internal error for a retained event storage could not give back.
pub(crate) fn missed_line<T, M>(end: &Missed<T, M>, task_id: &str, era: rpc::Era) -> Vec<u8> {
    match end {
        Missed::Gone { id, earliest, .. } => {
            crate::metrics::METRICS.events_gone(crate::metrics::Gone::Overtaken);
            ServerError::EventsGone {
                task_id: task_id.to_owned(),
                earliest: *earliest,
            }
            .line(Some(id))
        }
        Missed::Complete { id, .. } => wire::stream_result_line(id, era),
        Missed::Unreadable { id, .. } => {
            ServerError::Internal(crate::wire::READ_FAILED.into()).line(Some(id))
        }
    }
}

pub(crate) fn open_error(e: OpenError) -> ServerError {
    match e {
        OpenError::StreamActive => ServerError::Core(rpc::RpcError::STREAM_ACTIVE),
        OpenError::StreamLimit => {
            crate::metrics::METRICS.refused(crate::metrics::Limit::Streams);
            ServerError::Core(rpc::RpcError::STREAM_LIMIT)
        }
        OpenError::DuplicateId => {
            ServerError::InvalidRequest("an active request already uses this id")
        }
    }
}

/// A task's progress as the pump needs it, read now. Storage that cannot be read now (a shared
/// store's database is away) reads as nothing new: the stream waits and is polled again, and
/// is never told the task is gone.
pub(crate) fn progress_now(store: &dyn TaskStore, task_id: &str) -> Option<Progress> {
    match store.lookup(task_id) {
        Ok(view) => view.map(|v| Progress {
            retained: v.retained,
            lifecycle: lifecycle(&v),
        }),
        Err(_) => Some(UNREADABLE),
    }
}
