//! `tasks/stream` (SEP-2694): admitting a stream and cancelling one. Delivery is
//! [`super::delivery`]'s.
//!
//! Every decision is the core's: params by [`rpc::parse_stream_params`] (RS-01, RS-02, A-02),
//! admission by [`StreamTable::check_open`] *before* the resume decision (so a second stream is
//! refused as `stream_active` whatever its cursor, TS-05 / TS-06; the limit is SE-07), the
//! start by [`resume::decide`] (RS-03..RS-07, EG-01, A-01), and the per-connection state by the
//! table. This file only looks the task up (principal-checked, SE-01 / SE-03) and writes.
//!
//! **Architecture invariant**: the table (which carries each stream's metadata, so no second
//! map can drift from it) and every write of a stream frame happen under one lock
//! ([`Streams`]), so after `notifications/cancelled` is
//! handled no frame of that stream is written (DX-04), and a stream is removed from the table
//! before its final result is written (a client that reopens on reading it is never refused).

use std::collections::VecDeque;
use std::sync::MutexGuard;

use taskstream_core::rpc;
use taskstream_core::streams::{Missed, OpenError, Opened, Progress, Pump};
use taskstream_core::{resume, RequestId, Seq, StreamTable};

use super::era::Codec;
use super::era::Era;
use super::tasks::lifecycle;
use super::wire::{self, ServerError};
use super::ConnectionState;
use crate::config::MAX_STREAMS_CAPACITY;
use crate::log::log;
use crate::store::{RawEvent, TaskStore};

/// The core's table of a connection, allocated on its first change: a connection that never
/// opens a stream (most HTTP requests) costs no table.
pub(crate) struct LazyTable {
    limit: usize,
    table: Option<Box<ConnTable>>,
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
    /// Counts the stream as open while the table holds it.
    pub(crate) _open: crate::metrics::OpenStream,
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

impl ConnectionState {
    /// `tasks/stream`: admits the stream (answering at once when there is nothing to send,
    /// RS-04 / RS-06) or refuses it.
    ///
    /// # Errors
    /// The refusal, for the caller to answer.
    pub(crate) fn open_stream(
        &self,
        id: &RequestId,
        era: Era,
        raw_params: &[u8],
    ) -> Result<(), ServerError> {
        self.try_open_stream(id, era, raw_params).inspect_err(|e| {
            log!(Debug, "tasks/stream {id} refused: {:?}", e.code());
        })
    }

    /// Parses a `tasks/stream` request's params, looks its task up (principal-checked) and
    /// asks the core: admission by the connection's table, then the resume decision. The
    /// streams lock is taken before the lookup and handed back held, so the decision and the
    /// caller's opening see one state.
    fn admit_stream(&self, era: Era, raw: &[u8]) -> Result<Admission<'_>, ServerError> {
        let codec = Codec::for_method(era, "tasks/stream")?;
        let params = rpc::parse_stream_params(raw).map_err(|e| ServerError::Core(e.into()))?;
        let task_id = params.task_id.as_str();
        let streams = self.streams();
        let (key, view) = self
            .visible_task(task_id)
            .ok_or(ServerError::UNKNOWN_TASK)?;
        streams.table.check_open(key).map_err(open_error)?;
        let start = resume::decide(params.after, view.retained, lifecycle(&view))
            .map_err(|e| ServerError::from_resume(e, task_id))?;
        if let resume::Resume::Replay { from } = start {
            crate::metrics::METRICS
                .stream_opened(view.retained.next().get().saturating_sub(from.get()));
        }
        let era = match codec {
            Codec::Legacy => rpc::Era::Legacy,
            Codec::Modern => rpc::Era::Modern,
        };
        Ok(Admission {
            streams,
            key,
            start,
            meta: StreamMeta {
                era,
                task_id: task_id.to_owned(),
                _open: crate::metrics::OpenStream::new(),
            },
        })
    }

    fn try_open_stream(&self, id: &RequestId, era: Era, raw: &[u8]) -> Result<(), ServerError> {
        let Admission {
            mut streams,
            key,
            start,
            meta,
        } = self.admit_stream(era, raw)?;
        let era = meta.era;
        match streams
            .table
            .open_with(id.clone(), key, start, meta)
            .map_err(open_error)?
        {
            Opened::Complete => {
                // RS-04 / RS-06: nothing to send and nothing will come.
                self.out.send(&wire::stream_result_line(id, era));
            }
            Opened::Streaming => {
                drop(streams);
                // Wake the delivery thread for the replay.
                self.store.changes().notify();
            }
        }
        Ok(())
    }
}

/// A `tasks/stream` request the connection admitted and the core decided, with the
/// connection's streams still locked.
struct Admission<'a> {
    streams: MutexGuard<'a, Streams>,
    /// The task, as the table keys it.
    key: u128,
    /// Where the stream starts ([`resume::decide`]).
    start: resume::Resume,
    /// Its era and task id, as sent.
    meta: StreamMeta,
}

/// One `tasks/stream` delivered outside the connection's delivery thread (an HTTP response):
/// its own one-entry stream table, pumped by [`poll`](Self::poll) on a blocking thread each
/// time its task's wake-up fires. The rules are the core's, as on stdio: where it starts is
/// [`resume::decide`], what comes next is [`StreamTable::poll`].
pub(crate) struct Detached {
    table: StreamTable<u128, 1>,
    /// The task, as a key and as sent.
    pub(crate) key: u128,
    pub(crate) task_id: String,
    /// The `tasks/stream` request.
    pub(crate) id: RequestId,
    era: rpc::Era,
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
            Err(_) => Some(super::tasks::UNREADABLE),
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
                        frames.push(Frame::Event { seq, line });
                        continue;
                    }
                    // The read missed it (retention dropped it since the snapshot, or storage
                    // failed): the table says how the stream ends, never with a skip.
                    let now = super::delivery::progress_now(store, &self.task_id);
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

impl ConnectionState {
    /// Opens `tasks/stream` request `id` as a [`Detached`] stream, under the failed-lookup
    /// allowance. The connection's table admits it (one stream per task, the stream limit)
    /// and, when `held` (a connection that outlives the request), keeps it until
    /// [`release_detached`](Self::release_detached).
    ///
    /// # Errors
    /// The refusal, for the caller to answer with `id`.
    pub(crate) fn open_detached(
        &self,
        id: &RequestId,
        era: Era,
        raw: &[u8],
        held: bool,
    ) -> Result<DetachedStart, ServerError> {
        self.guarded(|| {
            if self.plain.contains(id) || self.pending().waiters.iter().any(|(_, w)| w == id) {
                return Err(ServerError::InvalidRequest(
                    "an active request already uses this id",
                ));
            }
            let Admission {
                mut streams,
                key,
                start,
                meta,
            } = self.admit_stream(era, raw)?;
            let era = meta.era;
            let mut table = StreamTable::new(1);
            match table.open(id.clone(), key, start).map_err(open_error)? {
                Opened::Complete => Ok(DetachedStart::Complete(wire::stream_result_line(id, era))),
                Opened::Streaming => {
                    let task_id = meta.task_id.clone();
                    if held {
                        // Held in the connection's table for admission only: no delivery
                        // thread pumps it (an HTTP session has none); the detached stream does.
                        streams
                            .table
                            .open_with(id.clone(), key, start, meta)
                            .map_err(open_error)?;
                    }
                    Ok(DetachedStart::Streaming(Box::new(Detached {
                        table,
                        key,
                        task_id,
                        id: id.clone(),
                        era,
                    })))
                }
            }
        })
        .inspect_err(|e| log!(Debug, "tasks/stream {id} refused: {:?}", e.code()))
    }

    /// Whether the connection still holds the detached stream of request `id` (a
    /// `notifications/cancelled` ends the hold, TS-08).
    pub(crate) fn holds_detached(&self, id: &RequestId) -> bool {
        self.streams().table.cursor(id).is_some()
    }

    /// Ends the connection's hold of the detached stream of request `id` (it ended, or its
    /// HTTP response was closed: the task runs on).
    pub(crate) fn release_detached(&self, id: &RequestId) {
        if let Some(table) = self.streams().table.table.as_mut() {
            // Released either way: an id that names no stream any more holds nothing.
            let _released = table.cancel(id);
        }
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
            ServerError::Internal(super::delivery::READ_FAILED.into()).line(Some(id))
        }
    }
}

fn open_error(e: OpenError) -> ServerError {
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
