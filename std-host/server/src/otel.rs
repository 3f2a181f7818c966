//! OpenTelemetry traces (docs/guide.md, "Operating it"): `tracing` spans for a request, an
//! append through its commit, a stream for its lifetime and a stream's replay, exported over
//! OTLP/HTTP (protobuf) when an endpoint is set — `--otlp-endpoint URL`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` — and off otherwise.
//!
//! The spans have their own target (`taskstream::trace`), which the stderr log never shows: with no
//! endpoint no layer is interested in them, so each span site costs one cached check and
//! there is no exporter and no thread. A request's `_meta` may carry W3C trace context
//! (`traceparent`, `tracestate`); its span is then a child of the client's.
//!
//! Attributes are bounded as OpenTelemetry's conventions ask of spans, not as a metric's
//! labels: a task id is an attribute, a principal never is.

use std::ffi::OsString;
use std::sync::{Mutex, OnceLock, PoisonError};

use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of every span here: only the OpenTelemetry layer takes it.
pub(crate) const TARGET: &str = "taskstream::trace";

/// The exporter's provider while traces are on, for [`shutdown`] to flush.
static PROVIDER: OnceLock<Mutex<Option<SdkTracerProvider>>> = OnceLock::new();

/// Where traces go: `--otlp-endpoint` taken out of `args` (before any `--`), else the
/// standard environment variables. `Ok(None)`: traces off.
///
/// # Errors
/// A message for `--otlp-endpoint` with no value or a value that is not an http(s) URL.
pub fn take_endpoint(args: &mut Vec<OsString>) -> Result<Option<Endpoint>, String> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut given = None;
    for i in 0..end {
        let text = args[i].to_string_lossy().into_owned();
        if text == "--otlp-endpoint" {
            let value = args[..end]
                .get(i + 1)
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or("--otlp-endpoint needs a URL, such as http://127.0.0.1:4318")?;
            args.drain(i..i + 2);
            given = Some(value);
            break;
        }
        if let Some(value) = text.strip_prefix("--otlp-endpoint=") {
            given = Some(value.to_owned());
            args.remove(i);
            break;
        }
    }
    if let Some(url) = given {
        return Endpoint::base(&url).map(Some);
    }
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT") {
        return Ok(Some(Endpoint::FromEnvironment));
    }
    Ok(None)
}

/// Where the exporter ([`crate::log::init_traced`]) sends spans.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// `--otlp-endpoint`'s base URL: spans are posted to its `/v1/traces`, as they are for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    Traces(String),
    /// The exporter reads `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (and the other standard `OTEL_EXPORTER_OTLP_*` settings) itself.
    FromEnvironment,
}

impl Endpoint {
    /// The traces URL of a base URL (`http://HOST:PORT` → `http://HOST:PORT/v1/traces`).
    ///
    /// # Errors
    /// A message when `url` is not an http or https URL.
    pub fn base(url: &str) -> Result<Endpoint, String> {
        let url = url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
            return Err(format!(
                "--otlp-endpoint takes an http:// or https:// URL (OTLP/HTTP), not {:?}",
                url.chars().take(64).collect::<String>()
            ));
        }
        Ok(Endpoint::Traces(format!(
            "{}/v1/traces",
            url.trim_end_matches('/')
        )))
    }
}

/// The OpenTelemetry layer for the log's subscriber, exporting to `endpoint` in batches from
/// the exporter's own thread; its provider is kept for [`shutdown`].
///
/// # Errors
/// Why the exporter could not be built.
pub(crate) fn layer(
    endpoint: &Endpoint,
) -> Result<impl tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync, String> {
    use opentelemetry_otlp::WithExportConfig as _;
    let builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    let builder = match endpoint {
        Endpoint::Traces(url) => builder.with_endpoint(url.clone()),
        Endpoint::FromEnvironment => builder,
    };
    let exporter = builder
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("taskstream")
                .build(),
        )
        .build();
    let tracer = provider.tracer("taskstream");
    *PROVIDER
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(provider);
    let only_ours = tracing_subscriber::filter::filter_fn(|m| m.target() == TARGET);
    Ok(tracing_subscriber::Layer::with_filter(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_tracked_inactivity(false),
        only_ours,
    ))
}

/// Exports the spans still buffered and stops the exporter (when traces are on): the last
/// thing a program does, after its server stopped.
pub fn shutdown() {
    let provider = PROVIDER
        .get()
        .and_then(|p| p.lock().unwrap_or_else(PoisonError::into_inner).take());
    if let Some(provider) = provider {
        if let Err(e) = provider.shutdown() {
            eprintln!("taskstream: flushing traces: {e}");
        }
    }
}

/// The `_meta` of a request, read for W3C trace context.
struct Meta<'a>(&'a Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The era's name as a span attribute.
pub(crate) fn era_name(era: crate::wire::era::Era) -> &'static str {
    match era {
        crate::wire::era::Era::Legacy => "legacy",
        crate::wire::era::Era::Modern { .. } => "modern",
    }
}

/// [`request`] for params not parsed yet: they are parsed (for `_meta`) only when traced.
pub(crate) fn request_raw(
    method: &str,
    era: &'static str,
    transport: &'static str,
    raw: &[u8],
) -> Span {
    let span = request(method, era, transport, &Map::new());
    if !span.is_disabled() {
        if let Ok(params) = serde_json::from_slice::<Map<String, Value>>(raw) {
            set_parent(&span, &params);
        }
    }
    span
}

/// Makes `span` a child of the client's span when `params._meta` carries a `traceparent`.
fn set_parent(span: &Span, params: &Map<String, Value>) {
    if let Some(meta) = params.get("_meta").and_then(Value::as_object) {
        if meta.contains_key("traceparent") {
            let cx = TraceContextPropagator::new().extract(&Meta(meta));
            let _ = span.set_parent(cx);
        }
    }
}

/// The span of one request: `method` in `era` (`legacy` or `modern`) over `transport`
/// (`http`, or `lines`: stdio or the data dir's socket), a child of the client's span when
/// `params._meta` carries a valid `traceparent`.
pub(crate) fn request(
    method: &str,
    era: &'static str,
    transport: &'static str,
    params: &Map<String, Value>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = method,
        otel.kind = "server",
        rpc.system = "jsonrpc",
        rpc.method = method,
        mcp.method.name = method,
        mcp.era = era,
        mcp.transport = transport,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        set_parent(&span, params);
    }
    span
}

/// The span of one append (or a task's creation or end) on `store`, through its commit: it
/// ends when the event is durable. Record its seq with [`appended`].
pub(crate) fn append(
    op: &'static str,
    task_id: &str,
    event_type: &str,
    store: &'static str,
) -> Span {
    tracing::info_span!(
        target: TARGET,
        "append",
        otel.name = op,
        taskstream.task_id = task_id,
        taskstream.event_type = event_type,
        taskstream.store = store,
        taskstream.seq = tracing::field::Empty,
    )
}

/// Records the seq an append got.
pub(crate) fn appended(span: &Span, seq: u64) {
    span.record("taskstream.seq", seq);
}

/// The span of a `tasks/stream` stream for as long as it is open, and of its replay (when it
/// starts with retained events) until the replay's last event is delivered.
#[derive(Debug)]
pub(crate) struct StreamSpans {
    /// The stream's span; it ends when dropped.
    pub(crate) _stream: Span,
    /// The replay's span and the seq after its last event.
    pub(crate) replay: Option<(Span, u64)>,
}

impl StreamSpans {
    /// The spans of a stream of `task_id` resumed `after` a seq (`None`: from the start),
    /// replaying `from..to_next` (empty: live from `from`). Children of the current span.
    pub(crate) fn new(task_id: &str, after: Option<u64>, from: u64, to_next: u64) -> StreamSpans {
        let stream = tracing::info_span!(
            target: TARGET,
            "stream",
            otel.name = "tasks/stream stream",
            taskstream.task_id = task_id,
            taskstream.stream.resumed = after.is_some(),
            taskstream.stream.after = after,
            taskstream.stream.from_seq = from,
        );
        if stream.is_disabled() {
            return StreamSpans {
                _stream: stream,
                replay: None,
            };
        }
        let replay = (to_next > from).then(|| {
            let span = tracing::info_span!(
                target: TARGET,
                parent: &stream,
                "replay",
                otel.name = "tasks/stream replay",
                taskstream.task_id = task_id,
                taskstream.replay.events = to_next - from,
                taskstream.replay.from_seq = from,
                taskstream.replay.to_seq = to_next - 1,
            );
            (span, to_next)
        });
        StreamSpans {
            _stream: stream,
            replay,
        }
    }

    /// No spans (traces off, or a stream not traced).
    pub(crate) fn none() -> StreamSpans {
        StreamSpans {
            _stream: Span::none(),
            replay: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_endpoint_is_taken_out_before_the_command_separator_only() {
        let mut a = words(&[
            "--http",
            "x",
            "--otlp-endpoint",
            "http://127.0.0.1:4318/",
            "--",
            "y",
        ]);
        assert_eq!(
            take_endpoint(&mut a),
            Ok(Some(Endpoint::Traces(
                "http://127.0.0.1:4318/v1/traces".into()
            )))
        );
        assert_eq!(a, words(&["--http", "x", "--", "y"]));
        let mut a = words(&["--otlp-endpoint=https://collector:4318"]);
        assert_eq!(
            take_endpoint(&mut a),
            Ok(Some(Endpoint::Traces(
                "https://collector:4318/v1/traces".into()
            )))
        );
        assert!(a.is_empty());
        let mut a = words(&["--otlp-endpoint", "127.0.0.1:4317"]);
        assert!(take_endpoint(&mut a).unwrap_err().contains("http://"));
        let mut a = words(&["--otlp-endpoint"]);
        assert!(take_endpoint(&mut a).is_err());
    }

    #[test]
    fn traceparent_in_meta_makes_the_request_span_a_child_when_traced() {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let exporter = opentelemetry_sdk::trace::InMemorySpanExporterBuilder::new().build();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let params: Map<String, Value> = serde_json::from_str(
            r#"{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}"#,
        )
        .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let span = request("tasks/stream", "modern", "http", &params);
            let cx = span.context();
            assert_eq!(
                cx.span().span_context().trace_id().to_string(),
                "0af7651916cd43dd8448eb211c80319c"
            );
        });
        // (Read before the provider shuts down: that empties the in-memory exporter.)
        let spans = exporter.get_finished_spans().unwrap();
        drop(provider);
        let s = spans.iter().find(|s| s.name == "tasks/stream").unwrap();
        assert_eq!(s.parent_span_id.to_string(), "b7ad6b7169203331");
    }
}
