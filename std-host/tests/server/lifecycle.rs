//! Lifecycle in both eras (MCP-DIGEST a.3, a.4), framing and error handling (a.2, a.5).

use std::process::Command;

use serde_json::{json, Value};

use super::client::{bin, modern, Server};

#[test]
fn legacy_initialize_echoes_a_supported_version_and_advertises_event_streams() {
    let mut s = Server::in_memory(&[]);
    let r = s.initialize("2025-11-25");
    let result = &r["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(
        result["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}, "eventStreams": {}})
    );
    assert!(result["capabilities"]["tools"].is_object());
    assert_eq!(result["serverInfo"]["name"], "taskstream");
    // A second initialize is refused; the session stays legacy (no resultType).
    assert_eq!(
        s.error_code("initialize", json!({"protocolVersion": "2025-11-25"})),
        -32600
    );
    assert_eq!(s.ok("ping", json!({})), json!({}));
}

/// Tasks first appeared in 2025-11-25: a 2025-06-18 session is offered none, and its tool
/// calls run plainly even with `params.task`.
#[test]
fn a_2025_06_18_session_is_offered_no_tasks() {
    let mut s = Server::in_memory(&[]);
    let r = s.initialize("2025-06-18");
    let result = &r["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert!(result["capabilities"].get("tasks").is_none(), "{r}");
    assert!(result["capabilities"]["tools"].is_object());
    let tools = s.ok("tools/list", json!({}));
    assert!(
        tools["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t.get("execution").is_none())),
        "{tools}"
    );
    for method in [
        "tasks/get",
        "tasks/list",
        "tasks/cancel",
        "tasks/result",
        "tasks/stream",
    ] {
        assert_eq!(
            s.error_code(
                method,
                json!({"taskId": "0123456789abcdef0123456789abcdef"})
            ),
            -32601,
            "{method}"
        );
    }
    let called = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 2}, "task": {"ttl": 60000}}),
    );
    assert!(called.get("task").is_none(), "{called}");
    assert!(called["content"].is_array(), "{called}");
}

#[test]
fn legacy_initialize_offers_the_latest_for_an_unknown_version() {
    let mut s = Server::in_memory(&[]);
    let r = s.initialize("2024-01-01");
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn before_initialize_only_ping_works_without_modern_meta() {
    let mut s = Server::in_memory(&[]);
    assert_eq!(s.ok("ping", json!({})), json!({}));
    // DX-05: neither initialized nor modern: -32602 naming the missing _meta.
    let r = s.call("tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("protocolVersion")),
        "{r}"
    );
}

#[test]
fn modern_discover_and_dressed_results() {
    let mut s = Server::in_memory(&[]);
    let r = s.ok("server/discover", modern(json!({}), false));
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    // The Tasks extension's object is empty, as SEP-2663 defines it and official clients
    // require; event streams are advertised beside it (A-06).
    assert_eq!(
        r["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}, "dev.taskstream/event-streams": {}})
    );
    assert_eq!(r["ttlMs"], 3_600_000);
    assert_eq!(r["cacheScope"], "public");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "taskstream"
    );
    let l = s.ok("tools/list", modern(json!({}), false));
    assert_eq!(l["resultType"], "complete");
    assert!(l["ttlMs"].is_u64() && l["cacheScope"].is_string(), "{l}");
}

#[test]
fn modern_meta_errors() {
    let mut s = Server::in_memory(&[]);
    // DX-05: missing required _meta.
    assert_eq!(s.error_code("server/discover", json!({})), -32602);
    let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    assert_eq!(s.error_code("server/discover", no_caps), -32602);
    // Unknown version: -32022 with supported and requested.
    let old = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01",
                               "io.modelcontextprotocol/clientCapabilities": {}}});
    let r = s.call("server/discover", old);
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(
        r["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2030-01-01"})
    );
}

#[test]
fn initialize_after_modern_requests_selects_legacy_for_good() {
    let mut s = Server::in_memory(&[]);
    s.ok("server/discover", modern(json!({}), false));
    s.initialize("2025-11-25");
    // Now legacy: results are not dressed and server/discover is not a method.
    let l = s.ok("tools/list", modern(json!({}), false));
    assert!(l.get("resultType").is_none(), "{l}");
    assert_eq!(
        s.error_code("server/discover", modern(json!({}), false)),
        -32601
    );
}

#[test]
fn bad_lines_get_errors_and_the_server_reads_on() {
    let mut s = Server::legacy(&["--max-message-bytes", "1024"]);
    s.send_raw(r#"{"jsonrpc":"2.0","id":1,"method""#);
    let r = s.recv("parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(r["id"], Value::Null);
    s.send_raw(r#"{"x":tru,"id":2}"#);
    s.recv("parse error", |v| v["error"]["code"] == -32700);
    s.send_raw(r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#);
    s.recv("batch refused", |v| v["error"]["code"] == -32600);
    s.send_raw(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    s.recv("null id refused", |v| v["error"]["code"] == -32600);
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4000)
    );
    s.send_raw(&long);
    s.recv("too long", |v| v["error"]["code"] == -32600);
    // Unknown notifications are dropped silently; unknown methods are -32601.
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever"}));
    assert_eq!(s.error_code("no/such/method", json!({})), -32601);
    assert_eq!(s.ok("ping", json!({})), json!({}));
    assert!(s.try_recv(|_| true, std::time::Duration::ZERO).is_none());
}

#[test]
fn exits_on_stdin_eof() {
    let mut s = Server::legacy(&[]);
    s.close_stdin();
    assert!(s.wait_exit().success());
    s.wait_stderr("end of input");
}

#[test]
fn help_and_bad_flags() {
    let out = Command::new(bin()).arg("--help").output().expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("serve"));
    let out = Command::new(bin())
        .args(["serve", "--help"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--max-streams"));
    let out = Command::new(bin())
        .args(["serve", "--max-streams", "zero"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(bin()).arg("frobnicate").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn logs_go_to_stderr_as_text_or_as_one_json_object_a_line() {
    let mut s = Server::spawn(&["--in-memory", "--log-format", "json"]);
    s.initialize("2025-11-25");
    let line = s.wait_stderr("legacy session initialized");
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["level"], "INFO", "{v}");
    assert_eq!(v["target"], "taskstream", "{v}");
    assert_eq!(v["fields"]["message"], "legacy session initialized", "{v}");
    assert!(v["timestamp"].is_string(), "{v}");
    // Text (the default) is one line per event, the message in it; stdout stays MCP only.
    let mut s = Server::spawn(&["--in-memory"]);
    s.initialize("2025-11-25");
    let line = s.wait_stderr("legacy session initialized");
    assert!(line.contains("INFO"), "{line}");
    assert!(serde_json::from_str::<Value>(&line).is_err(), "{line}");
    // TASKSTREAM_LOG takes RUST_LOG-style directives ...
    let mut s = Server::spawn_env(
        &["--in-memory"],
        &[("TASKSTREAM_LOG", "off,taskstream=info")],
    );
    s.initialize("2025-11-25");
    s.wait_stderr("legacy session initialized");
    // ... and a value that is not a filter is reported, then the default (info) holds.
    let mut s = Server::spawn_env(&["--in-memory"], &[("TASKSTREAM_LOG", "verbose")]);
    s.wait_stderr("TASKSTREAM_LOG ignored, logging at info");
    s.initialize("2025-11-25");
    s.wait_stderr("legacy session initialized");
    // An unknown format is refused at start, saying what is allowed.
    let mut s = Server::spawn(&["--in-memory", "--log-format", "xml"]);
    s.wait_stderr("--log-format takes text or json");
    assert_eq!(s.wait_exit().code(), Some(2));
}
