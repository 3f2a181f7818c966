use super::*;
use crate::rpc::{ErrorCode, ErrorData, Reason, RpcError};
use std::string::String;

fn params(task_id: &str, after: Option<u64>) -> StreamParams {
    StreamParams {
        task_id: heapless::String::try_from(task_id).unwrap(),
        after: after.map(|a| Seq::new(a).unwrap()),
    }
}

#[track_caller]
fn check(text: &str, expected: Result<StreamParams, StreamParamsError>) {
    assert_eq!(parse_stream_params(text.as_bytes()), expected, "{text}");
}

/// Every form of `after` we could think of, one row each, with the requirement it covers.
/// `Ok(n)` is the accepted cursor; `None` in the value column means the member is omitted.
#[test]
fn every_form_of_after() {
    use StreamParamsError::*;
    type Row = (
        &'static str,
        Option<&'static str>,
        Result<Option<u64>, StreamParamsError>,
    );
    let rows: &[Row] = &[
        // RS-05: omitted means "from the earliest retained event".
        ("RS-05", None, Ok(None)),
        // RS-01: a non-negative integer.
        ("RS-01", Some("0"), Ok(Some(0))),
        ("RS-01", Some("1"), Ok(Some(1))),
        ("RS-01", Some("42"), Ok(Some(42))),
        ("RS-01", Some(" 7 "), Ok(Some(7))),
        // RS-02 + Seq: the largest value a JSON number carries exactly is the largest seq.
        ("RS-02", Some("9007199254740991"), Ok(Some((1 << 53) - 1))),
        ("RS-02", Some("9007199254740992"), Err(AfterTooLarge)),
        ("RS-02", Some("18446744073709551615"), Err(AfterTooLarge)),
        ("RS-02", Some("18446744073709551616"), Err(AfterTooLarge)),
        (
            "RS-02",
            Some("99999999999999999999999999999999"),
            Err(AfterTooLarge),
        ),
        // RS-01 / RS-02: negative.
        ("RS-01", Some("-1"), Err(AfterNegative)),
        ("RS-01", Some("-9007199254740991"), Err(AfterNegative)),
        ("RS-01", Some("-0"), Err(AfterNegative)),
        ("RS-01", Some("-1.5"), Err(AfterNegative)),
        ("RS-01", Some("-1e2"), Err(AfterNegative)),
        // RS-02: not an integer literal, whatever its value.
        ("RS-02", Some("1.5"), Err(AfterNotInteger)),
        ("RS-02, A-02", Some("1.0"), Err(AfterNotInteger)),
        ("RS-02, A-02", Some("0.0"), Err(AfterNotInteger)),
        ("RS-02", Some("1e2"), Err(AfterNotInteger)),
        ("RS-02", Some("1E2"), Err(AfterNotInteger)),
        ("RS-02", Some("1e+2"), Err(AfterNotInteger)),
        ("RS-02", Some("10e-1"), Err(AfterNotInteger)),
        ("RS-02", Some("0e0"), Err(AfterNotInteger)),
        (
            "RS-02",
            Some("1.7976931348623157e308"),
            Err(AfterNotInteger),
        ),
        // RS-02: not a number.
        ("RS-02", Some(r#""5""#), Err(AfterNotNumber)),
        ("RS-02", Some(r#""""#), Err(AfterNotNumber)),
        ("RS-02", Some("true"), Err(AfterNotNumber)),
        ("RS-02", Some("false"), Err(AfterNotNumber)),
        ("RS-02", Some("[1]"), Err(AfterNotNumber)),
        ("RS-02", Some(r#"{"seq":1}"#), Err(AfterNotNumber)),
        // A-02: `null` is not "omitted" (serde's Option<u64> would say it is).
        ("A-02", Some("null"), Err(AfterNull)),
        // Not JSON at all (a real line is -32700 before its params are read).
        ("RS-02", Some("01"), Err(Malformed)),
        ("RS-02", Some("+1"), Err(Malformed)),
        ("RS-02", Some(".5"), Err(Malformed)),
        ("RS-02", Some("1."), Err(Malformed)),
        ("RS-02", Some("0x10"), Err(Malformed)),
        ("RS-02", Some("NaN"), Err(Malformed)),
        ("RS-02", Some("Infinity"), Err(Malformed)),
        ("RS-02", Some("1e400"), Err(Malformed)),
    ];
    for (rule, after, expected) in rows {
        let text = match after {
            None => String::from(r#"{"taskId":"t"}"#),
            Some(a) => std::format!(r#"{{"taskId":"t","after":{a}}}"#),
        };
        let got = parse_stream_params(text.as_bytes());
        let expected = expected.map(|a| params("t", a));
        assert_eq!(got, expected, "{rule}: after = {after:?}");
        // The refusal names a rule the row cites (rows about non-JSON input aside).
        if let Err(e) = got {
            if e != Malformed {
                assert!(rule.contains(e.rule()), "{rule} vs {}: {after:?}", e.rule());
            }
            assert!(e.is_about_after() || e == Malformed);
            let rpc = RpcError::from(e);
            assert_eq!(
                rpc.code.code(),
                -32602,
                "RS-02: every refusal is invalid params"
            );
            if e.is_about_after() {
                assert_eq!(rpc.data, ErrorData::Reason(Reason::InvalidAfter));
                assert!(rpc.message.contains("after"));
            }
        }
        // serde_json agrees on which texts are JSON.
        let json_ok = serde_json::from_str::<serde_json::Value>(&text).is_ok();
        assert_eq!(json_ok, got != Err(Malformed), "{text}");
    }
}

#[test]
fn after_literals_at_the_edges_of_the_range() {
    // Every count of digits up to 17, at its smallest and largest value.
    for digits in 1..=17u32 {
        for n in [
            10u64.pow(digits - 1) * u64::from(digits > 1),
            10u64.pow(digits) - 1,
        ] {
            let text = std::format!(r#"{{"taskId":"t","after":{n}}}"#);
            let expected = if n < (1 << 53) {
                Ok(params("t", Some(n)))
            } else {
                Err(StreamParamsError::AfterTooLarge)
            };
            check(&text, expected);
        }
    }
    // A 10 000-digit integer overflows an f64 and is not JSON; 300 digits is JSON, too large.
    let text = std::format!(r#"{{"taskId":"t","after":{}}}"#, "9".repeat(10_000));
    check(&text, Err(StreamParamsError::Malformed));
    let text = std::format!(r#"{{"taskId":"t","after":{}}}"#, "9".repeat(300));
    check(&text, Err(StreamParamsError::AfterTooLarge));
}

#[test]
fn task_ids() {
    use StreamParamsError::*;
    check(r#"{"taskId":"task-123"}"#, Ok(params("task-123", None)));
    check(r#"{"taskId":""}"#, Ok(params("", None)));
    check(
        r#"{"taskId":"a\"b\\c\/d\u00e9"}"#,
        Ok(params("a\"b\\c/d\u{e9}", None)),
    );
    check(r#"{"t\u0061skId":"t","\u0061fter":-1}"#, Err(AfterNegative));
    check("{}", Err(MissingTaskId));
    check(r#"{"after":1}"#, Err(MissingTaskId));
    check(r#"{"taskid":"t"}"#, Err(MissingTaskId));
    check(r#"{"taskId":1}"#, Err(TaskIdNotString));
    check(r#"{"taskId":null}"#, Err(TaskIdNotString));
    check(r#"{"taskId":["t"]}"#, Err(TaskIdNotString));
    let max = "t".repeat(MAX_TASK_ID_BYTES);
    check(
        &std::format!(r#"{{"taskId":"{max}"}}"#),
        Ok(params(&max, None)),
    );
    let over = "t".repeat(MAX_TASK_ID_BYTES + 1);
    check(
        &std::format!(r#"{{"taskId":"{over}"}}"#),
        Err(TaskIdTooLong),
    );
    let mib = "t".repeat(1 << 20);
    check(&std::format!(r#"{{"taskId":"{mib}"}}"#), Err(TaskIdTooLong));
    // Bounded after decoding: 256 escapes of one byte each fit.
    let escaped = r"\u0074".repeat(MAX_TASK_ID_BYTES);
    check(
        &std::format!(r#"{{"taskId":"{escaped}"}}"#),
        Ok(params(&max, None)),
    );
    // A too-long task id is answered exactly as an unknown task (DX-02, SE-03).
    assert_eq!(RpcError::from(TaskIdTooLong), RpcError::UNKNOWN_TASK);
}

#[test]
fn shape_duplicates_and_unknown_members() {
    use StreamParamsError::*;
    check("[]", Err(NotAnObject));
    check(r#"["t",1]"#, Err(NotAnObject));
    check("null", Err(NotAnObject));
    check("", Err(Malformed));
    check(r#"{"taskId":"t""#, Err(Malformed));
    check(r#"{"taskId":"t","x":tru}"#, Err(Malformed));
    // Duplicates are refused (see the rpc module documentation), also when spelled with escapes.
    check(r#"{"taskId":"a","taskId":"b"}"#, Err(DuplicateMember));
    check(
        r#"{"taskId":"a","after":1,"after":2}"#,
        Err(DuplicateMember),
    );
    check(r#"{"taskId":"a","t\u0061skId":"a"}"#, Err(DuplicateMember));
    // Unknown members are ignored, whatever they hold, duplicates included.
    check(
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","after":-1},"task":{"ttl":1},"taskId":"t","after":3,"x":[1,{"after":"s"}],"x":null}"#,
        Ok(params("t", Some(3))),
    );
    for e in [
        NotAnObject,
        Malformed,
        MissingTaskId,
        TaskIdNotString,
        DuplicateMember,
    ] {
        assert_eq!(ErrorCode::from(e), ErrorCode::InvalidParams);
        assert_eq!(RpcError::from(e).data, ErrorData::None);
    }
}

#[test]
fn cancelled_params() {
    use CancelledParamsError::*;
    #[track_caller]
    fn check(text: &str, expected: Result<RequestId, CancelledParamsError>) {
        assert_eq!(parse_cancelled_params(text.as_bytes()), expected, "{text}");
    }
    check(r#"{"requestId":5}"#, Ok(5.into()));
    check(r#"{"requestId":-5,"reason":"user"}"#, Ok((-5).into()));
    check(
        r#"{"reason":{"not":"a string"},"requestId":"r\u00e9q"}"#,
        Ok(RequestId::try_from_str("r\u{e9}q").unwrap()),
    );
    check("{}", Err(MissingRequestId));
    check(r#"{"requestId":null}"#, Err(RequestIdType));
    check(r#"{"requestId":1.5}"#, Err(RequestIdType));
    check(r#"{"requestId":-0}"#, Err(RequestIdType));
    check(r#"{"requestId":true}"#, Err(RequestIdType));
    check(r#"{"requestId":1,"requestId":2}"#, Err(DuplicateMember));
    check(
        &std::format!(r#"{{"requestId":"{}"}}"#, "r".repeat(129)),
        Err(RequestIdTooLong),
    );
    check("[1]", Err(NotAnObject));
    check("{", Err(NotAnObject));
    assert_eq!(ErrorCode::from(MissingRequestId), ErrorCode::InvalidParams);
}

proptest::proptest! {
    /// Any `after` in range written by serde_json is read back exactly; any integer above it
    /// or below zero is refused.
    #[test]
    fn after_round_trips_through_serde_json(
        n in proptest::prop_oneof![
            proptest::num::i64::ANY,
            (1i64 << 53) - 5..(1i64 << 53) + 5,
            -5i64..5,
        ],
        id in "\\PC{0,40}",
    ) {
        let text = serde_json::to_string(&serde_json::json!({"taskId": id, "after": n})).unwrap();
        let expected = match u64::try_from(n) {
            Ok(v) if v < (1 << 53) => Ok(params(&id, Some(v))),
            Ok(_) => Err(StreamParamsError::AfterTooLarge),
            Err(_) => Err(StreamParamsError::AfterNegative),
        };
        proptest::prop_assert_eq!(parse_stream_params(text.as_bytes()), expected);
    }
}

/// Wire messages are written for the client: they name the problem, never the internal
/// requirement IDs (`RS-01`, `A-02`) of the chapter.
#[test]
fn messages_cite_no_requirement_ids() {
    use StreamParamsError::*;
    for e in [
        Malformed,
        NotAnObject,
        DuplicateMember,
        MissingTaskId,
        TaskIdNotString,
        TaskIdTooLong,
        AfterNull,
        AfterNegative,
        AfterNotInteger,
        AfterNotNumber,
        AfterTooLarge,
    ] {
        let m = e.message();
        let cites = m.as_bytes().windows(5).any(|w| {
            w[0].is_ascii_uppercase()
                && w[1].is_ascii_uppercase()
                && w[2] == b'-'
                && w[3].is_ascii_digit()
                && w[4].is_ascii_digit()
        }) || m.contains("A-0");
        assert!(!cites, "{m}");
        assert!(m.starts_with("Invalid params: "), "{m}");
    }
}
