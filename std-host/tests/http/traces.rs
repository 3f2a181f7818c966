//! OpenTelemetry traces of `serve --http --otlp-endpoint URL`, received by a small OTLP/HTTP
//! collector in the test and decoded as the protobuf `ExportTraceServiceRequest`: a
//! `tasks/stream` request sent with W3C trace context in `_meta` gets a server span in the
//! client's trace, child of the client's span; the task's appends, the stream and its replay
//! have spans; and the spans still buffered when SIGTERM arrives are exported before the
//! process exits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::client::{wait_status, Server, Session};

/// The OTLP trace messages this test reads (opentelemetry-proto's `trace/v1` and
/// `common/v1`, the fields used here, with their numbers).
mod otlp {
    /// `ExportTraceServiceRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Export {
        #[prost(message, repeated, tag = "1")]
        pub(crate) resource_spans: Vec<ResourceSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ResourceSpans {
        #[prost(message, repeated, tag = "2")]
        pub(crate) scope_spans: Vec<ScopeSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ScopeSpans {
        #[prost(message, repeated, tag = "2")]
        pub(crate) spans: Vec<Span>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Span {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub(crate) span_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub(crate) parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        pub(crate) name: String,
        #[prost(int32, tag = "6")]
        pub(crate) kind: i32,
        #[prost(message, repeated, tag = "9")]
        pub(crate) attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct KeyValue {
        #[prost(string, tag = "1")]
        pub(crate) key: String,
        #[prost(message, optional, tag = "2")]
        pub(crate) value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct AnyValue {
        #[prost(oneof = "Value", tags = "1, 2, 3, 4")]
        pub(crate) value: Option<Value>,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Value {
        #[prost(string, tag = "1")]
        String(String),
        #[prost(bool, tag = "2")]
        Bool(bool),
        #[prost(int64, tag = "3")]
        Int(i64),
        #[prost(double, tag = "4")]
        Double(f64),
    }
}

impl otlp::Span {
    /// The attribute `key` as text (numbers and booleans written out).
    fn attr(&self, key: &str) -> Option<String> {
        let v = self.attributes.iter().find(|a| a.key == key)?;
        Some(match v.value.as_ref()?.value.as_ref()? {
            otlp::Value::String(s) => s.clone(),
            otlp::Value::Bool(b) => b.to_string(),
            otlp::Value::Int(i) => i.to_string(),
            otlp::Value::Double(d) => d.to_string(),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A collector on loopback: every body posted to `/v1/traces`, decoded.
async fn collector() -> (String, Arc<Mutex<Vec<otlp::Span>>>) {
    use prost::Message as _;
    let spans: Arc<Mutex<Vec<otlp::Span>>> = Arc::default();
    let kept = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let export = otlp::Export::decode(body).expect("an ExportTraceServiceRequest");
                let mut kept = kept.lock().expect("spans");
                for r in export.resource_spans {
                    for s in r.scope_spans {
                        kept.extend(s.spans);
                    }
                }
                // An empty ExportTraceServiceResponse: all accepted.
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), spans)
}

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_request_with_traceparent_is_a_child_of_the_clients_span() {
    let (endpoint, spans) = collector().await;
    let server = Server::start(&["--otlp-endpoint", &endpoint]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(3, 0).await;
    wait_status(&s, &task, "completed").await;
    let r = s
        .post(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/stream", "params": {
                "taskId": task,
                "_meta": {
                    "traceparent": format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"),
                    "tracestate": "vendor=opaque",
                },
            }}),
        )
        .send()
        .await
        .expect("tasks/stream");
    assert_eq!(r.status(), 200);
    // The whole replay: `working`, three events, `completed`.
    let body = tokio::time::timeout(Duration::from_secs(20), r.text())
        .await
        .expect("the stream ended")
        .expect("body");
    assert_eq!(
        body.matches("notifications/tasks/event").count(),
        5,
        "{body}"
    );

    // SIGTERM: the server drains, flushes its spans and exits.
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let has = |name: &str| spans.lock().expect("spans").iter().any(|s| s.name == name);
    while !(has("tasks/stream") && has("tasks/stream stream") && has("emit")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "spans not exported: {:?}",
            spans
                .lock()
                .expect("spans")
                .iter()
                .map(|s| s.name.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let spans = spans.lock().expect("spans").clone();
    let request = spans
        .iter()
        .find(|s| s.name == "tasks/stream")
        .expect("the request's span");
    assert_eq!(hex(&request.trace_id), TRACE_ID);
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN);
    assert_eq!(request.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(request.attr("rpc.method").as_deref(), Some("tasks/stream"));
    assert_eq!(request.attr("mcp.era").as_deref(), Some("legacy"));
    assert_eq!(request.attr("mcp.transport").as_deref(), Some("http"));

    // The stream, a child of the request, and its replay, a child of the stream.
    let stream = spans
        .iter()
        .find(|s| s.name == "tasks/stream stream")
        .expect("the stream's span");
    assert_eq!(hex(&stream.trace_id), TRACE_ID);
    assert_eq!(stream.parent_span_id, request.span_id);
    assert_eq!(stream.attr("taskstream.task_id").as_deref(), Some(&*task));
    assert_eq!(
        stream.attr("taskstream.stream.resumed").as_deref(),
        Some("false")
    );
    let replay = spans
        .iter()
        .find(|s| s.name == "tasks/stream replay")
        .expect("the replay's span");
    assert_eq!(replay.parent_span_id, stream.span_id);
    assert_eq!(
        replay.attr("taskstream.replay.events").as_deref(),
        Some("5")
    );
    assert_eq!(
        replay.attr("taskstream.replay.from_seq").as_deref(),
        Some("0")
    );
    assert_eq!(
        replay.attr("taskstream.replay.to_seq").as_deref(),
        Some("4")
    );

    // Each event the task appended, through its commit, with its seq; none in the client's
    // trace (the task ran under tools/call, which sent no trace context).
    let appends: Vec<_> = spans
        .iter()
        .filter(|s| s.attr("taskstream.task_id").as_deref() == Some(&*task))
        .filter(|s| ["create", "emit", "append", "finish"].contains(&s.name.as_str()))
        .collect();
    let mut seqs: Vec<u64> = appends
        .iter()
        .filter_map(|s| s.attr("taskstream.seq")?.parse().ok())
        .collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        [1, 2, 3, 4],
        "the emitted events and the terminal status"
    );
    assert!(appends.iter().any(|s| s.name == "create"));
    assert!(appends.iter().all(|s| hex(&s.trace_id) != TRACE_ID));
    assert_eq!(
        appends
            .iter()
            .find(|s| s.name == "emit")
            .and_then(|s| s.attr("taskstream.store"))
            .as_deref(),
        Some("memory")
    );
}
