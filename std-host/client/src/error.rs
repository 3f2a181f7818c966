//! The client's typed errors: one enum for the connection and its requests ([`ClientError`]),
//! one for a resumable stream ([`FollowError`]), one for cursor stores ([`CursorError`]), and
//! the protocol violations a strict client refuses ([`Violation`]).
//!
//! Codes and reasons of SEP-2694 are matched only here ([`RpcError::events_gone`]), so the rest
//! of the client never compares a number with `-32010`.

use std::io;
use std::time::Duration;

use serde_json::Value;

/// The JSON-RPC code of `events_gone` (SEP-2694, "events_gone error"; EG-01).
pub const EVENTS_GONE_CODE: i64 = -32010;

/// The `data.reason` of `events_gone` (EG-01).
pub const EVENTS_GONE_REASON: &str = "events_gone";

/// A JSON-RPC error object as the server sent it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}{}", data.as_ref().map(|d| format!(" (data: {d})")).unwrap_or_default())]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// The optional `data` member.
    pub data: Option<Value>,
}

impl RpcError {
    /// Parses a JSON-RPC error object. A shape that is not `{code: integer, message: string}`
    /// is kept as well as it can be (code 0, the JSON as message) rather than dropped, so the
    /// caller still sees that the server answered with an error.
    #[must_use]
    pub fn from_value(value: &Value) -> RpcError {
        let code = value.get("code").and_then(Value::as_i64);
        let message = value.get("message").and_then(Value::as_str);
        match (code, message) {
            (Some(code), Some(message)) => RpcError {
                code,
                message: message.to_owned(),
                data: value.get("data").cloned(),
            },
            _ => RpcError {
                code: 0,
                message: format!("malformed error object: {value}"),
                data: value.get("data").cloned(),
            },
        }
    }

    /// The `data.reason` member, if any.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        self.data.as_ref()?.get("reason")?.as_str()
    }

    /// This error as `events_gone` (EG-01): code -32010, `data.reason == "events_gone"`, a
    /// string `data.taskId` and an integer `data.earliestSeq`. `None` for any other error.
    ///
    /// # Errors
    ///
    /// `Some(Err(_))` when the code or reason says `events_gone` but the data is malformed.
    #[must_use]
    pub fn events_gone(&self) -> Option<Result<EventsGone, Violation>> {
        if self.code != EVENTS_GONE_CODE && self.reason() != Some(EVENTS_GONE_REASON) {
            return None;
        }
        let bad = |what: &str| {
            Some(Err(Violation::BadEventsGone {
                detail: format!("{what} in {self}"),
            }))
        };
        if self.code != EVENTS_GONE_CODE {
            return bad("reason events_gone with another code");
        }
        let Some(data) = self.data.as_ref() else {
            return bad("no data");
        };
        if self.reason() != Some(EVENTS_GONE_REASON) {
            return bad("code -32010 without data.reason \"events_gone\"");
        }
        let Some(task_id) = data.get("taskId").and_then(Value::as_str) else {
            return bad("no string data.taskId");
        };
        let Some(earliest_seq) = data.get("earliestSeq").and_then(crate::types::seq_of) else {
            return bad("no valid data.earliestSeq");
        };
        Some(Ok(EventsGone {
            task_id: task_id.to_owned(),
            earliest_seq,
            message: self.message.clone(),
        }))
    }
}

/// A valid `events_gone` answer (EG-01): the events after the cursor are no longer retained.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("events_gone for task {task_id}: earliest retained seq is {earliest_seq}")]
pub struct EventsGone {
    /// `data.taskId`.
    pub task_id: String,
    /// `data.earliestSeq`: the oldest seq the server still retains.
    pub earliest_seq: u64,
    /// The error message (SEP-2694: "Task events are no longer available").
    pub message: String,
}

/// Something the server sent that breaks SEP-2694 or MCP; a strict client refuses it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    #[error("event seq {seq} lacks the related-task _meta (NT-01)")]
    /// An event notification without `_meta["io.modelcontextprotocol/related-task"]` (NT-01).
    MissingRelatedTask {
        /// The event's seq.
        seq: u64,
    },
    #[error("event seq {seq}: related-task _meta names task {meta_task_id:?} (NT-02)")]
    /// The related-task `_meta` names another task than `params.taskId` (NT-02).
    RelatedTaskMismatch {
        /// The event's seq.
        seq: u64,
        /// The task id in `_meta`.
        meta_task_id: String,
    },
    #[error("event seq {seq} of task {task_id:?} on another task's stream")]
    /// An event of another task arrived on this task's stream.
    WrongTask {
        /// The event's seq.
        seq: u64,
        /// The event's `taskId`.
        task_id: String,
    },
    #[error("malformed task event: {detail}")]
    /// An event notification whose params are not a valid `TaskEvent` (seq an integer in
    /// 0..=2^53-1, string `taskId` and `type`, object `payload`; EV-05).
    BadEvent {
        /// What was wrong.
        detail: String,
    },
    #[error("malformed events_gone: {detail}")]
    /// An `events_gone` error with malformed data, another task's id, or an `earliestSeq`
    /// that leaves no gap after the cursor.
    BadEventsGone {
        /// What was wrong.
        detail: String,
    },
    #[error("malformed result of {method}: {detail}")]
    /// A result that does not have the shape the method promises.
    BadResult {
        /// The method.
        method: String,
        /// What was wrong.
        detail: String,
    },
}

/// An error of the connection or of one request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("I/O error talking to the server: {0}")]
    /// Spawning the server, or writing to it, failed.
    Io(#[from] io::Error),
    #[error("no answer to {waiting_for} within {after:?}")]
    /// No answer within the deadline. The request may still be in flight.
    Timeout {
        /// What was awaited (a method name, or "event").
        waiting_for: String,
        /// The deadline that passed.
        after: Duration,
    },
    #[error("connection closed: {reason}")]
    /// The server closed the connection (or was killed) before answering.
    Closed {
        /// Why the reader stopped (EOF, a read error).
        reason: String,
    },
    #[error("{method}: {error}")]
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The method of the request.
        method: String,
        /// The error.
        #[source]
        error: RpcError,
    },
    #[error("protocol violation: {0}")]
    /// The server broke the protocol.
    Violation(#[from] Violation),
    #[error("a tasks/stream for task {task_id:?} is already open on this connection")]
    /// A `tasks/stream` for this task is already open on this connection (TS-05: the client
    /// refuses to send a second one; cancel the first).
    StreamActive {
        /// The task.
        task_id: String,
    },
    #[error("unsupported: {what}")]
    /// The server's era or capabilities do not offer this.
    Unsupported {
        /// What is missing.
        what: String,
    },
}

impl ClientError {
    /// The JSON-RPC error, if the server answered with one.
    #[must_use]
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            ClientError::Rpc { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// An error of a [`CursorStore`](crate::CursorStore).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    #[error("cursor store I/O error: {0}")]
    /// Reading, writing, syncing or renaming failed.
    Io(#[from] io::Error),
    #[error("corrupt cursor file {path}: {detail}")]
    /// A stored cursor could not be read back (not the format this store writes, or the file
    /// names another task).
    Corrupt {
        /// Where.
        path: String,
        /// What was wrong.
        detail: String,
    },
    #[error("task id {task_id:?} cannot be stored as a cursor")]
    /// The task id cannot be stored (empty, or too long for a file name).
    InvalidTaskId {
        /// The task id, possibly truncated.
        task_id: String,
    },
    #[error("seq {seq} is above 2^53 - 1")]
    /// The seq is above 2^53 - 1, which no server may assign.
    InvalidSeq {
        /// The seq.
        seq: u64,
    },
}

/// Why [`ResumableStream::follow`](crate::ResumableStream::follow) stopped with an
/// error. In every case the persisted cursor is the last event the handler finished, so the
/// caller can reconnect and follow again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FollowError<E> {
    #[error("{0}")]
    /// The connection or a request failed (including the server closing or being killed, and
    /// no event within the idle timeout).
    Client(#[from] ClientError),
    #[error("event handler failed: {0}")]
    /// The handler refused an event; its cursor was not committed.
    Handler(E),
    #[error("gap in task {task_id}: expected seq {expected}, got {got} (EV-03)")]
    /// The server skipped seqs: the next event was `got`, not `expected` (EV-03, RS-07). Never
    /// accepted silently.
    Gap {
        /// The task.
        task_id: String,
        /// The seq that had to come next.
        expected: u64,
        /// The seq that came.
        got: u64,
    },
    #[error("out of order in task {task_id}: expected seq {expected}, got {got} (EV-04)")]
    /// An event arrived out of order: `got` is below `expected` but not yet processed (EV-04).
    OutOfOrder {
        /// The task.
        task_id: String,
        /// The seq that had to come next.
        expected: u64,
        /// The seq that came.
        got: u64,
    },
    #[error("protocol violation: {0}")]
    /// The server broke the event envelope or the related-task rule.
    Violation(#[from] Violation),
    #[error("{0}")]
    /// The events after the cursor are gone and the policy is
    /// [`GonePolicy::Fail`](crate::GonePolicy::Fail) (EG-02), or recovery kept failing.
    EventsGone(EventsGone),
    #[error(
        "task {task_id}: the first retained event is seq {first_seq}; 0..{first_seq} are gone"
    )]
    /// With no cursor, the server's earliest retained event was not seq 0 and the policy is
    /// [`GonePolicy::Fail`](crate::GonePolicy::Fail): events 0..first_seq are lost.
    MissingHistory {
        /// The task.
        task_id: String,
        /// The first seq the server sent.
        first_seq: u64,
    },
    #[error("{0}")]
    /// The cursor could not be loaded or persisted.
    Cursor(#[from] CursorError),
}
