//! Tools (MCP-DIGEST a.7): listing, validation, plain calls and progress (a.6).

use serde_json::json;

use super::client::{modern, Server};

#[test]
fn tools_list_per_era() {
    let mut s = Server::legacy(&[]);
    let l = s.ok("tools/list", json!({}));
    let names: Vec<&str> = l["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["emit", "run_trace"]);
    for t in l["tools"].as_array().expect("tools") {
        assert_eq!(t["execution"]["taskSupport"], "optional");
        assert_eq!(t["inputSchema"]["type"], "object");
    }
}

#[test]
fn plain_emit_reports_increasing_progress_then_the_result() {
    let mut s = Server::legacy(&[]);
    let id = s.request(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 5, "interval_ms": 1, "payload_bytes": 3},
               "_meta": {"progressToken": "tok"}}),
    );
    let mut last = 0;
    loop {
        let v = s.recv("progress or result", |v| {
            v["method"] == "notifications/progress" || v["id"] == json!(id)
        });
        if v["id"] == json!(id) {
            assert_eq!(v["result"]["isError"], false);
            assert_eq!(v["result"]["content"][0]["type"], "text");
            break;
        }
        assert_eq!(v["params"]["progressToken"], "tok");
        let p = v["params"]["progress"].as_u64().expect("progress");
        assert!(p > last, "progress must increase");
        last = p;
    }
    assert_eq!(last, 5);
    // Nothing after the response.
    s.ok("ping", json!({}));
    assert!(s
        .try_recv(
            |v| v["method"] == "notifications/progress",
            std::time::Duration::ZERO
        )
        .is_none());
}

#[test]
fn bad_arguments_are_tool_errors_naming_the_field() {
    let mut s = Server::legacy(&[]);
    for (args, field) in [
        (json!({}), "count"),
        (json!({"count": -1}), "count"),
        (json!({"count": 1.5}), "count"),
        (json!({"count": 1, "interval_ms": "x"}), "interval_ms"),
        (json!({"count": 1, "bogus": 1}), "bogus"),
    ] {
        let r = s.ok("tools/call", json!({"name": "emit", "arguments": args}));
        assert_eq!(r["isError"], true, "{args}");
        let text = r["content"][0]["text"].as_str().expect("text");
        assert!(text.starts_with(field), "{text} should name {field}");
    }
    let r = s.ok(
        "tools/call",
        json!({"name": "run_trace", "arguments": {"name": "nope"}}),
    );
    assert_eq!(r["isError"], true);
    assert_eq!(
        s.error_code("tools/call", json!({"name": "nope", "arguments": {}})),
        -32602
    );
}

#[test]
fn plain_run_trace_in_a_modern_request_without_the_extension() {
    let mut s = Server::in_memory(&[]);
    let l = s.ok("tools/list", modern(json!({}), false));
    let names = l["tools"][1]["inputSchema"]["properties"]["name"]["enum"].clone();
    let first = names[0].as_str().expect("a bundled trace").to_owned();
    let r = s.ok(
        "tools/call",
        modern(
            json!({"name": "run_trace", "arguments": {"name": first, "speed": 100000}}),
            false,
        ),
    );
    assert_eq!(r["resultType"], "complete");
    assert!(r["content"].is_array(), "{r}");
}

#[test]
fn cancelling_a_plain_call_suppresses_its_response() {
    let mut s = Server::legacy(&[]);
    let id = s.request(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 100, "interval_ms": 50}}),
    );
    s.cancel(id);
    s.ok("ping", json!({}));
    assert!(s
        .try_recv(
            |v| v["id"] == json!(id),
            std::time::Duration::from_millis(300)
        )
        .is_none());
}
