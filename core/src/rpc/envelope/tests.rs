use super::*;
use crate::rpc::{parse_stream_params, StreamParamsError};
use proptest::prelude::*;
use std::string::String;
use std::vec::Vec;

fn sid(s: &str) -> RequestId {
    RequestId::try_from_str(s).unwrap()
}

/// The `params` members the walked parse is asked for in these tests: the stream's and the
/// cancellation's, and one nested.
const WALK_PARAMS: [Path<'static>; 5] = [
    Path::top("taskId"),
    Path::top("after"),
    Path::top("requestId"),
    Path::top("_meta"),
    Path::under(3, "k"),
];
const WALK_PATHS: RequestPaths<'static, 11> = RequestPaths::new(&WALK_PARAMS);

/// `parse_walked` answers as `parse_raw` (with a scratch of `MAX_METHOD_BYTES`) does: the same
/// message, its method raw, or the same error (a line that is not JSON, the same verdict); the
/// members of `params` it finds are what the member scanner finds; and the stream's and the
/// cancellation's params read from them are what their parsers read from the text.
#[track_caller]
fn check_walked(line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let mut found = Default::default();
    let walked = parse_walked(line, &WALK_PATHS, &mut found);
    let mut scratch = [0u8; MAX_METHOD_BYTES];
    let raw = parse_raw(line, &mut scratch);
    let params = match (&walked, &raw) {
        (
            Ok(WalkedMessage::Request { id, method, params }),
            Ok(RawMessage::Request {
                id: raw_id,
                method: raw_method,
                params: raw_params,
            }),
        ) => {
            assert_eq!(id, raw_id, "{text}");
            assert!(json::unescaped_eq(method, raw_method), "{text}");
            assert_eq!(params, raw_params, "{text}");
            *params
        }
        (Ok(WalkedMessage::Notification { method, params }), Ok(RawMessage::Notification(n))) => {
            assert!(json::unescaped_eq(method, n.method), "{text}");
            assert_eq!(*params, n.params, "{text}");
            *params
        }
        (
            Ok(WalkedMessage::Response { id, outcome }),
            Ok(RawMessage::Response {
                id: raw_id,
                outcome: raw_outcome,
            }),
        ) => {
            assert_eq!((id, outcome), (raw_id, raw_outcome), "{text}");
            return;
        }
        (Err(RawParseError::NotJson(_)), Err(RawParseError::NotJson(_))) => return,
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{text}");
            return;
        }
        _ => panic!("{text}: parse_walked gave {walked:?}, parse_raw {raw:?}"),
    };
    let object = params.filter(|p| p.first() == Some(&b'{'));
    for (i, path) in WALK_PARAMS.iter().enumerate() {
        let parent = if path.parent == Path::TOP {
            object
        } else {
            param(&found, usize::from(path.parent))
                .member
                .filter(|m| m.kind == Kind::Object)
                .map(|m| m.value)
        };
        let mut matching = json::members(parent.unwrap_or_default())
            .filter(|m| json::unescaped_eq(m.key, path.key));
        let expected = Found {
            member: matching.next(),
            duplicate: matching.next().is_some(),
        };
        assert_eq!(param(&found, i), expected, "{text}: path {i}");
    }
    let kind = params.map(|p| {
        if p.first() == Some(&b'{') {
            Kind::Object
        } else {
            Kind::Array
        }
    });
    let text_params = params.unwrap_or(b"{}");
    let stream = crate::rpc::read_stream_params(kind, param(&found, 0), param(&found, 1));
    match (stream, parse_stream_params(text_params)) {
        (Ok(a), Ok(b)) => {
            assert!(json::unescaped_eq(a.task_id, &b.task_id), "{text}");
            assert_eq!(a.after, b.after, "{text}");
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "{text}"),
        (a, b) => panic!("{text}: read_stream_params {a:?}, parse_stream_params {b:?}"),
    }
    let cancelled = crate::rpc::read_cancelled_params(kind, param(&found, 2));
    assert_eq!(
        cancelled.map(|id| id.decode()),
        crate::rpc::parse_cancelled_params(text_params).map(Some),
        "{text}"
    );
}

#[track_caller]
fn check(line: &[u8], expected: Result<Message<'_>, ParseError>) {
    check_walked(line);
    let mut scratch = [0u8; MAX_METHOD_BYTES];
    let got = parse(line, &mut scratch);
    assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(line));
    // The raw parse answers the same: the same kind of message with the same id, or an error
    // with the same code, id and answer-or-not.
    let mut scratch = [0u8; MAX_METHOD_BYTES];
    let raw = parse_raw(line, &mut scratch);
    match (&raw, &expected) {
        (Ok(RawMessage::Request { id, method, params }), Ok(Message::Request(r))) => {
            assert_eq!(id.decode().as_ref(), Some(&r.id));
            assert_eq!((*method, *params), (r.method, r.params));
        }
        (Ok(RawMessage::Notification(n)), Ok(Message::Notification(m))) => assert_eq!(n, m),
        (Ok(RawMessage::Response { id, outcome }), Ok(Message::Response(r))) => {
            assert_eq!(id.and_then(RawId::decode), r.id);
            assert_eq!(*outcome, r.outcome);
        }
        (Err(raw), Err(e)) => {
            assert_eq!(raw.code(), e.code());
            assert_eq!(raw.id().and_then(RawId::decode).as_ref(), e.id());
            assert_eq!(raw.is_answered(), e.is_answered());
            assert_eq!(&ParseError::from(*raw), e);
        }
        _ => panic!(
            "parse_raw gave {raw:?} for {:?}",
            String::from_utf8_lossy(line)
        ),
    }
}

#[allow(clippy::result_large_err)]
fn req<'a>(
    id: RequestId,
    method: &'a str,
    params: Option<&'a str>,
) -> Result<Message<'a>, ParseError> {
    Ok(Message::Request(Request {
        id,
        method,
        params: params.map(str::as_bytes),
    }))
}

#[allow(clippy::result_large_err)]
fn invalid(id: Option<RequestId>, problem: InvalidMessage) -> Result<Message<'static>, ParseError> {
    Err(ParseError::Invalid { id, problem })
}

#[test]
fn requests_notifications_and_responses() {
    check(
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks/stream","params":{"taskId":"t"}}"#,
        req(1.into(), "tasks/stream", Some(r#"{"taskId":"t"}"#)),
    );
    // Member order does not matter; white space inside params is kept as written.
    check(
        br#" { "params" : { "taskId" : "t" , "after" : 3 } , "method" : "tasks/stream" , "id" : "abc" , "jsonrpc" : "2.0" } "#,
        req(sid("abc"), "tasks/stream", Some(r#"{ "taskId" : "t" , "after" : 3 }"#)),
    );
    check(
        br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m","params":[1,2]}"#,
        req(i64::MIN.into(), "m", Some("[1,2]")),
    );
    check(
        br#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}"#,
        req(i64::MAX.into(), "m", None),
    );
    check(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        Ok(Message::Notification(Notification {
            method: "notifications/cancelled",
            params: Some(br#"{"requestId":1}"#),
        })),
    );
    check(
        br#"{"jsonrpc":"2.0","id":7,"result":{"x":1}}"#,
        Ok(Message::Response(Response {
            id: Some(7.into()),
            outcome: Outcome::Result(br#"{"x":1}"#),
        })),
    );
    check(
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#,
        Ok(Message::Response(Response {
            id: None,
            outcome: Outcome::Error(br#"{"code":-32700,"message":"m"}"#),
        })),
    );
    // Unknown members are ignored, wherever they are.
    check(
        br#"{"x":[1,{"y":"}"}],"jsonrpc":"2.0","id":2,"method":"ping","z":null}"#,
        req(2.into(), "ping", None),
    );
}

#[test]
fn escapes_are_decoded_in_method_id_and_keys() {
    check(
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks\/stream"}"#,
        req(1.into(), "tasks/stream", None),
    );
    check(
        br#"{"jsonrpc":"2.0","id":1,"method":"\u0074asks/str\u0065am"}"#,
        req(1.into(), "tasks/stream", None),
    );
    check(
        br#"{"jsonrpc":"2\u002e0","i\u0064":"a\"b\\c\u00e9\ud83d\ude00","m\u0065thod":"m"}"#,
        req(sid("a\"b\\c\u{e9}\u{1f600}"), "m", None),
    );
    // A key that only looks like a known one after decoding is that key.
    check(
        br#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#,
        invalid(Some(1.into()), InvalidMessage::DuplicateMember),
    );
}

#[test]
fn not_json_is_a_parse_error_with_null_id() {
    // -32700 (MCP-DIGEST a.2; INTERFACE Errors).
    for line in [
        &b""[..],
        b" ",
        b"{",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"",
        b"{\"x\":tru,\"id\":2}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"} x",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",}",
        b"{'jsonrpc':'2.0'}",
        b"{\"a\":\"\\ud800\"}",
        b"{\"a\":\"\t\"}",
        b"{\"a\":1e400}",
    ] {
        let mut scratch = [0u8; 16];
        let err = parse(line, &mut scratch).unwrap_err();
        assert!(
            matches!(err, ParseError::NotJson(JsonError::Syntax { .. })),
            "{line:?}: {err:?}"
        );
        assert_eq!(err.code(), ErrorCode::ParseError);
        assert_eq!(err.id(), None);
        assert!(err.is_answered());
    }
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
        Err(ParseError::NotJson(JsonError::Utf8)),
    );
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}",
        Err(ParseError::NotJson(JsonError::Utf8)),
    );
}

#[test]
fn deep_nesting_and_huge_numbers_are_refused_without_recursion() {
    // 100 000 levels: refused by the iterative validator, as serde_json refuses them.
    let deep = "[".repeat(100_000);
    check(
        deep.as_bytes(),
        Err(ParseError::NotJson(JsonError::TooDeep)),
    );
    let deep_params = std::format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{}{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    check(
        deep_params.as_bytes(),
        Err(ParseError::NotJson(JsonError::TooDeep)),
    );
    assert!(serde_json::from_str::<serde_json::Value>(&deep_params).is_err());

    // A 10 000-digit number overflows an f64: not JSON any reader can take (serde_json agrees).
    let digits = "9".repeat(10_000);
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":{digits},"method":"m"}}"#);
    assert!(matches!(
        parse(line.as_bytes(), &mut [0u8; 8]),
        Err(ParseError::NotJson(JsonError::Syntax { .. }))
    ));
    assert!(serde_json::from_str::<serde_json::Value>(&line).is_err());
    // 300 digits is still a (float) JSON number, but not an integer id.
    let line = std::format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":"m"}}"#,
        "9".repeat(300)
    );
    check(line.as_bytes(), invalid(None, InvalidMessage::IdType));
    // 10 000 digits with a fraction stay a finite number: accepted in params.
    let line =
        std::format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"n":0.{digits}}}}}"#);
    let mut scratch = [0u8; 8];
    assert!(matches!(
        parse(line.as_bytes(), &mut scratch),
        Ok(Message::Request(_))
    ));
}

#[test]
fn megabyte_strings() {
    let big = "x".repeat(1 << 20);
    // A 1 MiB task id: the line is a fine request; the stream params refuse the task id,
    // which the host answers as an unknown task (-32602).
    let line = std::format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/stream","params":{{"taskId":"{big}"}}}}"#
    );
    let mut scratch = [0u8; MAX_METHOD_BYTES];
    let Ok(Message::Request(r)) = parse(line.as_bytes(), &mut scratch) else {
        panic!("not a request")
    };
    assert_eq!(r.method, "tasks/stream");
    assert_eq!(
        parse_stream_params(r.params.unwrap()),
        Err(StreamParamsError::TaskIdTooLong)
    );
    // A 1 MiB id cannot be echoed: -32600 with id null.
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":"{big}","method":"m"}}"#);
    check(line.as_bytes(), invalid(None, InvalidMessage::IdTooLong));
    // A 1 MiB method without escapes is borrowed from the line: an unknown method.
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{big}"}}"#);
    check(line.as_bytes(), req(1.into(), &big, None));
    // With an escape it must be decoded, and does not fit: unknown method, -32601 ...
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":1,"method":"\/{big}"}}"#);
    let err = parse(line.as_bytes(), &mut scratch).unwrap_err();
    assert_eq!(err, ParseError::MethodTooLong { id: Some(1.into()) });
    assert_eq!(
        (err.code(), err.is_answered()),
        (ErrorCode::MethodNotFound, true)
    );
    // ... and for a notification, no answer at all.
    let line = std::format!(r#"{{"jsonrpc":"2.0","method":"\/{big}"}}"#);
    let err = parse(line.as_bytes(), &mut scratch).unwrap_err();
    assert_eq!(err, ParseError::MethodTooLong { id: None });
    assert!(!err.is_answered());
    check_walked(line.as_bytes());
    // The walked parse, which decodes no method, tells the same lengths apart.
    for n in [MAX_METHOD_BYTES - 1, MAX_METHOD_BYTES] {
        let a = "a".repeat(n);
        for line in [
            std::format!(r#"{{"jsonrpc":"2.0","id":1,"method":"\/{a}"}}"#),
            std::format!(r#"{{"jsonrpc":"2.0","method":"\/{a}"}}"#),
        ] {
            check_walked(line.as_bytes());
        }
    }
}

#[test]
fn invalid_requests_keep_the_id_when_it_could_be_read() {
    use InvalidMessage::*;
    let one = || Some(RequestId::from(1));
    let cases: &[(&str, Option<RequestId>, InvalidMessage)] = &[
        // Batches were removed in 2025-06-18 (MCP-DIGEST a.5).
        (r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#, None, Batch),
        ("[]", None, Batch),
        (r#""tasks/stream""#, None, NotAnObject),
        ("1", None, NotAnObject),
        ("null", None, NotAnObject),
        ("true", None, NotAnObject),
        (r#"{"jsonrpc":"2.0","id":1}"#, one(), NoMethod),
        (r#"{"jsonrpc":"2.0"}"#, None, NoMethod),
        ("{}", None, Version),
        (r#"{"id":1,"method":"m"}"#, one(), Version),
        (r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#, one(), Version),
        (r#"{"jsonrpc":2.0,"id":1,"method":"m"}"#, one(), Version),
        (r#"{"jsonrpc":"2.0 ","id":1,"method":"m"}"#, one(), Version),
        // id: never null (MCP-DIGEST a.2); a string or an integer.
        (r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#, None, IdNull),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#, None, IdType),
        (r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#, None, IdType),
        (r#"{"jsonrpc":"2.0","id":1e2,"method":"m"}"#, None, IdType),
        // `-0` would be answered as `0`: refused, so every accepted id round-trips.
        (r#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#, None, IdType),
        (r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, None, IdType),
        (r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, None, IdType),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#, None, IdType),
        (
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
            None,
            IdType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"m"}"#,
            None,
            IdType,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, one(), MethodType),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            one(),
            MethodType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":["m"]}"#,
            one(),
            MethodType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}"#,
            one(),
            ParamsType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            one(),
            ParamsType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#,
            one(),
            ParamsType,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"m","params":true}"#,
            None,
            ParamsType,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
            one(),
            Ambiguous,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            one(),
            Ambiguous,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"error":"e"}"#, one(), ErrorType),
        (r#"{"jsonrpc":"2.0","result":{}}"#, None, ResponseId),
        (r#"{"jsonrpc":"2.0","id":null,"result":{}}"#, None, IdNull),
        // Duplicates of recognised members are refused; the id is kept unless it is the
        // duplicate.
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            one(),
            DuplicateMember,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            None,
            DuplicateMember,
        ),
        (
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}"#,
            one(),
            DuplicateMember,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"params":{}}"#,
            one(),
            DuplicateMember,
        ),
    ];
    for (line, id, problem) in cases {
        check(line.as_bytes(), invalid(id.clone(), *problem));
        let mut scratch = [0u8; 16];
        let err = parse(line.as_bytes(), &mut scratch).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest, "{line}");
        assert_eq!(err.id(), id.as_ref(), "{line}");
        assert!(err.is_answered());
        // serde_json agrees that each of these is JSON.
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "{line}"
        );
    }
    // Duplicates among members we do not read are not our business.
    check(
        br#"{"jsonrpc":"2.0","id":1,"method":"m","_x":1,"_x":2}"#,
        req(1.into(), "m", None),
    );
}

#[test]
fn string_ids_are_bounded_after_decoding() {
    let max = "i".repeat(MAX_REQUEST_ID_BYTES);
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":"{max}","method":"m"}}"#);
    check(line.as_bytes(), req(sid(&max), "m", None));
    let over = "i".repeat(MAX_REQUEST_ID_BYTES + 1);
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":"{over}","method":"m"}}"#);
    check(line.as_bytes(), invalid(None, InvalidMessage::IdTooLong));
    // 6 escaped bytes decode to one: 128 of them fit.
    let escaped = r"\u0041".repeat(MAX_REQUEST_ID_BYTES);
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":"{escaped}","method":"m"}}"#);
    check(line.as_bytes(), req(sid(&"A".repeat(128)), "m", None));
    check(
        br#"{"jsonrpc":"2.0","id":"","method":"m"}"#,
        req(sid(""), "m", None),
    );
    check(
        br#"{"jsonrpc":"2.0","id":"-0","method":"m"}"#,
        req(sid("-0"), "m", None),
    );
}

/// The id written back for an integer literal the parser accepted, as text.
fn echoed_id(literal: &str) -> Option<String> {
    let line = std::format!(r#"{{"jsonrpc":"2.0","id":{literal},"method":"m"}}"#);
    let mut scratch = [0u8; 16];
    let Ok(Message::Request(r)) = parse(line.as_bytes(), &mut scratch) else {
        return None;
    };
    let mut out = [0u8; 256];
    let n = crate::rpc::write_stream_result(&r.id, crate::rpc::Era::Modern, &mut out).unwrap();
    let text = core::str::from_utf8(&out[..n]).unwrap();
    let start = text.find(r#""id":"#).unwrap() + 5;
    let end = start + text[start..].find([',', '}']).unwrap();
    Some(String::from(&text[start..end]))
}

#[test]
fn every_accepted_integer_id_is_echoed_exactly_as_sent() {
    // `-0` is refused (it would come back as `0`); every other integer that fits is echoed
    // with the literal the client sent.
    check(
        br#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#,
        invalid(None, InvalidMessage::IdType),
    );
    assert_eq!(echoed_id("-0"), None);
    for literal in [
        "0",
        "7",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
    ] {
        assert_eq!(echoed_id(literal).as_deref(), Some(literal));
    }
}

proptest! {
    #[test]
    fn integer_ids_round_trip_or_are_refused(literal in "-?(0|[1-9][0-9]{0,19})") {
        if let Some(echoed) = echoed_id(&literal) {
            prop_assert_eq!(echoed, literal);
        } else {
            prop_assert!(literal == "-0" || literal.parse::<i64>().is_err(), "{}", literal);
        }
    }
}

#[test]
fn method_scratch_is_only_needed_for_escapes() {
    let line = br#"{"jsonrpc":"2.0","id":1,"method":"tasks/stream"}"#;
    assert_eq!(parse(line, &mut []), req(1.into(), "tasks/stream", None));
    let line = br#"{"jsonrpc":"2.0","id":1,"method":"tasks\/stream"}"#;
    assert_eq!(
        parse(line, &mut [0u8; 11]),
        Err(ParseError::MethodTooLong { id: Some(1.into()) })
    );
    assert_eq!(
        parse(line, &mut [0u8; 12]),
        req(1.into(), "tasks/stream", None)
    );
}

// ---- Property tests: an independent classifier on serde_json::Value as the oracle. ----

/// What the oracle expects, from serde_json's view of the line (no duplicate keys generated).
#[derive(Debug, PartialEq)]
enum Class {
    Request(RequestId, String, Option<serde_json::Value>),
    Notification(String, Option<serde_json::Value>),
    Response(Option<RequestId>, bool),
    Invalid(Option<RequestId>, InvalidMessage),
}

fn oracle_id(v: &serde_json::Value) -> Result<RequestId, IdProblem> {
    match v {
        serde_json::Value::Null => Err(IdProblem::Null),
        serde_json::Value::Number(n) => {
            // An integer literal: serde_json keeps those as i64/u64; floats (1.0, 1e2) are f64.
            n.as_i64()
                .filter(|_| !n.is_f64())
                .map(RequestId::Number)
                .ok_or(IdProblem::Type)
        }
        serde_json::Value::String(s) => RequestId::try_from_str(s).map_err(|_| IdProblem::TooLong),
        _ => Err(IdProblem::Type),
    }
}

fn oracle(line: &str) -> Class {
    use serde_json::Value;
    use InvalidMessage::*;
    let v: Value = serde_json::from_str(line).unwrap();
    let obj = match v {
        Value::Object(o) => o,
        Value::Array(_) => return Class::Invalid(None, Batch),
        _ => return Class::Invalid(None, NotAnObject),
    };
    let id = obj.get("id").map(oracle_id);
    let known = id.clone().and_then(Result::ok);
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Class::Invalid(known, Version);
    }
    if let Some(method) = obj.get("method") {
        if obj.contains_key("result") || obj.contains_key("error") {
            return Class::Invalid(known, Ambiguous);
        }
        let id = match id {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(p)) => return Class::Invalid(None, p.into()),
        };
        let Value::String(method) = method else {
            return Class::Invalid(id, MethodType);
        };
        let params = match obj.get("params") {
            None => None,
            Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p.clone()),
            Some(_) => return Class::Invalid(id, ParamsType),
        };
        return match id {
            Some(id) => Class::Request(id, method.clone(), params),
            None => Class::Notification(method.clone(), params),
        };
    }
    let is_error = match (obj.get("result"), obj.get("error")) {
        (Some(_), None) => false,
        (None, Some(Value::Object(_))) => true,
        (None, Some(_)) => return Class::Invalid(known, ErrorType),
        (Some(_), Some(_)) => return Class::Invalid(known, Ambiguous),
        (None, None) => return Class::Invalid(known, NoMethod),
    };
    match (id, is_error) {
        (Some(Ok(id)), _) => Class::Response(Some(id), is_error),
        (Some(Err(IdProblem::Null)), true) => Class::Response(None, true),
        (Some(Err(p)), _) => Class::Invalid(None, p.into()),
        (None, _) => Class::Invalid(None, ResponseId),
    }
}

fn ours(line: &str) -> Class {
    let mut scratch = [0u8; MAX_METHOD_BYTES];
    let value = |raw: &[u8]| serde_json::from_slice::<serde_json::Value>(raw).unwrap();
    match parse(line.as_bytes(), &mut scratch) {
        Ok(Message::Request(r)) => Class::Request(r.id, r.method.into(), r.params.map(value)),
        Ok(Message::Notification(n)) => Class::Notification(n.method.into(), n.params.map(value)),
        Ok(Message::Response(r)) => {
            if let Outcome::Error(raw) = r.outcome {
                assert!(value(raw).is_object());
            }
            Class::Response(r.id, matches!(r.outcome, Outcome::Error(_)))
        }
        Err(ParseError::Invalid { id, problem }) => Class::Invalid(id, problem),
        Err(e) => panic!("{line}: unexpected {e:?}"),
    }
}

fn member(key: &'static str, values: &'static [&'static str]) -> BoxedStrategy<Option<String>> {
    let keys: &'static [&'static str] = match key {
        "jsonrpc" => &["jsonrpc", "json\\u0072pc"],
        "id" => &["id", "\\u0069d"],
        "method" => &["method", "m\\u0065thod"],
        _ => &["params", "result", "error", "_meta"],
    };
    let k = proptest::sample::select(keys);
    let v = proptest::sample::select(values);
    proptest::option::of(
        (k, v, "[ \t]{0,2}").prop_map(|(k, v, ws)| std::format!("\"{k}\"{ws}:{ws}{v}")),
    )
    .boxed()
}

fn envelope() -> impl Strategy<Value = String> {
    let jsonrpc = member(
        "jsonrpc",
        &[r#""2.0""#, r#""2\u002e0""#, r#""1.0""#, "2.0", "null"],
    );
    let id = member(
        "id",
        &[
            "1",
            "-7",
            "0",
            "-0",
            "9223372036854775807",
            "-9223372036854775808",
            r#""abc""#,
            r#""a\"b""#,
            "null",
            "1.5",
            "1.0",
            "1e2",
            "true",
            "{}",
            "[]",
            "99999999999999999999",
            r#""""#,
        ],
    );
    let method = member(
        "method",
        &[
            r#""tasks/stream""#,
            r#""tasks\/stream""#,
            r#""\u00e9""#,
            "5",
            "null",
            "{}",
        ],
    );
    let rest = member(
        "other",
        &[
            "{}",
            "[]",
            r#"{"taskId":"t","after":1}"#,
            r#"{"taskId":"t","taskId":"u"}"#,
            r#"{"after":-1,"taskId":"t"}"#,
            r#"{"t\u0061skId":"\u00e9","after":null}"#,
            r#"{"requestId":"r","_meta":{"k":1,"k":2}}"#,
            r#"{"_meta":[{"k":1}],"requestId":-0,"after":1e2}"#,
            r#"{"requestId":1.5,"_meta":{"k":{"k":3}},"taskId":7}"#,
            r#""x""#,
            "null",
            "1",
            r#"{"code":1,"message":"m"}"#,
        ],
    );
    (jsonrpc, id, method, rest, any::<u64>()).prop_map(|(a, b, c, d, seed)| {
        let mut parts: Vec<String> = [a, b, c, d].into_iter().flatten().collect();
        // A seeded shuffle: member order must not matter.
        let mut s = seed;
        for i in (1..parts.len()).rev() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            parts.swap(i, (s >> 33) as usize % (i + 1));
        }
        std::format!("{{{}}}", parts.join(","))
    })
}

proptest! {
    #[test]
    fn classification_agrees_with_a_serde_json_oracle(line in envelope()) {
        check_walked(line.as_bytes());
        prop_assert_eq!(ours(&line), oracle(&line), "{}", line);
    }

    #[test]
    fn parse_errors_agree_with_serde_json_on_mutated_lines(
        line in envelope(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut bytes = line.into_bytes();
        for (at, b, op) in edits {
            let at = at % (bytes.len() + 1);
            match op {
                0 => bytes.insert(at, b),
                1 if at < bytes.len() => { bytes.remove(at); }
                _ if at < bytes.len() => bytes[at] = b,
                _ => bytes.push(b),
            }
        }
        check_walked(&bytes);
        let mut scratch = [0u8; MAX_METHOD_BYTES];
        let ours_not_json = matches!(parse(&bytes, &mut scratch), Err(ParseError::NotJson(_)));
        let theirs_not_json = serde_json::from_slice::<serde_json::Value>(&bytes).is_err();
        prop_assert_eq!(ours_not_json, theirs_not_json, "{:?}", String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_parse_errors_agree(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        check_walked(&bytes);
        let mut scratch = [0u8; 8];
        let ours_not_json = matches!(parse(&bytes, &mut scratch), Err(ParseError::NotJson(_)));
        let theirs_not_json = serde_json::from_slice::<serde_json::Value>(&bytes).is_err();
        prop_assert_eq!(ours_not_json, theirs_not_json);
    }
}
