//! [`EventStream`]: one open `tasks/stream` request, as the server sends it. No cursor, no
//! de-duplication, no continuity check: [`ResumableStream`](crate::ResumableStream)
//! builds those on top.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::{json, Value};

use crate::conn::Inbound;
use crate::error::{ClientError, RpcError};
use crate::mcp_client::{wait_inbound, Client};

/// What one wait on a stream yields.
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamItem {
    /// An event notification's params (parse with
    /// [`TaskEvent::parse`](crate::TaskEvent::parse)).
    Event(Value),
    /// The server closed the stream normally with this result (`{}` legacy,
    /// `{"resultType": "complete"}` modern). No more items follow.
    End(Value),
    /// The server answered the request with an error (such as `events_gone`, or `-32602`
    /// for a bad cursor). No more items follow.
    Error(RpcError),
}

/// One open `tasks/stream` request. Dropping an unfinished stream cancels it.
#[derive(Debug)]
pub struct EventStream<'c> {
    client: &'c Client,
    request_id: u64,
    task_id: String,
    rx: Receiver<Inbound>,
    finished: bool,
}

impl<'c> EventStream<'c> {
    pub(crate) fn new(
        client: &'c Client,
        request_id: u64,
        task_id: String,
        rx: Receiver<Inbound>,
    ) -> Self {
        EventStream {
            client,
            request_id,
            task_id,
            rx,
            finished: false,
        }
    }

    /// The JSON-RPC id of the `tasks/stream` request.
    #[must_use]
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The task.
    #[must_use]
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Waits up to `timeout` for the next event or the end of the stream.
    ///
    /// # Errors
    ///
    /// [`ClientError::Timeout`] when nothing came in time (the stream stays open; wait again
    /// or [`cancel`](Self::cancel)); [`ClientError::Closed`] when the connection ended;
    /// [`ClientError::Closed`] too after the stream already ended.
    pub fn next(&mut self, timeout: Duration) -> Result<StreamItem, ClientError> {
        if self.finished {
            return Err(ClientError::Closed {
                reason: "the stream has ended".into(),
            });
        }
        match wait_inbound(&self.rx, timeout, "a task event") {
            Ok(Inbound::Event(params)) => Ok(StreamItem::Event(params)),
            Ok(Inbound::Response(answer)) => {
                self.finish();
                Ok(match answer {
                    Ok(result) => StreamItem::End(result),
                    Err(error) => StreamItem::Error(error),
                })
            }
            Ok(Inbound::Closed(reason)) => {
                self.finish();
                Err(ClientError::Closed { reason })
            }
            Err(e @ ClientError::Timeout { .. }) => Err(e),
            Err(e) => {
                self.finish();
                Err(e)
            }
        }
    }

    /// Whether the stream has ended (result, error, closed connection or cancelled).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Cancels the stream with `notifications/cancelled {requestId}` (TS-08: this stops
    /// delivery and does not cancel the task). Events already in flight are set aside, and the
    /// next [`Client::open_stream`] for the task on this connection first makes a `tasks/get`
    /// round trip so that none of them can reach the new stream.
    ///
    /// # Errors
    ///
    /// A write error; the stream is closed locally either way.
    pub fn cancel(mut self) -> Result<(), ClientError> {
        self.cancel_inner()
    }

    fn cancel_inner(&mut self) -> Result<(), ClientError> {
        if self.finished {
            return Ok(());
        }
        self.finish();
        self.client.conn().mark_draining(&self.task_id);
        self.client.notify(
            "notifications/cancelled",
            json!({"requestId": self.request_id, "reason": "client stopped following the task"}),
        )
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.client
                .conn()
                .forget(self.request_id, Some(&self.task_id));
        }
    }
}

impl Drop for EventStream<'_> {
    fn drop(&mut self) {
        let _ = self.cancel_inner();
    }
}
