//! `tasks/stream` (SEP-2694): admitting a stream and cancelling one. Delivery is
//! [`super::delivery`]'s; the streams themselves are [`super::streams`]'.
//!
//! Every decision is the core's: params by [`rpc::parse_stream_params`] (RS-01, RS-02, A-02),
//! admission by [`StreamTable::check_open`] *before* the resume decision (so a second stream is
//! refused as `stream_active` whatever its cursor, TS-05 / TS-06; the limit is SE-07), the
//! start by [`resume::decide`] (RS-03..RS-07, EG-01, A-01), and the per-connection state by the
//! table. This file only looks the task up (principal-checked, SE-01 / SE-03) and writes.

use std::sync::MutexGuard;

use taskstream_core::rpc;
use taskstream_core::streams::Opened;
use taskstream_core::{resume, RequestId, StreamTable};

use super::state::ConnectionState;
use super::streams::{open_error, Detached, DetachedStart, StreamMeta, Streams};
use crate::log::log;
use crate::wire::era::{Codec, Era};
use crate::wire::task::lifecycle;
use crate::wire::{self, ServerError};

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
        let first = match start {
            resume::Resume::Replay { from } | resume::Resume::Live { from } => from.get(),
            resume::Resume::Complete => view.retained.next().get(),
        };
        let spans = match start {
            resume::Resume::Replay { from } => crate::otel::StreamSpans::new(
                task_id,
                params.after.map(|s| s.get()),
                from.get(),
                view.retained.next().get(),
            ),
            resume::Resume::Live { from } => crate::otel::StreamSpans::new(
                task_id,
                params.after.map(|s| s.get()),
                from.get(),
                from.get(),
            ),
            resume::Resume::Complete => crate::otel::StreamSpans::none(),
        };
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
                open: crate::metrics::OpenStream::new(task_id, first, spans),
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
                self.process.store.changes().notify();
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
        let span = crate::otel::request_raw(
            taskstream_core::rpc::method::TASKS_STREAM,
            crate::otel::era_name(era),
            self.transport(),
            raw,
        );
        let _in_span = span.enter();
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
                    let delivery = meta.open.delivery();
                    let open = if held {
                        // Held in the connection's table for admission only: no delivery
                        // thread pumps it (an HTTP session has none); the detached stream does.
                        streams
                            .table
                            .open_with(id.clone(), key, start, meta)
                            .map_err(open_error)?;
                        None
                    } else {
                        Some(meta.open)
                    };
                    Ok(DetachedStart::Streaming(Box::new(Detached {
                        table,
                        key,
                        task_id,
                        id: id.clone(),
                        era,
                        _open: open,
                        delivery,
                    })))
                }
            }
        })
        .inspect_err(|e| {
            span.record("otel.status_code", "ERROR");
            log!(Debug, "tasks/stream {id} refused: {:?}", e.code());
        })
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
