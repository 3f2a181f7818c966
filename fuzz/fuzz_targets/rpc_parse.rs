//! The core's JSON-RPC parser on arbitrary bytes: it never panics, it calls a line "not JSON"
//! exactly when `serde_json` does, and what it extracts from whatever it accepts (id, method,
//! the raw text of params, result, error) means what `serde_json` reads in the line.
//! `tasks/stream` params it accepts hold a string `taskId` and an `after` that is a
//! non-negative integer ≤ 2^53 - 1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use taskstream_core::rpc::{self, Message, ParseError};
use taskstream_core::RequestId;

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
