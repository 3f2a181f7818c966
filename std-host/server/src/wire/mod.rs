//! JSON-RPC at the edge, on top of `taskstream_core::rpc`: the server's error type
//! ([`ServerError`], whose codes come only from the core's [`ErrorCode`]) and the writers of
//! outgoing lines.
//!
//! The stream messages (`notifications/tasks/event`, the `tasks/stream` result, errors the core
//! describes such as `events_gone`, `stream_active`, `stream_limit`, unknown task, bad `after`)
//! are written by the core's writers; other results and errors are built here with
//! `serde_json`, as the core leaves the host's other methods to the host.

pub(crate) mod era;
pub(crate) mod task;

use serde_json::{json, Map, Value};
use taskstream_core::rpc::{self, ErrorCode, EventNotification, Reason};
use taskstream_core::{RequestId, ResumeError, Seq};

/// What a stream is told when its next event cannot be read from storage.
pub(crate) const READ_FAILED: &str =
    "the server could not read this task's next event from its storage; the stream ends";

/// What every open stream and waiting request is told when storage failed.
pub(crate) const STORAGE_FAILED: &str = "the server's storage failed (a write or flush to its \
    data dir did not succeed); the server stops, and its restart recovers every event it sent";

/// The exit status of `taskstream serve` after storage failed (EX_IOERR).
pub(crate) const EXIT_STORAGE_FAILED: i32 = 74;

/// The `_meta` key tying a message to a task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The extension id of Tasks (SEP-2663).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The extension key under which a modern `server/discover` advertises task event streams
/// (TS-02): beside the Tasks extension, whose object SEP-2663 defines as `{}` and official
/// clients accept only empty (chapter, open question A-06).
pub(crate) const EVENT_STREAMS_EXTENSION: &str = "dev.taskstream/event-streams";
/// The only modern protocol version spoken.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";

/// Every error the server answers with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ServerError {
    /// An error the core describes in full (parse errors, stream admission, `tasks/stream`
    /// params, unknown task, cursor ahead).
    Core(rpc::RpcError<'static>),
    /// The cursor is before the retained range (EG-01).
    EventsGone {
        /// The task.
        task_id: String,
        /// The oldest retained seq.
        earliest: Seq,
    },
    /// Not acceptable in this state.
    InvalidRequest(&'static str),
    /// No such method (in this era).
    MethodNotFound(String),
    /// Bad params.
    InvalidParams(String),
    /// The task is terminal (cancel under SEP-1686).
    TaskTerminal,
    /// A modern request that needs the Tasks extension did not declare it (DX-03).
    MissingTasksExtension,
    /// A modern request with a protocol version this server does not speak.
    UnsupportedVersion {
        /// What the request named.
        requested: Value,
    },
    /// Something failed inside the server.
    Internal(String),
    /// An HTTP header disagrees with the body or is missing (2026-07-28 Streamable HTTP).
    HeaderMismatch(String),
    /// A `tasks/list` cursor this server did not hand out.
    InvalidCursor,
    /// Tasks requests are refused for a while: too many lookups failed (SE-07).
    TooManyFailures {
        /// When a lookup will be admitted again, in ms from now.
        retry_after_ms: u64,
    },
    /// A resource limit of the connection (running tasks, waiting `tasks/result` requests).
    Limit {
        /// The `data.reason`.
        reason: Reason,
        /// The sentence after "Invalid params: ".
        what: &'static str,
    },
}

impl ServerError {
    /// No such task, or another principal's (DX-02, SE-03): identical on purpose.
    pub(crate) const UNKNOWN_TASK: ServerError = ServerError::Core(rpc::RpcError::UNKNOWN_TASK);

    /// The answer to a refused resume (the core's decision, mapped by the core).
    pub(crate) fn from_resume(err: ResumeError, task_id: &str) -> ServerError {
        match err {
            ResumeError::EventsGone { earliest } => {
                crate::metrics::METRICS.events_gone(crate::metrics::Gone::Cursor);
                ServerError::EventsGone {
                    task_id: task_id.to_owned(),
                    earliest,
                }
            }
            ResumeError::CursorAhead { .. } => {
                ServerError::Core(rpc::RpcError::from_resume(err, ""))
            }
        }
    }

    /// Whether this answer to a Tasks request or `tasks/stream` means that a guess missed: an
    /// unknown task (or another principal's: they look alike), a bad `after`, a cursor beyond
    /// the last seq, or a `tasks/list` cursor never handed out. These are what a client
    /// guessing task ids or cursors produces (SE-07, "resume attempts"); `events_gone` is not
    /// one (an honest client that fell behind gets it).
    pub(crate) fn is_failed_lookup(&self) -> bool {
        match self {
            ServerError::Core(e) => matches!(
                e.data,
                rpc::ErrorData::Reason(
                    rpc::Reason::UnknownTask | rpc::Reason::InvalidAfter | rpc::Reason::CursorAhead
                )
            ),
            ServerError::InvalidCursor => true,
            _ => false,
        }
    }

    /// The error code.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            ServerError::Core(e) => e.code,
            ServerError::EventsGone { .. } => ErrorCode::EventsGone,
            ServerError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ServerError::MethodNotFound(_) => ErrorCode::MethodNotFound,
            ServerError::InvalidParams(_)
            | ServerError::TaskTerminal
            | ServerError::InvalidCursor
            | ServerError::TooManyFailures { .. }
            | ServerError::Limit { .. } => ErrorCode::InvalidParams,
            ServerError::MissingTasksExtension => ErrorCode::MissingRequiredClientCapability,
            ServerError::UnsupportedVersion { .. } => ErrorCode::UnsupportedProtocolVersion,
            ServerError::Internal(_) => ErrorCode::InternalError,
            ServerError::HeaderMismatch(_) => ErrorCode::HeaderMismatch,
        }
    }

    /// The error object `{code, message, data?}` as JSON (e.g. to store in a failed task).
    pub(crate) fn to_json(&self) -> Value {
        serde_json::from_slice::<Value>(&self.line(None))
            .ok()
            .and_then(|mut v| v.get_mut("error").map(Value::take))
            .unwrap_or(Value::Null)
    }

    /// The error response line for request `id` (`None`: `id: null`).
    pub(crate) fn line(&self, id: Option<&RequestId>) -> Vec<u8> {
        let core = match self {
            ServerError::Core(e) => Some(*e),
            ServerError::EventsGone { task_id, earliest } => {
                return core_error(id, &rpc::RpcError::events_gone(task_id, *earliest));
            }
            _ => None,
        };
        if let Some(e) = core {
            return core_error(id, &e);
        }
        let code = self.code();
        let (message, data) = match self {
            ServerError::InvalidRequest(m) => (format!("{}: {m}", code.message()), None),
            ServerError::MethodNotFound(m) => (format!("{}: {m}", code.message()), None),
            ServerError::InvalidParams(m) => (format!("{}: {m}", code.message()), None),
            ServerError::TaskTerminal => (
                format!(
                    "{}: the task is already in a terminal status",
                    code.message()
                ),
                None,
            ),
            ServerError::MissingTasksExtension => (
                format!("{}: the Tasks extension", code.message()),
                Some(json!({
                    "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } }
                })),
            ),
            ServerError::UnsupportedVersion { requested } => (
                code.message().to_owned(),
                Some(json!({ "supported": [MODERN_VERSION], "requested": requested })),
            ),
            ServerError::Internal(m) | ServerError::HeaderMismatch(m) => {
                (format!("{}: {m}", code.message()), None)
            }
            ServerError::InvalidCursor => (format!("{}: invalid cursor", code.message()), None),
            ServerError::TooManyFailures { retry_after_ms } => (
                format!(
                    "{}: too many failed task lookups on this connection; retry later",
                    code.message()
                ),
                Some(json!({
                    "reason": Reason::TooManyFailures.as_str(),
                    "retryAfterMs": retry_after_ms,
                })),
            ),
            ServerError::Limit { reason, what } => (
                format!("{}: {what}", code.message()),
                Some(json!({ "reason": reason.as_str() })),
            ),
            ServerError::Core(_) | ServerError::EventsGone { .. } => (String::new(), None),
        };
        let mut error = Map::new();
        error.insert("code".into(), Value::from(code.code()));
        error.insert("message".into(), Value::String(message));
        if let Some(data) = data {
            error.insert("data".into(), data);
        }
        let id = id.map_or(Value::Null, id_value);
        json!({ "jsonrpc": "2.0", "id": id, "error": error })
            .to_string()
            .into_bytes()
    }
}

fn core_error(id: Option<&RequestId>, e: &rpc::RpcError<'_>) -> Vec<u8> {
    let mut out = vec![0; rpc::error_len(id, e)];
    let n = rpc::write_error(id, e, &mut out).unwrap_or(0);
    out.truncate(n);
    out
}

/// The JSON form of a [`RequestId`].
pub(crate) fn id_value(id: &RequestId) -> Value {
    match id {
        RequestId::Number(n) => Value::from(*n),
        RequestId::String(s) => Value::String(s.as_str().to_owned()),
    }
}

/// The params of a method other than `tasks/stream`, as a JSON object.
///
/// A member that appears twice in an object, at any depth, makes the params invalid: which of
/// the two a reader would take is not defined by JSON (RFC 8259 §4), and `serde_json` silently
/// keeps the last one, so `{"taskId":"a","taskId":"b"}` would name one task to a proxy that keeps
/// the first and another to us. The core refuses duplicate envelope members and duplicate
/// `tasks/stream` params the same way.
///
/// # Errors
/// [`ServerError::InvalidParams`] if they are not an object or repeat a member.
pub(crate) fn object_params(raw: &[u8]) -> Result<Map<String, Value>, ServerError> {
    match serde_json::from_slice::<Unique>(raw) {
        Ok(Unique(Value::Object(map))) => Ok(map),
        Ok(_) => Err(ServerError::InvalidParams(
            "params must be an object".into(),
        )),
        Err(e) if e.is_data() => Err(ServerError::InvalidParams(
            "params must not repeat a member".into(),
        )),
        Err(_) => Err(ServerError::InvalidParams(
            "params must be an object".into(),
        )),
    }
}

/// A JSON value read with duplicate object members refused (as a data error).
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value without repeated object members")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Unique(value) = map.next_value()?;
            if members.insert(key, value).is_some() {
                return Err(serde::de::Error::custom("repeated member"));
            }
        }
        Ok(Value::Object(members))
    }
}

/// A success response line.
pub(crate) fn response(id: &RequestId, result: &Value) -> Vec<u8> {
    json!({ "jsonrpc": "2.0", "id": id_value(id), "result": result })
        .to_string()
        .into_bytes()
}

/// An error response line with a ready error object (e.g. a task's stored error).
pub(crate) fn error_object_response(id: &RequestId, error: &Value) -> Vec<u8> {
    json!({ "jsonrpc": "2.0", "id": id_value(id), "error": error })
        .to_string()
        .into_bytes()
}

/// A notification line.
pub(crate) fn notification(method: &str, params: &Value) -> Vec<u8> {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
        .to_string()
        .into_bytes()
}

/// A `notifications/tasks/event` line (NT-01, NT-02, EV-01), written by the core into `buf`.
pub(crate) fn event_line<'b>(
    buf: &'b mut Vec<u8>,
    task_id: &str,
    seq: Seq,
    event_type: &str,
    payload: &[u8],
) -> &'b [u8] {
    let ev = EventNotification {
        task_id,
        seq,
        event_type,
        payload,
    };
    buf.resize(rpc::event_len(&ev), 0);
    let n = rpc::write_event(&ev, buf).unwrap_or(0);
    buf.get(..n).unwrap_or_default()
}

/// The line that closes a `tasks/stream` normally (TS-03, DX-01), written by the core.
pub(crate) fn stream_result_line(id: &RequestId, era: rpc::Era) -> Vec<u8> {
    let mut out = vec![0; rpc::stream_result_len(id, era)];
    let n = rpc::write_stream_result(id, era, &mut out).unwrap_or(0);
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &[u8]) -> Value {
        serde_json::from_slice(line).unwrap_or(Value::Null)
    }

    #[test]
    fn event_line_is_valid_json_with_related_task() {
        let mut buf = Vec::new();
        let line = event_line(
            &mut buf,
            "ab",
            Seq::ZERO,
            "dev.taskstream.tick",
            br#"{"i":0}"#,
        );
        assert_eq!(
            parse(line),
            json!({"jsonrpc":"2.0","method":"notifications/tasks/event","params":{
                "seq":0,"taskId":"ab","type":"dev.taskstream.tick","payload":{"i":0},
                "_meta":{"io.modelcontextprotocol/related-task":{"taskId":"ab"}}}})
        );
    }

    #[test]
    fn events_gone_has_the_sep_shape() {
        // EG-01
        let e = ServerError::EventsGone {
            task_id: "t".into(),
            earliest: Seq::new(100).unwrap(),
        };
        assert_eq!(
            parse(&e.line(Some(&RequestId::Number(10)))),
            json!({"jsonrpc":"2.0","id":10,"error":{"code":-32010,
                "message":"Task events are no longer available",
                "data":{"reason":"events_gone","taskId":"t","earliestSeq":100}}})
        );
    }

    #[test]
    fn host_errors_carry_their_data() {
        assert_eq!(
            ServerError::MissingTasksExtension.to_json(),
            json!({"code": -32021, "message": "Missing required client capability: the Tasks extension",
                "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}})
        );
        assert_eq!(ServerError::UNKNOWN_TASK.to_json()["code"], json!(-32602));
        assert_eq!(
            parse(&ServerError::MethodNotFound("x".into()).line(None))["id"],
            Value::Null
        );
    }

    #[test]
    fn params_with_a_repeated_member_are_invalid_at_any_depth() {
        let msg = |raw: &str| match object_params(raw.as_bytes()) {
            Ok(m) => Ok(Value::Object(m)),
            Err(e) => Err(e.to_json()["message"].clone()),
        };
        assert_eq!(
            msg(r#"{"taskId":"a","n":[1,-2,2.5,null,true,{"x":"y"}]}"#),
            Ok(json!({"taskId":"a","n":[1,-2,2.5,null,true,{"x":"y"}]}))
        );
        let repeated = Err(json!("Invalid params: params must not repeat a member"));
        assert_eq!(msg(r#"{"taskId":"a","taskId":"b"}"#), repeated);
        assert_eq!(msg(r#"{"arguments":{"count":1,"count":2}}"#), repeated);
        assert_eq!(msg(r#"{"a":[{"k":1,"k":1}]}"#), repeated);
        let not_object = Err(json!("Invalid params: params must be an object"));
        assert_eq!(msg("[1]"), not_object);
        assert_eq!(msg("{"), not_object);
    }

    #[test]
    fn failed_lookups_are_told_apart() {
        assert!(ServerError::UNKNOWN_TASK.is_failed_lookup());
        assert!(ServerError::InvalidCursor.is_failed_lookup());
        let after = rpc::parse_stream_params(br#"{"taskId":"t","after":-1}"#)
            .map_err(|e| ServerError::Core(e.into()));
        assert!(after.is_err_and(|e| e.is_failed_lookup()));
        assert!(!ServerError::EventsGone {
            task_id: "t".into(),
            earliest: Seq::ZERO
        }
        .is_failed_lookup());
        assert!(!ServerError::Core(rpc::RpcError::STREAM_LIMIT).is_failed_lookup());
        assert!(!ServerError::InvalidParams("x".into()).is_failed_lookup());
    }

    #[test]
    fn limits_carry_a_reason() {
        assert_eq!(
            ServerError::TooManyFailures {
                retry_after_ms: 600
            }
            .to_json(),
            json!({"code": -32602,
                "message": "Invalid params: too many failed task lookups on this connection; retry later",
                "data": {"reason": "too_many_failures", "retryAfterMs": 600}})
        );
        assert_eq!(
            ServerError::Limit {
                reason: Reason::TaskLimit,
                what: "w"
            }
            .to_json(),
            json!({"code": -32602, "message": "Invalid params: w", "data": {"reason": "task_limit"}})
        );
    }

    #[test]
    fn stream_results_per_era() {
        // DX-01
        let id = RequestId::Number(3);
        assert_eq!(
            parse(&stream_result_line(&id, rpc::Era::Legacy)),
            json!({"jsonrpc":"2.0","id":3,"result":{}})
        );
        assert_eq!(
            parse(&stream_result_line(&id, rpc::Era::Modern))["result"],
            json!({"resultType":"complete"})
        );
    }
}
