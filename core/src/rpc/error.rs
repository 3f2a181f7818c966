//! JSON-RPC error codes, messages and reasons: the one place where an error of this crate
//! becomes what goes on the wire. No code number and no reason string appears anywhere else;
//! the host uses [`ErrorCode::code`] and [`Reason::as_str`] for the errors it writes itself.
//!
//! Codes: the JSON-RPC standard ones (MCP-DIGEST a.2), SEP-2694's `events_gone` (EG-01; in the
//! range 2026-07-28 calls legacy, see MCP-DIGEST a.2, kept because the SEP fixes it), and the
//! 2026-07-28 codes -32021 (DX-03) and -32022 (MCP-DIGEST a.4).

use core::fmt;

use crate::resume::ResumeError;
use crate::seq::Seq;

use super::envelope::{InvalidMessage, ParseError};
use super::stream::{CancelledParamsError, StreamParamsError};

/// A JSON-RPC error code this receiver answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// -32700: the line is not JSON.
    ParseError,
    /// -32600: JSON, but not a valid request (also an over-long line).
    InvalidRequest,
    /// -32601: unknown method (TS-01 for a receiver without streams).
    MethodNotFound,
    /// -32602: invalid params: unknown task, bad `after`, second stream, stream limit
    /// (RS-02, TS-06, DX-02, DX-05).
    InvalidParams,
    /// -32603: the receiver failed.
    InternalError,
    /// -32010: `events_gone`, the cursor is older than the retained events (EG-01).
    EventsGone,
    /// -32020: an HTTP header (`Mcp-Method`, `Mcp-Name`) disagrees with the body, or is
    /// missing (2026-07-28 Streamable HTTP).
    HeaderMismatch,
    /// -32021: the request needs a client capability it did not declare (DX-03).
    MissingRequiredClientCapability,
    /// -32022: the requested protocol version is not supported (MCP-DIGEST a.4).
    UnsupportedProtocolVersion,
}

impl ErrorCode {
    /// Every code, for tests and tables.
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::EventsGone,
        ErrorCode::HeaderMismatch,
        ErrorCode::MissingRequiredClientCapability,
        ErrorCode::UnsupportedProtocolVersion,
    ];

    /// The number on the wire.
    #[must_use]
    pub const fn code(self) -> i32 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::EventsGone => -32010,
            ErrorCode::HeaderMismatch => -32020,
            ErrorCode::MissingRequiredClientCapability => -32021,
            ErrorCode::UnsupportedProtocolVersion => -32022,
        }
    }

    /// The standard message for this code.
    #[must_use]
    pub const fn message(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "Parse error",
            ErrorCode::InvalidRequest => "Invalid Request",
            ErrorCode::MethodNotFound => "Method not found",
            ErrorCode::InvalidParams => "Invalid params",
            ErrorCode::InternalError => "Internal error",
            ErrorCode::EventsGone => "Task events are no longer available",
            ErrorCode::HeaderMismatch => "Header mismatch",
            ErrorCode::MissingRequiredClientCapability => "Missing required client capability",
            ErrorCode::UnsupportedProtocolVersion => "Unsupported protocol version",
        }
    }

    /// The code with this number, if it is one of ours.
    #[must_use]
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), self.code())
    }
}

/// A machine-readable `data.reason` of an error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// `stream_limit`: the connection has reached its limit of active streams (SE-07).
    StreamLimit,
    /// `stream_active`: the task already has an active stream on this connection (TS-05, TS-06).
    StreamActive,
    /// `events_gone`: the cursor is older than the retained events (EG-01).
    EventsGone,
    /// `unknown_task`: no such task, or one this client may not see (DX-02, SE-03); both look
    /// exactly alike.
    UnknownTask,
    /// `invalid_after`: `after` is not an integer literal in `0 ..= 2^53 - 1` (RS-01, RS-02).
    InvalidAfter,
    /// `cursor_ahead`: `after` is beyond the task's last assigned seq (MCP-DIGEST A-01).
    CursorAhead,
    /// `message_too_long`: the line is longer than the receiver accepts.
    MessageTooLong,
    /// `too_many_failures`: too many lookups of unknown tasks or bad cursors from this
    /// connection; slowed down against guessing (SE-07, "resume attempts").
    TooManyFailures,
    /// `task_limit`: the receiver runs as many tasks as it allows.
    TaskLimit,
    /// `waiter_limit`: as many requests wait for task results as the receiver allows.
    WaiterLimit,
}

impl Reason {
    /// The reason as it appears on the wire.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::StreamLimit => "stream_limit",
            Reason::StreamActive => "stream_active",
            Reason::EventsGone => "events_gone",
            Reason::UnknownTask => "unknown_task",
            Reason::InvalidAfter => "invalid_after",
            Reason::CursorAhead => "cursor_ahead",
            Reason::MessageTooLong => "message_too_long",
            Reason::TooManyFailures => "too_many_failures",
            Reason::TaskLimit => "task_limit",
            Reason::WaiterLimit => "waiter_limit",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `data` member of an error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorData<'a> {
    /// No `data` member.
    None,
    /// `{"reason": …}`.
    Reason(Reason),
    /// `{"reason":"events_gone","taskId":…,"earliestSeq":…}` (EG-01).
    EventsGone {
        /// The task of the stream request.
        task_id: &'a str,
        /// The oldest retained seq (the next seq if nothing is retained, MCP-DIGEST A-03).
        earliest: Seq,
    },
}

/// An error object ready to write with [`super::write_error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcError<'a> {
    /// The code.
    pub code: ErrorCode,
    /// The message: one sentence, written escaped.
    pub message: &'a str,
    /// The `data` member.
    pub data: ErrorData<'a>,
}

impl RpcError<'static> {
    /// The error with the code's standard message and no data.
    #[must_use]
    pub const fn new(code: ErrorCode) -> Self {
        RpcError {
            code,
            message: code.message(),
            data: ErrorData::None,
        }
    }

    /// -32602 with `data.reason` `stream_limit` (SE-07).
    pub const STREAM_LIMIT: RpcError<'static> = RpcError {
        code: ErrorCode::InvalidParams,
        message: "Invalid params: too many active streams on this connection",
        data: ErrorData::Reason(Reason::StreamLimit),
    };

    /// -32602 with `data.reason` `stream_active` (TS-06).
    pub const STREAM_ACTIVE: RpcError<'static> = RpcError {
        code: ErrorCode::InvalidParams,
        message: "Invalid params: the task already has an active stream on this connection",
        data: ErrorData::Reason(Reason::StreamActive),
    };

    /// -32602 with `data.reason` `unknown_task`: no such task, or not this client's (DX-02,
    /// SE-03). Identical in both cases on purpose.
    pub const UNKNOWN_TASK: RpcError<'static> = RpcError {
        code: ErrorCode::InvalidParams,
        message: "Invalid params: unknown task",
        data: ErrorData::Reason(Reason::UnknownTask),
    };

    /// -32600 with `data.reason` `message_too_long`: a line longer than the receiver accepts.
    pub const MESSAGE_TOO_LONG: RpcError<'static> = RpcError {
        code: ErrorCode::InvalidRequest,
        message: "Invalid Request: message too long",
        data: ErrorData::Reason(Reason::MessageTooLong),
    };
}

impl<'a> RpcError<'a> {
    /// The same error with another message.
    #[must_use]
    pub const fn with_message<'b>(self, message: &'b str) -> RpcError<'b>
    where
        'a: 'b,
    {
        RpcError {
            code: self.code,
            message,
            data: self.data,
        }
    }

    /// -32010 `Task events are no longer available` with its data (EG-01).
    #[must_use]
    pub const fn events_gone(task_id: &'a str, earliest: Seq) -> Self {
        RpcError {
            code: ErrorCode::EventsGone,
            message: ErrorCode::EventsGone.message(),
            data: ErrorData::EventsGone { task_id, earliest },
        }
    }

    /// The answer to a `tasks/stream` request for `task_id` that [`crate::resume::decide`]
    /// refused: `events_gone` (EG-01) or, for a cursor beyond the last seq, -32602.
    #[must_use]
    pub const fn from_resume(err: ResumeError, task_id: &'a str) -> Self {
        match err {
            ResumeError::EventsGone { earliest } => RpcError::events_gone(task_id, earliest),
            ResumeError::CursorAhead { .. } => RpcError {
                code: ErrorCode::InvalidParams,
                message: "Invalid params: after is beyond the last event of the task",
                data: ErrorData::Reason(Reason::CursorAhead),
            },
        }
    }
}

impl From<ErrorCode> for RpcError<'static> {
    fn from(code: ErrorCode) -> Self {
        RpcError::new(code)
    }
}

impl From<ResumeError> for ErrorCode {
    fn from(err: ResumeError) -> Self {
        match err {
            ResumeError::EventsGone { .. } => ErrorCode::EventsGone,
            ResumeError::CursorAhead { .. } => ErrorCode::InvalidParams,
        }
    }
}

impl From<&ParseError> for ErrorCode {
    fn from(err: &ParseError) -> Self {
        match err {
            ParseError::NotJson(_) => ErrorCode::ParseError,
            ParseError::Invalid { .. } => ErrorCode::InvalidRequest,
            ParseError::MethodTooLong { .. } => ErrorCode::MethodNotFound,
        }
    }
}

impl From<&ParseError> for RpcError<'static> {
    fn from(err: &ParseError) -> Self {
        RpcError {
            code: ErrorCode::from(err),
            message: err.message(),
            data: ErrorData::None,
        }
    }
}

impl From<InvalidMessage> for RpcError<'static> {
    fn from(problem: InvalidMessage) -> Self {
        RpcError {
            code: ErrorCode::InvalidRequest,
            message: problem.message(),
            data: ErrorData::None,
        }
    }
}

impl From<StreamParamsError> for ErrorCode {
    fn from(_: StreamParamsError) -> Self {
        ErrorCode::InvalidParams
    }
}

impl From<StreamParamsError> for RpcError<'static> {
    /// Every refusal is -32602. A task id too long to be one of ours is answered exactly as an
    /// unknown task (DX-02); a bad `after` carries `invalid_after` (RS-02).
    fn from(err: StreamParamsError) -> Self {
        if err == StreamParamsError::TaskIdTooLong {
            return RpcError::UNKNOWN_TASK;
        }
        let data = if err.is_about_after() {
            ErrorData::Reason(Reason::InvalidAfter)
        } else {
            ErrorData::None
        };
        RpcError {
            code: ErrorCode::InvalidParams,
            message: err.message(),
            data,
        }
    }
}

impl From<CancelledParamsError> for ErrorCode {
    /// Never sent (notifications are not answered), but logged with a code like any other.
    fn from(_: CancelledParamsError) -> Self {
        ErrorCode::InvalidParams
    }
}

#[cfg(test)]
mod tests;
