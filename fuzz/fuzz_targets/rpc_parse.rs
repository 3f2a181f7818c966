//! The core's JSON-RPC parser on arbitrary bytes: it never panics, it calls a line "not JSON"
//! exactly when `serde_json` does, and what it extracts from whatever it accepts (id, method,
//! the raw text of params, result, error) means what `serde_json` reads in the line.
//! `tasks/stream` params it accepts hold a string `taskId` and an `after` that is a
//! non-negative integer ≤ 2^53 - 1.
//!
//! The one-pass parse (`rpc::parse_walked`) is checked against the general one on the same
//! bytes: the same verdict, message and error, and the `params` members it finds are those
//! `serde_json` reads (the first of each key; its duplicates flagged).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use taskstream_core::json::{self, Found, Kind, Path};
use taskstream_core::rpc::{
    self, Message, ParseError, RawMessage, RawParseError, RequestPaths, WalkedMessage,
};
use taskstream_core::RequestId;

const WALK_PARAMS: [Path<'static>; 4] = [
    Path::top("taskId"),
    Path::top("after"),
    Path::top("_meta"),
    Path::under(2, "progressToken"),
];
const WALK_PATHS: RequestPaths<'static, 10> = RequestPaths::new(&WALK_PARAMS);

/// The members of `object` with key `key`, keys compared decoded, by `serde_json`: their values.
fn members_named(object: &[u8], key: &str) -> Vec<Value> {
    // serde_json keeps the last of duplicate keys; read the object as pairs instead.
    let pairs: Vec<(String, Value)> = match serde_json::from_slice::<Value>(object) {
        Ok(Value::Object(_)) => json::members(object)
            .map(|m| {
                let k: String = serde_json::from_slice(&[b"\"", m.key, b"\""].concat())
                    .expect("a key of accepted JSON is a JSON string");
                let v: Value = serde_json::from_slice(m.value).expect("a member's value is JSON");
                (k, v)
            })
            .collect(),
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect()
}

/// `parse_walked` against `parse_raw` on the same line.
fn walked_agrees(data: &[u8]) {
    let mut found: [Found<'_>; 10] = Default::default();
    let walked = rpc::parse_walked(data, &WALK_PATHS, &mut found);
    let mut scratch = [0u8; rpc::MAX_METHOD_BYTES];
    let raw = rpc::parse_raw(data, &mut scratch);
    let params = match (&walked, &raw) {
        (
            Ok(WalkedMessage::Request { id, method, params }),
            Ok(RawMessage::Request {
                id: i,
                method: m,
                params: p,
            }),
        ) => {
            assert_eq!((id, params), (i, p));
            assert!(json::unescaped_eq(method, m));
            *params
        }
        (Ok(WalkedMessage::Notification { method, params }), Ok(RawMessage::Notification(n))) => {
            assert!(json::unescaped_eq(method, n.method));
            assert_eq!(*params, n.params);
            *params
        }
        (
            Ok(WalkedMessage::Response { id, outcome }),
            Ok(RawMessage::Response { id: i, outcome: o }),
        ) => {
            assert_eq!((id, outcome), (i, o));
            None
        }
        (Err(RawParseError::NotJson(_)), Err(RawParseError::NotJson(_))) => None,
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            None
        }
        _ => panic!("parse_walked {walked:?}, parse_raw {raw:?}"),
    };
    let Some(params) = params.filter(|p| p.first() == Some(&b'{')) else {
        return;
    };
    let check = |found: Found<'_>, expected: &[Value]| {
        let value = found
            .member
            .map(|m| serde_json::from_slice::<Value>(m.value).expect("a found member is JSON"));
        assert_eq!(value.as_ref(), expected.first());
        assert_eq!(found.duplicate, expected.len() > 1);
    };
    check(rpc::param(&found, 0), &members_named(params, "taskId"));
    check(rpc::param(&found, 1), &members_named(params, "after"));
    let meta = members_named(params, "_meta");
    check(rpc::param(&found, 2), &meta);
    let under = match rpc::param(&found, 2).member {
        Some(m) if m.kind == Kind::Object => members_named(m.value, "progressToken"),
        _ => Vec::new(),
    };
    check(rpc::param(&found, 3), &under);
}

fn id_value(id: &RequestId) -> Value {
    match id {
        RequestId::Number(n) => json!(n),
        RequestId::String(s) => json!(s.as_str()),
    }
}

fn params_value(raw: Option<&[u8]>) -> Option<Value> {
    raw.map(|p| serde_json::from_slice(p).expect("accepted params must be JSON"))
}

fuzz_target!(|data: &[u8]| {
    walked_agrees(data);
    let mut scratch = [0u8; 256];
    let theirs = serde_json::from_slice::<Value>(data);
    let ours = rpc::parse(data, &mut scratch);
    if matches!(ours, Err(ParseError::NotJson(_))) != theirs.is_err() {
        panic!("JSON verdicts differ: ours {ours:?}, serde_json {theirs:?}");
    }
    let Ok(message) = ours else { return };
    let Ok(original) = theirs else { unreachable!() };
    let rebuilt = match &message {
        Message::Request(r) => {
            let mut v = json!({"jsonrpc": "2.0", "id": id_value(&r.id), "method": r.method});
            if let Some(p) = params_value(r.params) {
                v["params"] = p;
            }
            if r.method == rpc::method::TASKS_STREAM {
                if let Ok(p) = rpc::parse_stream_params(r.params.unwrap_or_default()) {
                    let params = &original["params"];
                    assert_eq!(params["taskId"].as_str(), Some(p.task_id.as_str()));
                    match p.after {
                        None => assert!(params.get("after").is_none()),
                        Some(after) => {
                            assert_eq!(params["after"].as_u64(), Some(after.get()));
                            assert!(after.get() <= (1 << 53) - 1);
                        }
                    }
                }
            }
            v
        }
        Message::Notification(n) => {
            let mut v = json!({"jsonrpc": "2.0", "method": n.method});
            if let Some(p) = params_value(n.params) {
                v["params"] = p;
            }
            v
        }
        Message::Response(r) => {
            let mut v = json!({"jsonrpc": "2.0"});
            v["id"] = r.id.as_ref().map_or(Value::Null, id_value);
            match r.outcome {
                rpc::Outcome::Result(raw) => {
                    v["result"] = params_value(Some(raw)).unwrap_or_default()
                }
                rpc::Outcome::Error(raw) => {
                    v["error"] = params_value(Some(raw)).unwrap_or_default()
                }
            }
            v
        }
    };
    // What the core extracted means what the line says. (Compared as parsed, not after a
    // second serialisation: serde_json's default float parsing is not correctly rounded, so
    // `9.0071999999999e40` printed and read back can land on a neighbouring f64; that is
    // serde_json's round trip, not the core's. Regression: corpus/rpc_parse/regression-float.)
    // Members a message of its kind does not have (`params` of a response, say) are
    // ignored by the core and here. Regression: corpus/rpc_parse/regression-response-params.
    serde_json::to_string(&rebuilt).expect("serialise");
    let keys: &[&str] = match &message {
        Message::Request(_) => &["jsonrpc", "id", "method", "params"],
        Message::Notification(_) => &["jsonrpc", "method", "params"],
        Message::Response(_) => &["jsonrpc", "id", "result", "error"],
    };
    for key in keys {
        assert_eq!(
            rebuilt.get(key),
            original.get(key),
            "member {key} changed meaning"
        );
    }
});
