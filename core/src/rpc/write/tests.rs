use super::*;
use crate::rpc::{ErrorCode, Reason};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::string::String;
use std::vec;
use std::vec::Vec;

fn seq(n: u64) -> Seq {
    Seq::new(n).unwrap()
}

fn sid(s: &str) -> RequestId {
    RequestId::try_from_str(s).unwrap()
}

/// Writes with `write` into a buffer of exactly `len` bytes, checks every shorter buffer is
/// refused, that the line has no raw newline, and returns the text.
#[track_caller]
fn render(len: usize, write: impl Fn(&mut [u8]) -> Result<usize, BufferTooSmall>) -> String {
    let mut buf = vec![0u8; len + 8];
    let n = write(&mut buf).unwrap();
    assert_eq!(n, len, "the length twin disagrees with the writer");
    for short in 0..len {
        assert_eq!(
            write(&mut buf[..short]),
            Err(BufferTooSmall),
            "buffer of {short}"
        );
    }
    assert_eq!(write(&mut buf[..len]), Ok(len));
    assert!(!buf[..len].contains(&b'\n'), "raw newline in a line");
    String::from_utf8(buf[..len].to_vec()).unwrap()
}

#[track_caller]
fn event_line(ev: &EventNotification<'_>) -> String {
    render(event_len(ev), |out| write_event(ev, out))
}

#[track_caller]
fn error_line(id: Option<&RequestId>, err: &RpcError<'_>) -> String {
    render(error_len(id, err), |out| write_error(id, err, out))
}

#[track_caller]
fn result_line(id: &RequestId, era: Era) -> String {
    render(stream_result_len(id, era), |out| {
        write_stream_result(id, era, out)
    })
}

#[track_caller]
fn check(line: &str, expected: Value) {
    let parsed: Value = serde_json::from_str(line).unwrap();
    assert_eq!(parsed, expected, "{line}");
}

#[test]
fn event_notification_golden_line() {
    // The example of SEP-2694, "notifications/tasks/event", byte for byte (compacted).
    let ev = EventNotification {
        task_id: "task-123",
        seq: seq(42),
        event_type: "com.example.content.partial",
        payload: br#"{"content":[{"type":"text","text":"partial text"}]}"#,
    };
    assert_eq!(
        event_line(&ev),
        r#"{"jsonrpc":"2.0","method":"notifications/tasks/event","params":{"seq":42,"taskId":"task-123","type":"com.example.content.partial","payload":{"content":[{"type":"text","text":"partial text"}]},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-123"}}}}"#
    );
    // EV-01, NT-01, NT-02: the related-task _meta names the same task as params.taskId.
    check(
        &event_line(&ev),
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks/event",
            "params": {
                "seq": 42,
                "taskId": "task-123",
                "type": "com.example.content.partial",
                "payload": {"content": [{"type": "text", "text": "partial text"}]},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "task-123"}}
            }
        }),
    );
}

#[test]
fn event_fields_are_escaped_and_the_payload_spliced() {
    let task = "t\"\\\n\r\t\u{0}\u{1f}\u{7f}é😀/";
    let ev = EventNotification {
        task_id: task,
        seq: Seq::MAX,
        event_type: "dev.taskstream.\"x\"",
        payload: br#"{"s":"line\nbreak \"q\" \u2028","n":[1,2.5,-3e2,true,null,{}]}"#,
    };
    let line = event_line(&ev);
    check(
        &line,
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks/event",
            "params": {
                "seq": 9_007_199_254_740_991u64,
                "taskId": task,
                "type": "dev.taskstream.\"x\"",
                "payload": {"s": "line\nbreak \"q\" \u{2028}", "n": [1, 2.5, -300.0, true, null, {}]},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task}}
            }
        }),
    );
    // The payload text appears verbatim.
    assert!(line
        .contains(r#""payload":{"s":"line\nbreak \"q\" \u2028","n":[1,2.5,-3e2,true,null,{}]},"#));
    let ev = EventNotification {
        task_id: "",
        seq: Seq::ZERO,
        event_type: "",
        payload: b"{}",
    };
    check(
        &event_line(&ev),
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/event", "params": {
            "seq": 0, "taskId": "", "type": "", "payload": {},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": ""}}}}),
    );
}

#[test]
fn stream_results_per_era() {
    // DX-01: {} in a legacy session, {"resultType":"complete"} in a modern request.
    assert_eq!(
        result_line(&7.into(), Era::Legacy),
        r#"{"jsonrpc":"2.0","id":7,"result":{}}"#
    );
    assert_eq!(
        result_line(&7.into(), Era::Modern),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete"}}"#
    );
    for (id, value) in [
        (RequestId::from(0), json!(0)),
        (RequestId::from(-1), json!(-1)),
        (RequestId::from(i64::MIN), json!(i64::MIN)),
        (RequestId::from(i64::MAX), json!(i64::MAX)),
        (sid(""), json!("")),
        (sid("a\"b\\c\n\u{1}é"), json!("a\"b\\c\n\u{1}é")),
    ] {
        check(
            &result_line(&id, Era::Legacy),
            json!({"jsonrpc": "2.0", "id": value, "result": {}}),
        );
        check(
            &result_line(&id, Era::Modern),
            json!({"jsonrpc": "2.0", "id": value, "result": {"resultType": "complete"}}),
        );
    }
}

#[test]
fn error_responses() {
    // EG-01, byte for byte as in SEP-2694, "events_gone error" (compacted).
    assert_eq!(
        error_line(
            Some(&10.into()),
            &RpcError::events_gone("task-123", seq(100))
        ),
        r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32010,"message":"Task events are no longer available","data":{"reason":"events_gone","taskId":"task-123","earliestSeq":100}}}"#
    );
    check(
        &error_line(Some(&sid("q\"")), &RpcError::events_gone("t\n", Seq::MAX)),
        json!({"jsonrpc": "2.0", "id": "q\"", "error": {
            "code": -32010, "message": "Task events are no longer available",
            "data": {"reason": "events_gone", "taskId": "t\n", "earliestSeq": 9_007_199_254_740_991u64}}}),
    );
    // -32700 and -32600 with id null.
    assert_eq!(
        error_line(None, &RpcError::new(ErrorCode::ParseError)),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
    );
    check(
        &error_line(None, &RpcError::MESSAGE_TOO_LONG),
        json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32600, "message": "Invalid Request: message too long",
            "data": {"reason": "message_too_long"}}}),
    );
    check(
        &error_line(Some(&3.into()), &RpcError::STREAM_LIMIT),
        json!({"jsonrpc": "2.0", "id": 3, "error": {
            "code": -32602, "message": RpcError::STREAM_LIMIT.message,
            "data": {"reason": "stream_limit"}}}),
    );
    check(
        &error_line(Some(&3.into()), &RpcError::STREAM_ACTIVE),
        json!({"jsonrpc": "2.0", "id": 3, "error": {
            "code": -32602, "message": RpcError::STREAM_ACTIVE.message,
            "data": {"reason": "stream_active"}}}),
    );
    // Every code, every reason, with a message that needs escaping.
    let reasons = [
        Reason::StreamLimit,
        Reason::StreamActive,
        Reason::EventsGone,
        Reason::UnknownTask,
        Reason::InvalidAfter,
        Reason::CursorAhead,
        Reason::MessageTooLong,
    ];
    for code in ErrorCode::ALL {
        let plain = RpcError::new(code);
        check(
            &error_line(Some(&1.into()), &plain),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code.code(), "message": code.message()}}),
        );
        for reason in reasons {
            let err = RpcError {
                code,
                message: "m \"quoted\"\n\u{0}",
                data: ErrorData::Reason(reason),
            };
            check(
                &error_line(None, &err),
                json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": code.code(), "message": "m \"quoted\"\n\u{0}",
                    "data": {"reason": reason.as_str()}}}),
            );
        }
    }
}

#[test]
fn every_control_character_and_the_two_specials_escape_like_serde_json() {
    for b in (0u8..0x20).chain([b'"', b'\\', b'/', 0x7f, b'a']) {
        let text = String::from(char::from(b));
        let mut c = Slice {
            buf: &mut [0u8; 16],
            pos: 0,
        };
        string(&mut c, &text).unwrap();
        let ours = &c.buf[..c.pos];
        assert_eq!(
            core::str::from_utf8(ours).unwrap(),
            serde_json::to_string(&text).unwrap(),
            "byte {b:#04x}"
        );
        if b < 0x20 {
            assert!(
                ours.iter().all(|&o| o >= 0x20),
                "raw control byte {b:#04x} left"
            );
        }
    }
}

#[test]
fn numbers() {
    let around_32_bits = [u32::MAX as u64 - 1, u32::MAX as u64, 1 << 32, (1 << 32) + 9];
    let fixed = [
        0u64,
        1,
        9,
        10,
        99,
        100,
        12345,
        (1 << 53) - 1,
        u64::MAX,
        u64::MAX - 9,
    ];
    for n in fixed.into_iter().chain(around_32_bits) {
        let mut c = Slice {
            buf: &mut [0u8; 32],
            pos: 0,
        };
        unsigned(&mut c, n).unwrap();
        assert_eq!(&c.buf[..c.pos], std::format!("{n}").as_bytes());
    }
    for n in [0i64, -1, -10, i64::MIN, i64::MAX] {
        let mut c = Slice {
            buf: &mut [0u8; 32],
            pos: 0,
        };
        signed(&mut c, n).unwrap();
        assert_eq!(&c.buf[..c.pos], std::format!("{n}").as_bytes());
    }
}

/// `write_unsigned`: the digits `format!` gives, the count it returns, and every buffer
/// shorter than the digits refused.
#[test]
fn write_unsigned_writes_the_digits_and_refuses_short_buffers() {
    for n in [
        0u64,
        7,
        10,
        4_294_967_295,
        4_294_967_296,
        (1 << 53) - 1,
        u64::MAX,
    ] {
        let expected = std::format!("{n}");
        let text = render(expected.len(), |out| write_unsigned(n, out));
        assert_eq!(text, expected);
    }
}

/// A compact JSON object (as the ring stores payloads), built from an arbitrary map.
fn payload() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map(any::<String>(), value, 0..4)
        .prop_map(|m| serde_json::to_string(&Value::Object(m.into_iter().collect())).unwrap())
}

proptest! {
    #[test]
    fn every_u64_is_written_like_format(n in any::<u64>()) {
        let mut c = Slice {
            buf: &mut [0u8; 32],
            pos: 0,
        };
        unsigned(&mut c, n).unwrap();
        let expected = std::format!("{n}");
        prop_assert_eq!(&c.buf[..c.pos], expected.as_bytes());
        prop_assert_eq!(div10(n), (n / 10, (n % 10) as u8));
    }

    #[test]
    fn escaping_matches_serde_json(text in any::<String>()) {
        let mut buf = vec![0u8; text.len() * 6 + 2];
        let mut c = Slice { buf: &mut buf, pos: 0 };
        string(&mut c, &text).unwrap();
        let n = c.pos;
        let mut count = Count(0);
        string(&mut count, &text).unwrap();
        prop_assert_eq!(count.0, n);
        prop_assert_eq!(core::str::from_utf8(&buf[..n]).unwrap(), serde_json::to_string(&text).unwrap());
    }

    #[test]
    fn control_heavy_strings_escape_like_serde_json(
        bytes in proptest::collection::vec(prop_oneof![0u8..0x20, Just(b'"'), Just(b'\\'), 0x20u8..0x7f], 0..64),
    ) {
        let text = String::from_utf8(bytes).unwrap();
        let mut buf = vec![0u8; text.len() * 6 + 2];
        let mut c = Slice { buf: &mut buf, pos: 0 };
        string(&mut c, &text).unwrap();
        let n = c.pos;
        prop_assert_eq!(core::str::from_utf8(&buf[..n]).unwrap(), serde_json::to_string(&text).unwrap());
    }

    #[test]
    fn events_parse_back(
        task_id in any::<String>(),
        event_type in any::<String>(),
        seq in 0..=Seq::MAX.get(),
        payload in payload(),
    ) {
        let ev = EventNotification {
            task_id: &task_id,
            seq: Seq::new(seq).expect("in range"),
            event_type: &event_type,
            payload: payload.as_bytes(),
        };
        let mut buf: Vec<u8> = vec![0; event_len(&ev)];
        let n = write_event(&ev, &mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert!(!buf.contains(&b'\n'));
        let parsed: Value = serde_json::from_slice(&buf).unwrap();
        let payload: Value = serde_json::from_str(&payload).unwrap();
        prop_assert_eq!(parsed, json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks/event",
            "params": {
                "seq": seq, "taskId": task_id, "type": event_type, "payload": payload,
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
            }
        }));
    }

    #[test]
    fn errors_parse_back(
        id in proptest::option::of(prop_oneof![
            any::<i64>().prop_map(RequestId::from),
            "\\PC{0,30}".prop_map(|s| sid(&s)),
        ]),
        task_id in any::<String>(),
        message in any::<String>(),
        earliest in 0..=Seq::MAX.get(),
    ) {
        let err = RpcError::events_gone(&task_id, seq(earliest)).with_message(&message);
        let mut buf: Vec<u8> = vec![0; error_len(id.as_ref(), &err)];
        write_error(id.as_ref(), &err, &mut buf).unwrap();
        let parsed: Value = serde_json::from_slice(&buf).unwrap();
        let id = match id {
            None => Value::Null,
            Some(RequestId::Number(n)) => json!(n),
            Some(RequestId::String(s)) => json!(s.as_str()),
        };
        prop_assert_eq!(parsed, json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32010, "message": message,
            "data": {"reason": "events_gone", "taskId": task_id, "earliestSeq": earliest}}}));
    }
}
