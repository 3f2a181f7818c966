//! `tasks/stream` (SEP-2694): admitting a stream and cancelling one. Delivery is
//! [`super::delivery`]'s.
//!
//! Every decision is the core's: params by [`rpc::parse_stream_params`] (RS-01, RS-02, A-02),
//! admission by [`StreamTable::check_open`] *before* the resume decision (so a second stream is
//! refused as `stream_active` whatever its cursor, TS-05 / TS-06; the limit is SE-07), the
//! start by [`resume::decide`] (RS-03..RS-07, EG-01, A-01), and the per-connection state by the
//! table. This file only looks the task up (principal-checked, SE-01 / SE-03) and writes.
//!
//! **Architecture invariant**: the table, the map of stream metadata and every write of a
//! stream frame happen under one lock ([`Streams`]), so after `notifications/cancelled` is
//! handled no frame of that stream is written (DX-04), and a stream is removed from the table
//! before its final result is written (a client that reopens on reading it is never refused).

use std::collections::HashMap;

use taskstream_core::rpc;
use taskstream_core::streams::{OpenError, Opened};
use taskstream_core::{resume, RequestId, StreamTable};

use super::lifecycle::Era;
use super::tasks::{lifecycle, Codec};
use super::wire::{self, ServerError};
use super::Shared;
use crate::config::MAX_STREAMS_CAPACITY;
use crate::log::log;

/// The active streams of the connection.
pub(crate) struct Streams {
    /// The core's table, keyed by task id as a `u128`.
    pub(crate) table: Box<StreamTable<u128, MAX_STREAMS_CAPACITY>>,
    /// What the host needs to write each stream's frames.
    pub(crate) meta: HashMap<u128, StreamMeta>,
}

/// Per-stream facts the table does not keep.
pub(crate) struct StreamMeta {
    /// The `tasks/stream` request.
    pub(crate) id: RequestId,
    /// Its era, for the shape of the final result (DX-01).
    pub(crate) era: rpc::Era,
    /// The task id as sent.
    pub(crate) task_id: String,
}

impl Streams {
    /// An empty set admitting `limit` streams.
    pub(crate) fn new(limit: usize) -> Streams {
        Streams {
            table: Box::new(StreamTable::new(limit)),
            meta: HashMap::new(),
        }
    }

    /// Cancels the stream of request `id` (TS-08): no further frame, no response (DX-04). The
    /// task is untouched. Returns whether there was one.
    pub(crate) fn cancel(&mut self, id: &RequestId) -> bool {
        match self.table.cancel(id) {
            Some(task) => {
                self.meta.remove(&task);
                true
            }
            None => false,
        }
    }
}

impl Streams {
    /// Whether an active stream was opened by request `id`.
    pub(crate) fn uses_id(&self, id: &RequestId) -> bool {
        self.meta.values().any(|m| &m.id == id)
    }
}

impl Shared {
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

    fn try_open_stream(&self, id: &RequestId, era: Era, raw: &[u8]) -> Result<(), ServerError> {
        let codec = Codec::for_method(era, "tasks/stream")?;
        let params = rpc::parse_stream_params(raw).map_err(|e| ServerError::Core(e.into()))?;
        let task_id = params.task_id.as_str();
        let mut streams = self.streams();
        // Looked up under the streams lock, so the decision and the opening see one state.
        let (key, view) = self
            .visible_task(task_id)
            .ok_or(ServerError::UNKNOWN_TASK)?;
        streams.table.check_open(key).map_err(open_error)?;
        let start = resume::decide(params.after, view.retained, lifecycle(&view))
            .map_err(|e| ServerError::from_resume(e, task_id))?;
        let era = match codec {
            Codec::Legacy => rpc::Era::Legacy,
            Codec::Modern => rpc::Era::Modern,
        };
        match streams
            .table
            .open(id.clone(), key, start)
            .map_err(open_error)?
        {
            Opened::Complete => {
                // RS-04 / RS-06: nothing to send and nothing will come.
                self.out.send(&wire::stream_result_line(id, era));
            }
            Opened::Streaming => {
                streams.meta.insert(
                    key,
                    StreamMeta {
                        id: id.clone(),
                        era,
                        task_id: task_id.to_owned(),
                    },
                );
                drop(streams);
                // Wake the delivery thread for the replay.
                self.store.changes().notify();
            }
        }
        Ok(())
    }
}

fn open_error(e: OpenError) -> ServerError {
    match e {
        OpenError::StreamActive => ServerError::Core(rpc::RpcError::STREAM_ACTIVE),
        OpenError::StreamLimit => ServerError::Core(rpc::RpcError::STREAM_LIMIT),
        OpenError::DuplicateId => {
            ServerError::InvalidRequest("an active request already uses this id")
        }
    }
}
