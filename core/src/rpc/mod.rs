//! Sans-IO JSON-RPC 2.0 for the stream messages: bytes of one line in, typed values out; typed
//! values in, bytes of one line out. No I/O, no allocation.
//!
//! | module | owns |
//! | --- | --- |
//! | [`envelope`] | [`parse`]: one incoming line into a [`Message`] or a classified [`ParseError`]; [`parse_raw`] and [`parse_walked`], the same with less code |
//! | [`stream`] | the typed params of `tasks/stream` ([`parse_stream_params`], RS-01 / RS-02) and of `notifications/cancelled` |
//! | [`error`] | [`ErrorCode`], [`Reason`], [`RpcError`]: **the one place** where an error becomes a code, a message and a `data.reason` |
//! | [`write`](mod@write) | writing `notifications/tasks/event`, the `tasks/stream` result and error responses into a caller's buffer |
//!
//! What this module deliberately does not do: decide anything about tasks or streams (that is
//! [`crate::resume`] and [`crate::streams`]), parse the params of the host's other methods (the
//! host reads the raw params slice with its own JSON library), or frame lines ([`crate::frame`]).
//!
//! # Validation
//!
//! Every incoming line is checked in full by [`crate::json::validate`] before anything is read
//! from it: serde-json-core skips unknown fields without checking them, and a line such as
//! `{"x":tru,"id":2}` must be a parse error (-32700), not a request. [`parse_walked`] checks it
//! in the same pass ([`crate::json::walk`]) that finds its members, and uses none of them
//! unless the whole line passed.
//!
//! # Duplicate members
//!
//! A recognised member given twice (`jsonrpc`, `id`, `method`, `params`, `result`, `error` in the
//! envelope; `taskId`, `after` in `tasks/stream`; `requestId` in `notifications/cancelled`) is
//! refused: the envelope as -32600, the params as -32602. Readers disagree about which
//! duplicate wins (`serde_json::Value` keeps the last, many others the first), so a message
//! whose meaning depends on it is ambiguous; refusing is the one answer every reader agrees
//! with, and it matches `serde_json`'s typed structs, which the host uses for its other params.
//! Duplicates among members we do not read (`_meta`, `task`, ...) are not our business and are
//! ignored. Keys are compared after decoding escapes (`"t\u0061skId"` is `taskId`).

pub mod envelope;
pub mod error;
pub mod stream;
pub mod write;

pub use envelope::{
    param, parse, parse_raw, parse_walked, InvalidMessage, Message, Notification, Outcome,
    ParseError, RawId, RawMessage, RawParseError, Request, RequestPaths, Response, WalkedMessage,
    ENVELOPE_PATHS, MAX_METHOD_BYTES,
};
pub use error::{ErrorCode, ErrorData, Reason, RpcError};
pub use stream::{
    parse_cancelled_params, parse_stream_params, read_cancelled_params, read_stream_params,
    CancelledParamsError, RawStreamParams, StreamParams, StreamParamsError, MAX_TASK_ID_BYTES,
};
pub use write::{
    error_len, event_len, stream_result_len, write_error, write_event, write_stream_result,
    write_unsigned, BufferTooSmall, Era, EventNotification,
};

/// The methods and notifications this module knows by name.
pub mod method {
    /// `tasks/stream`: start or resume a task's event stream (SEP-2694).
    pub const TASKS_STREAM: &str = "tasks/stream";
    /// `notifications/tasks/event`: one task event on an active stream (SEP-2694).
    pub const TASKS_EVENT: &str = "notifications/tasks/event";
    /// `notifications/cancelled`: cancels an in-flight request, here a stream (TS-08).
    pub const CANCELLED: &str = "notifications/cancelled";
}
