use super::*;
use crate::id::RequestId;
use crate::json::JsonError;
use std::collections::BTreeSet;

fn seq(n: u64) -> Seq {
    Seq::new(n).unwrap()
}

#[test]
fn codes_and_standard_messages() {
    let expected = [
        (ErrorCode::ParseError, -32700, "Parse error"),
        (ErrorCode::InvalidRequest, -32600, "Invalid Request"),
        (ErrorCode::MethodNotFound, -32601, "Method not found"),
        (ErrorCode::InvalidParams, -32602, "Invalid params"),
        (ErrorCode::InternalError, -32603, "Internal error"),
        // EG-01
        (
            ErrorCode::EventsGone,
            -32010,
            "Task events are no longer available",
        ),
        // 2026-07-28 Streamable HTTP
        (ErrorCode::HeaderMismatch, -32020, "Header mismatch"),
        // DX-03
        (
            ErrorCode::MissingRequiredClientCapability,
            -32021,
            "Missing required client capability",
        ),
        (
            ErrorCode::UnsupportedProtocolVersion,
            -32022,
            "Unsupported protocol version",
        ),
    ];
    assert_eq!(expected.len(), ErrorCode::ALL.len());
    for (code, number, message) in expected {
        assert_eq!((code.code(), code.message()), (number, message));
        assert_eq!(ErrorCode::from_code(number), Some(code));
        assert_eq!(RpcError::from(code), RpcError::new(code));
        assert_eq!(RpcError::new(code).message, message);
    }
    assert_eq!(ErrorCode::from_code(-32000), None);
    assert_eq!(
        std::format!("{}", ErrorCode::EventsGone),
        "Task events are no longer available (-32010)"
    );
}

#[test]
fn reasons_are_distinct_snake_case() {
    let all = [
        Reason::StreamLimit,
        Reason::StreamActive,
        Reason::EventsGone,
        Reason::UnknownTask,
        Reason::InvalidAfter,
        Reason::CursorAhead,
        Reason::MessageTooLong,
        Reason::TooManyFailures,
        Reason::TaskLimit,
        Reason::WaiterLimit,
    ];
    let names: BTreeSet<&str> = all.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), all.len());
    assert!(names.contains("stream_limit") && names.contains("stream_active"));
    assert!(names.contains("events_gone"));
    for n in names {
        assert!(
            n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{n}"
        );
    }
}

#[test]
fn resume_errors_map_to_events_gone_or_invalid_params() {
    // EG-01: events_gone carries the task and the earliest retained seq.
    let gone = ResumeError::EventsGone { earliest: seq(100) };
    assert_eq!(ErrorCode::from(gone), ErrorCode::EventsGone);
    assert_eq!(
        RpcError::from_resume(gone, "task-123"),
        RpcError {
            code: ErrorCode::EventsGone,
            message: "Task events are no longer available",
            data: ErrorData::EventsGone {
                task_id: "task-123",
                earliest: seq(100)
            },
        }
    );
    assert_eq!(
        RpcError::from_resume(gone, "t"),
        RpcError::events_gone("t", seq(100))
    );
    // a cursor beyond the last seq is invalid params (RS-02).
    let ahead = ResumeError::CursorAhead {
        after: seq(9),
        next: seq(5),
    };
    assert_eq!(ErrorCode::from(ahead), ErrorCode::InvalidParams);
    let rpc = RpcError::from_resume(ahead, "t");
    assert_eq!(rpc.code, ErrorCode::InvalidParams);
    assert_eq!(rpc.data, ErrorData::Reason(Reason::CursorAhead));
}

#[test]
fn parse_errors_map_without_thinking() {
    let cases = [
        (
            ParseError::NotJson(JsonError::Syntax { at: 0 }),
            ErrorCode::ParseError,
        ),
        (ParseError::NotJson(JsonError::Utf8), ErrorCode::ParseError),
        (
            ParseError::NotJson(JsonError::TooDeep),
            ErrorCode::ParseError,
        ),
        (
            ParseError::Invalid {
                id: None,
                problem: InvalidMessage::Batch,
            },
            ErrorCode::InvalidRequest,
        ),
        (
            ParseError::Invalid {
                id: Some(RequestId::from(3)),
                problem: InvalidMessage::NoMethod,
            },
            ErrorCode::InvalidRequest,
        ),
        (
            ParseError::MethodTooLong { id: Some(1.into()) },
            ErrorCode::MethodNotFound,
        ),
    ];
    for (err, code) in cases {
        assert_eq!(err.code(), code);
        let rpc = RpcError::from(&err);
        assert_eq!(rpc.code, code);
        assert_eq!(rpc.data, ErrorData::None);
        assert_eq!(rpc.message, err.message());
    }
    assert_eq!(
        RpcError::from(InvalidMessage::Batch).message,
        "Invalid Request: batches are not supported"
    );
}

#[test]
fn the_canned_errors() {
    for (e, code, reason) in [
        (RpcError::STREAM_LIMIT, -32602, Some(Reason::StreamLimit)),
        (RpcError::STREAM_ACTIVE, -32602, Some(Reason::StreamActive)),
        (RpcError::UNKNOWN_TASK, -32602, Some(Reason::UnknownTask)),
        (
            RpcError::MESSAGE_TOO_LONG,
            -32600,
            Some(Reason::MessageTooLong),
        ),
    ] {
        assert_eq!(e.code.code(), code);
        assert_eq!(e.data, reason.map_or(ErrorData::None, ErrorData::Reason));
    }
    let custom = RpcError::new(ErrorCode::InvalidParams).with_message("Invalid params: x");
    assert_eq!(custom.message, "Invalid params: x");
    assert_eq!(custom.code, ErrorCode::InvalidParams);
}
