//! `taskstream serve --http HOST:PORT`: MCP Streamable HTTP at `/mcp`, both eras, as a thin
//! adapter over the same protocol engine that serves stdio (docs/interface.md, "Streamable HTTP").
//!
//! - **2026-07-28**: every `POST` is a connection of its own (stateless): a fresh engine
//!   connection of the request's principal answers it. `Mcp-Method`, and `Mcp-Name` for
//!   `tools/call` and `tasks/*`, must match the body (else -32020 HeaderMismatch, HTTP 400).
//!   `tasks/stream` is answered `text/event-stream`: events, the response, the end.
//!   `GET` and `DELETE` get 405.
//! - **2025-11-25**: `initialize` opens a session (`Mcp-Session-Id`), an engine connection
//!   that lives until `DELETE` (which ends the session, never its tasks). `tasks/stream` is
//!   answered as SSE with `id: N-SEQ` on its events and a priming event; a `GET` with
//!   `Last-Event-ID` resumes that stream right after that event, through the core's resume
//!   decision, so a cursor that retention passed gets `events_gone`, never an empty 200.
//!   A plain `GET` opens the session's stream of server notifications.
//!
//! **Architecture Invariant:** the async runtime never blocks: every call into the engine (which
//! may write the WAL and `fdatasync`) and every stream pump (which may read sled) runs on
//! `spawn_blocking`; the runtime's threads only move bytes and wait on wake-ups.
//!
//! Security (in this order, before the body is read): `Host` / `Origin` (403), the bearer
//! token (401) — a token of `--auth-token-file`, or an OAuth access token (`oauth.rs`: 401,
//! or 403 for a missing scope) —, the method and `Content-Type` (405, 415), then the body
//! limit (413). With `--oauth-issuer`, the metadata document is served (after the `Host` /
//! `Origin` check, without a token).
//!
//! Why one file past ~600 lines: it is the `/mcp` handler, one request's path from the checks
//! above to the engine and back, read in the order a request takes; the parts that stand on
//! their own are the files beside it (`route`, `streams`, `sse`, `conn`, `security`, `oauth`,
//! `ops`).

mod conn;
mod jwt_ring;
mod oauth;
mod ops;
mod route;
mod security;
mod sse;
mod status;
mod streams;

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use taskstream_core::rpc::ErrorCode;
use taskstream_core::RequestId;

use crate::config::{HttpConfig, HttpLimits};
use crate::engine::ConnectionState;
use crate::error::ServeError;
use crate::log::log;
use crate::process::Process;
use crate::wire::era::Session;
use crate::wire::ServerError;
pub(crate) use ops::serve_ops;
use route::Router;
use security::{Origins, Tokens};

/// The session header (2025-11-25).
const SESSION: &str = "mcp-session-id";
/// Request bodies up to this size (declared) are not counted in `--max-body-memory-bytes`.
const SMALL_BODY: usize = 16 * 1024;
/// The protocol version header (both eras).
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Streams a session remembers for `Last-Event-ID`.
const HISTORY: usize = 1024;
/// A session unused this long may be evicted when the session limit is reached.
const IDLE_SESSION: Duration = Duration::from_secs(600);
/// Threads for blocking work (engine calls, stream pumps).
const BLOCKING_THREADS: usize = 32;
/// How long shutdown waits for open responses.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Process-wide HTTP state.
struct Server {
    process: Arc<Process>,
    tokens: Option<Tokens>,
    /// `--oauth-issuer`: the resource server (exclusive with `tokens`).
    oauth: Option<Arc<oauth::OAuth>>,
    origins: Origins,
    max_body: usize,
    max_sessions: usize,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// Active streams per principal, both eras (at most `--max-principal-streams` each).
    stream_counts: sse::StreamCounts,
    /// Bounds on connections, requests and streams.
    limits: HttpLimits,
    /// Request bodies in memory across all connections, in KiB (`--max-body-memory-bytes`).
    body_budget: Arc<tokio::sync::Semaphore>,
    /// Serve the status page (`GET /`, `/status.js`, `/status.json`); off with
    /// `--no-status-page`.
    status_page: bool,
}

/// A 2025-11-25 session: one engine connection.
struct HttpSession {
    principal: String,
    shared: Arc<ConnectionState>,
    lifecycle: Mutex<Session>,
    router: Router,
    streams: Mutex<streams::History>,
    next_stream: AtomicU64,
    last_used: Mutex<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves MCP Streamable HTTP until SIGINT or SIGTERM, then stops the process's tasks.
///
/// # Errors
/// [`ServeError::Http`] when the address cannot be used (or is refused: non-loopback without
/// tokens), the token file is bad, or the runtime cannot start.
pub fn serve_http(process: Arc<Process>, http: &HttpConfig) -> Result<(), ServeError> {
    let fail = |m: String| ServeError::Http(m);
    let addr: SocketAddr = http
        .bind
        .to_socket_addrs()
        .map_err(|e| fail(format!("--http {}: {e}", http.bind)))?
        .next()
        .ok_or_else(|| fail(format!("--http {}: no address", http.bind)))?;
    let tokens = match &http.auth_token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| fail(format!("--auth-token-file: {e}")))?;
            Some(Tokens::parse(&text).map_err(|e| fail(format!("--auth-token-file: {e}")))?)
        }
        None => None,
    };
    if !addr.ip().is_loopback() && tokens.is_none() && http.oauth.is_none() {
        return Err(fail(format!(
            "--http {addr}: a non-loopback address needs --auth-token-file or --oauth-issuer"
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("http")
        // Engine calls and stream pumps are short; a bounded pool keeps a burst of a thousand
        // streams from becoming a thousand threads (they queue instead).
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .map_err(|e| fail(format!("starting the runtime: {e}")))?;
    let result = runtime.block_on(async {
        let oauth = match &http.oauth {
            Some(config) => {
                let o = oauth::OAuth::start(config).await.map_err(fail)?;
                o.spawn_refresh();
                Some(o)
            }
            None => None,
        };
        match (&tokens, &oauth) {
            (Some(t), _) => log!(Info, "auth: bearer tokens of --auth-token-file ({t:?})"),
            (None, Some(_)) => {}
            (None, None) => log!(
                Info,
                "auth: none (loopback only): every client is principal {}",
                process.config.principal
            ),
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| fail(format!("--http {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| fail(format!("--http {addr}: {e}")))?;
        let server = Arc::new(Server {
            origins: Origins::new(local, &http.allowed_origins),
            process: Arc::clone(&process),
            tokens,
            oauth,
            max_body: http.max_body_bytes,
            max_sessions: http.max_sessions,
            sessions: Mutex::new(HashMap::new()),
            stream_counts: Arc::new(Mutex::new(HashMap::new())),
            limits: http.limits,
            body_budget: Arc::new(tokio::sync::Semaphore::new(kib(
                http.limits.max_body_memory_bytes,
            ))),
            status_page: http.status_page,
        });
        let app = axum::Router::new()
            .fallback(ops::serve)
            .with_state(Arc::clone(&server));
        let signal = crate::signal::shutdown_signal()?;
        log!(Info, "listening on http://{local}/mcp");
        let stopping = Arc::new(tokio::sync::Notify::new());
        let stop_watcher = {
            let process = Arc::clone(&process);
            let stopping = Arc::clone(&stopping);
            let store = Arc::clone(&process.store);
            let drain = http.drain;
            async move {
                // A signal, or storage failing (fail-stop, as on stdio: every stream is told,
                // then the server exits for its supervisor to restart it into recovery).
                let failed = async {
                    while !store.has_failed() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                };
                tokio::select! {
                    () = signal => {
                        // Not ready at once; still serving for --drain-secs, so a load
                        // balancer takes this server out before its streams end.
                        process.begin_draining();
                        if !drain.is_zero() {
                            log!(Info, "draining for {} s (/readyz answers 503)", drain.as_secs());
                            tokio::time::sleep(drain).await;
                        }
                    }
                    () = failed => log!(Error, "storage failed; every client is told; the server stops (restart it to recover)"),
                }
                log!(Info, "shutting down");
                // Ends every open stream: they see the flag when woken.
                process.begin_shut_down();
                stopping.notify_one();
            }
        };
        // Stops accepting once told to, then gives open responses a bounded grace period.
        let watcher = tokio::spawn(stop_watcher);
        let stopped = async move { stopping.notified().await };
        conn::serve(listener, app, http.limits, stopped, SHUTDOWN_GRACE).await;
        watcher.abort();
        Ok(())
    });
    let p = Arc::clone(&process);
    // Joining task threads blocks: not on the runtime.
    drop(runtime);
    p.shut_down();
    if p.store.has_failed() {
        std::process::exit(crate::wire::EXIT_STORAGE_FAILED);
    }
    result
}

/// A plain HTTP error with a JSON-RPC error body.
fn http_error(status: StatusCode, code: ErrorCode, message: &str, id: Option<&Value>) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": { "code": code.code(), "message": message },
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn json_response(line: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(line));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn sse_response<S>(body: S) -> Response
where
    S: futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    let mut r = Response::new(Body::from_stream(body));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn status(code: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = code;
    r
}

/// Whether a JSON-RPC line is a response (not a notification).
pub(crate) fn is_response(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line).is_ok_and(|v| v.get("method").is_none())
}

async fn handle(State(server): State<Arc<Server>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let metadata = server
        .oauth
        .as_ref()
        .filter(|o| o.is_metadata_path(parts.uri.path()));
    if parts.uri.path() != "/mcp" && metadata.is_none() {
        return status(StatusCode::NOT_FOUND);
    }
    if !server.origins.allows(
        headers.get(header::HOST).map(HeaderValue::as_bytes),
        headers.get(header::ORIGIN).map(HeaderValue::as_bytes),
    ) {
        log!(Debug, "refused a request with a foreign Host or Origin");
        return http_error(
            StatusCode::FORBIDDEN,
            ErrorCode::InvalidRequest,
            "Forbidden: Host or Origin not allowed",
            None,
        );
    }
    if let Some(o) = metadata {
        return o.metadata(&parts.method);
    }
    let principal = match server.principal_of(headers).await {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    let session = match headers.get(SESSION) {
        None => None,
        Some(v) => match server.session(v.as_bytes(), &principal) {
            Some(s) => Some(s),
            None => {
                return http_error(
                    StatusCode::NOT_FOUND,
                    ErrorCode::InvalidRequest,
                    "Session not found",
                    None,
                )
            }
        },
    };
    if session.is_some() {
        if let Some(refused) = check_session_version(headers) {
            return refused;
        }
    }
    match (parts.method, session) {
        (Method::POST, session) => {
            if !is_json(headers) {
                return http_error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    ErrorCode::InvalidRequest,
                    "Unsupported Media Type: Content-Type must be application/json",
                    None,
                );
            }
            let (body, _budget) = match server.read_body(headers, body).await {
                Ok(b) => b,
                Err(refused) => return refused,
            };
            server.post(headers, body, principal, session).await
        }
        (Method::GET, Some(session)) => server.get(headers, &session),
        (Method::DELETE, Some(session)) => {
            server.end_session(headers);
            session.shared.close();
            status(StatusCode::OK)
        }
        (Method::GET | Method::DELETE, None) => {
            let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            r
        }
        _ => {
            let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

impl Server {
    /// The principal a request acts as, by the bearer token (`--auth-token-file`), the OAuth
    /// access token (`--oauth-issuer`) or, with neither, `--principal`; else the 401 answer.
    async fn principal_of(&self, headers: &HeaderMap) -> Result<String, Response> {
        match (&self.tokens, &self.oauth) {
            (None, Some(o)) => match o.authorize(headers.get(header::AUTHORIZATION)).await {
                Ok(p) => Ok(p),
                Err(refused) => Err(refused),
            },
            (None, None) => Ok(self.process.config.principal.clone()),
            (Some(t), _) => {
                match t.principal(
                    headers
                        .get(header::AUTHORIZATION)
                        .map(HeaderValue::as_bytes),
                ) {
                    Some(p) => Ok(p.to_owned()),
                    None => {
                        let mut r = http_error(
                            StatusCode::UNAUTHORIZED,
                            ErrorCode::InvalidRequest,
                            "Unauthorized: a valid bearer token is required",
                            None,
                        );
                        r.headers_mut()
                            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                        Err(r)
                    }
                }
            }
        }
    }

    /// [`Server::principal_of`] after the Host/Origin check: what `/mcp` and the status
    /// page's data require.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<String, Response> {
        if !self.origins.allows(
            headers.get(header::HOST).map(HeaderValue::as_bytes),
            headers.get(header::ORIGIN).map(HeaderValue::as_bytes),
        ) {
            return Err(http_error(
                StatusCode::FORBIDDEN,
                ErrorCode::InvalidRequest,
                "Forbidden: Host or Origin not allowed",
                None,
            ));
        }
        self.principal_of(headers).await
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Cancels a request whose POST went away before its answer (the client closed it): the
/// engine drops the call, or the waiting `tasks/result`; a task it created runs on.
pub(crate) struct AnswerGuard {
    shared: Arc<ConnectionState>,
    router: Router,
    id_key: String,
    raw_id: Value,
    /// A modern request's connection is its own: closing it stops its plain call.
    own_connection: bool,
    done: AtomicBool,
}

impl AnswerGuard {
    fn answered(&self) {
        self.done.store(true, Ordering::Release);
    }
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        self.router.forget(&self.id_key);
        let answered = self.done.load(Ordering::Acquire);
        if self.own_connection {
            self.shared.close();
        } else if !answered {
            let line = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": self.raw_id, "reason": "the HTTP request was closed" },
            })
            .to_string();
            let shared = Arc::clone(&self.shared);
            // The engine may take locks a request holds while it logs: not on the runtime.
            let _ = tokio::runtime::Handle::try_current().map(|h| {
                h.spawn_blocking(move || {
                    shared.handle_line(&mut Session::default(), line.as_bytes());
                })
            });
        }
    }
}

impl Server {
    fn session(&self, id: &[u8], principal: &str) -> Option<Arc<HttpSession>> {
        let id = std::str::from_utf8(id).ok()?;
        let s = lock(&self.sessions).get(id).cloned()?;
        // Another principal's session does not exist for this one.
        if s.principal != principal {
            return None;
        }
        *lock(&s.last_used) = Instant::now();
        Some(s)
    }

    fn end_session(&self, headers: &HeaderMap) {
        let Some(id) = header_str(headers, SESSION) else {
            return;
        };
        if let Some(s) = lock(&self.sessions).remove(id) {
            for r in lock(&s.streams).map.values() {
                r.superseded.store(true, Ordering::Release);
            }
            log!(Info, "session ended by the client (its tasks run on)");
        }
    }

    async fn post(
        self: &Arc<Self>,
        headers: &HeaderMap,
        body: Bytes,
        principal: String,
        session: Option<Arc<HttpSession>>,
    ) -> Response {
        let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
            return http_error(
                StatusCode::BAD_REQUEST,
                ErrorCode::ParseError,
                "Parse error",
                None,
            );
        };
        let Some(obj) = msg.as_object() else {
            return http_error(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRequest,
                "Invalid Request: one JSON-RPC message per POST (no batches)",
                None,
            );
        };
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = obj.get("id").cloned();
        let params = obj.get("params").cloned().unwrap_or(Value::Null);
        let Some(method) = method else {
            // A response from the client (we send no requests): accepted, nothing to do.
            return status(StatusCode::ACCEPTED);
        };
        // The answer is routed back by its id, so a request must have one the engine echoes
        // as it came (JSON-RPC: a string or an integer, never null).
        if id.as_ref().is_some_and(|i| request_id(i).is_none()) {
            return http_error(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRequest,
                "Invalid Request: id must be a string or an integer",
                None,
            );
        }
        let meta_version = params
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
        let modern = meta_version.is_some();
        if let Some(v) = meta_version.filter(|_| session.is_none()) {
            if let Some(refused) = check_request_version(headers, v) {
                return refused;
            }
        }
        let (shared, own, router) = match (&session, method.as_str()) {
            (Some(s), _) => (Arc::clone(&s.shared), false, s.router.clone()),
            (None, "initialize") if id.is_some() => {
                return self.initialize(body, id, principal).await;
            }
            (None, m) if modern || m == "ping" || id.is_none() => {
                if modern && id.is_some() {
                    if let Err(e) = check_headers(headers, &method, &params) {
                        let rid = id.as_ref().and_then(request_id);
                        return http_error_line(StatusCode::BAD_REQUEST, &e, rid.as_ref());
                    }
                }
                let failures = self.process.failures_of(&principal);
                let router = Router::default();
                let shared = Arc::new(ConnectionState::new(
                    &self.process,
                    &principal,
                    crate::io::Output::unbuffered(Box::new(router.writer())),
                    Some(failures),
                    false,
                    1,
                ));
                (shared, true, router)
            }
            (None, _) => {
                return http_error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidRequest,
                    "Bad Request: send initialize first (2025-11-25, then Mcp-Session-Id), or \
                     a 2026-07-28 request with its _meta",
                    id.as_ref(),
                );
            }
        };
        let Some(id) = id else {
            // A notification: handed to the engine, nothing to answer.
            let s = session.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let mut fresh = Session::default();
                match &s {
                    Some(s) => shared.handle_line(&mut lock(&s.lifecycle), &body),
                    None => shared.handle_line(&mut fresh, &body),
                }
            })
            .await;
            return status(StatusCode::ACCEPTED);
        };
        if method == taskstream_core::rpc::method::TASKS_STREAM {
            if let Some(rid) = request_id(&id) {
                return self
                    .open_stream(shared, session, rid, &params, principal, modern)
                    .await;
            }
        }
        self.call(shared, router, session, id, &params, body, own, headers)
            .await
    }

    /// `initialize` without a session: a new session answers it.
    async fn initialize(
        self: &Arc<Self>,
        body: Bytes,
        id: Option<Value>,
        principal: String,
    ) -> Response {
        {
            let mut sessions = lock(&self.sessions);
            if sessions.len() >= self.max_sessions {
                let now = Instant::now();
                sessions.retain(|_, s| now.duration_since(*lock(&s.last_used)) < IDLE_SESSION);
            }
            if sessions.len() >= self.max_sessions {
                return http_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::InvalidRequest,
                    "Service Unavailable: too many sessions (--max-sessions)",
                    id.as_ref(),
                );
            }
        }
        let router = Router::default();
        let shared = Arc::new(ConnectionState::new(
            &self.process,
            &principal,
            crate::io::Output::unbuffered(Box::new(router.writer())),
            Some(self.process.failures_of(&principal)),
            false,
            self.process.config.max_streams,
        ));
        self.process.register(&shared);
        let session = Arc::new(HttpSession {
            principal,
            shared: Arc::clone(&shared),
            lifecycle: Mutex::new(Session::default()),
            router: router.clone(),
            streams: Mutex::new(streams::History::default()),
            next_stream: AtomicU64::new(1),
            last_used: Mutex::new(Instant::now()),
        });
        let id_key = id
            .as_ref()
            .map_or_else(|| "null".to_owned(), Value::to_string);
        let mut rx = router.expect(&id_key, None);
        let s = Arc::clone(&session);
        let _ = tokio::task::spawn_blocking(move || {
            s.shared.handle_line(&mut lock(&s.lifecycle), &body);
        })
        .await;
        let Some(line) = rx.recv().await else {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        };
        let ok = serde_json::from_slice::<Value>(&line).is_ok_and(|v| v.get("result").is_some());
        let mut r = json_response(line);
        let sid = new_session_id().filter(|_| ok);
        match sid.as_deref().map(HeaderValue::from_str) {
            Some(Ok(v)) => {
                r.headers_mut().insert(SESSION, v);
                if let Some(sid) = sid {
                    lock(&self.sessions).insert(sid, session);
                }
                log!(Info, "legacy session opened over HTTP");
            }
            _ => shared.close(),
        }
        r
    }

    /// Any request but `tasks/stream` and `initialize`: the engine answers on the router; the
    /// answer is the JSON body, or, when progress comes first, the last event of an SSE body.
    #[allow(clippy::too_many_arguments)]
    async fn call(
        self: &Arc<Self>,
        shared: Arc<ConnectionState>,
        router: Router,
        session: Option<Arc<HttpSession>>,
        id: Value,
        params: &Value,
        body: Bytes,
        own: bool,
        headers: &HeaderMap,
    ) -> Response {
        let id_key = id.to_string();
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .map(Value::to_string);
        let wants_sse =
            header_str(headers, "accept").is_some_and(|a| a.contains("text/event-stream"));
        let mut rx = router.expect(&id_key, token.as_deref().filter(|_| wants_sse));
        let guard = AnswerGuard {
            shared: Arc::clone(&shared),
            router,
            id_key,
            raw_id: id,
            own_connection: own,
            done: AtomicBool::new(false),
        };
        let s = session.clone();
        let engine = Arc::clone(&shared);
        // The guard goes with the blocking call and comes back with it: a request dropped
        // while the engine takes it is cancelled after the engine has seen it, not before
        // (where the cancellation would name an id not yet known, and be ignored).
        let handled = tokio::task::spawn_blocking(move || {
            let mut fresh = Session::default();
            match &s {
                Some(s) => engine.handle_line(&mut lock(&s.lifecycle), &body),
                None => engine.handle_line(&mut fresh, &body),
            }
            guard
        })
        .await;
        let Ok(guard) = handled else {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        };
        let Some(first) = rx.recv().await else {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        };
        if is_response(&first) {
            guard.answered();
            return json_response(first);
        }
        sse_response(sse::answer_body(first, rx, guard))
    }
}

fn http_error_line(code: StatusCode, e: &ServerError, id: Option<&RequestId>) -> Response {
    let mut r = json_response(e.line(id));
    *r.status_mut() = code;
    r
}

fn request_id(v: &Value) -> Option<RequestId> {
    match v {
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        Value::String(s) => RequestId::try_from_str(s).ok(),
        _ => None,
    }
}

/// 2026-07-28 HTTP headers (SEP-2243): `Mcp-Method` equals the body's method; `Mcp-Name`
/// equals the tool name of `tools/call` and the `taskId` of `tasks/*` (optional on
/// `tasks/stream`, matched when sent).
fn check_headers(headers: &HeaderMap, method: &str, params: &Value) -> Result<(), ServerError> {
    match header_str(headers, "mcp-method") {
        Some(m) if m == method => {}
        Some(_) => {
            return Err(ServerError::HeaderMismatch(
                "the Mcp-Method header differs from the body's method".into(),
            ))
        }
        None => {
            return Err(ServerError::HeaderMismatch(
                "the Mcp-Method header is missing".into(),
            ))
        }
    }
    let name = if method == "tools/call" {
        params.get("name")
    } else if method.starts_with("tasks/") {
        params.get("taskId")
    } else {
        return Ok(());
    };
    match (
        header_str(headers, "mcp-name"),
        name.and_then(Value::as_str),
    ) {
        (Some(h), Some(b)) if h == b => Ok(()),
        // A body without the field is the engine's to refuse (invalid params).
        (None, None) => Ok(()),
        // `tasks/stream` is the SEP's, not the revision's: its table of `Mcp-Name` sources
        // (and so the official SDK) has no entry for it. A header sent must match; a missing
        // one is accepted.
        (None, Some(_)) if method == taskstream_core::rpc::method::TASKS_STREAM => Ok(()),
        (None, Some(_)) => Err(ServerError::HeaderMismatch(
            "the Mcp-Name header is missing".into(),
        )),
        _ => Err(ServerError::HeaderMismatch(
            "the Mcp-Name header differs from the body".into(),
        )),
    }
}

/// 128 random bits; `None` without randomness (a session id must not be guessable).
fn new_session_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whole KiB covering `bytes` (the unit of the body budget), at least one.
fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}

impl Server {
    /// Reads a request body within its bounds (docs/security.md, "HTTP limits"): refused on
    /// its declared length before a byte is read (413), on a share of the bodies-in-memory
    /// budget it cannot have (503), on bad framing (400), on time (408), or on its real
    /// length (413). The budget's share is held as long as the returned permit.
    async fn read_body(
        &self,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<(Bytes, tokio::sync::OwnedSemaphorePermit), Response> {
        let declared = match headers.get(header::CONTENT_LENGTH) {
            None => None,
            Some(v) => match v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) {
                Some(n) => Some(n),
                None => {
                    return Err(http_error(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::InvalidRequest,
                        "Bad Request: Content-Length is not a number",
                        None,
                    ))
                }
            },
        };
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_large());
        }
        // A body of unknown length may take the whole limit.
        let need = declared.map_or(self.max_body, |n| usize::try_from(n).unwrap_or(usize::MAX));
        // A small body (a JSON-RPC request, nearly always) is not counted: their total is
        // bounded by --max-connections, and a budget spent by large stalled uploads must not
        // refuse every ordinary request.
        let need = if need <= SMALL_BODY {
            0
        } else {
            kib(need).min(kib(self.limits.max_body_memory_bytes))
        };
        let permit = u32::try_from(need)
            .ok()
            .and_then(|n| Arc::clone(&self.body_budget).try_acquire_many_owned(n).ok());
        let Some(permit) = permit else {
            let mut r = http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::InvalidRequest,
                "Service Unavailable: too many request bodies in transit \
                 (--max-body-memory-bytes); retry",
                None,
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(r);
        };
        let limited = http_body_util::Limited::new(body, self.max_body);
        let collected = tokio::time::timeout(
            self.limits.body_timeout,
            http_body_util::BodyExt::collect(limited),
        )
        .await;
        match collected {
            Ok(Ok(c)) => Ok((c.to_bytes(), permit)),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            // Framing lost: the connection cannot carry another request.
            Ok(Err(_)) => Err(body_refusal(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request body is malformed (its framing could not be read)",
            )),
            Err(_) => Err(body_refusal(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the request body did not arrive in time (--body-timeout)",
            )),
        }
    }
}

fn too_large() -> Response {
    body_refusal(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Payload Too Large: the body exceeds --max-body-bytes",
    )
}

/// A refusal of a request whose body was not read to its end: the connection cannot carry
/// another request, so the answer says it closes.
fn body_refusal(status: StatusCode, message: &str) -> Response {
    let mut r = http_error(status, ErrorCode::InvalidRequest, message, None);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The versions a 2025-11-25 session's requests may name in `MCP-Protocol-Version`: the
/// revisions of the handshake era that have Streamable HTTP. A session's requests may name
/// another of them than the one `initialize` settled on (the official SDKs and conformance
/// suite do); what they cannot name is a version this server does not know, or 2026-07-28,
/// which has no sessions.
const SESSION_HEADER_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

/// Every version `MCP-Protocol-Version` may name, for the error's `data.supported`.
fn supported_versions() -> impl Iterator<Item = &'static str> {
    SESSION_HEADER_VERSIONS
        .into_iter()
        .chain([crate::wire::MODERN_VERSION])
}

/// The version `MCP-Protocol-Version` names: `None` when the header is absent (the transport
/// takes such a request as its session's or body's version), `Some(None)` when it is not text.
fn header_version(headers: &HeaderMap) -> Option<Option<&str>> {
    headers
        .get(PROTOCOL_VERSION)
        .map(|v| v.to_str().ok().map(str::trim))
}

/// HX-01, HX-02 in a 2025-11-25 session: `MCP-Protocol-Version`, when sent, names a version of
/// that era ([`SESSION_HEADER_VERSIONS`]); else the 400 to answer with.
fn check_session_version(headers: &HeaderMap) -> Option<Response> {
    match header_version(headers) {
        None => None,
        Some(Some(v)) if SESSION_HEADER_VERSIONS.contains(&v) => None,
        Some(Some(v)) if v == crate::wire::MODERN_VERSION => Some(version_refusal(
            ErrorCode::InvalidRequest,
            "Bad Request: MCP-Protocol-Version 2026-07-28 in a 2025-11-25 session (2026-07-28 \
             has no sessions)",
            Some(v),
        )),
        Some(named) => Some(version_refusal(
            ErrorCode::InvalidRequest,
            "Bad Request: unsupported MCP-Protocol-Version",
            named,
        )),
    }
}

/// HX-01, HX-02 for a 2026-07-28 request: `MCP-Protocol-Version`, when sent, names a version
/// this server speaks and the one of the request's own `_meta`; else the 400 to answer with.
fn check_request_version(headers: &HeaderMap, meta_version: &Value) -> Option<Response> {
    match header_version(headers) {
        None => None,
        Some(Some(v)) if supported_versions().any(|s| s == v) => {
            if meta_version.as_str() == Some(v) {
                None
            } else {
                Some(version_refusal(
                    ErrorCode::HeaderMismatch,
                    &format!(
                        "Bad Request: MCP-Protocol-Version {v} differs from the request's \
                         _meta protocol version"
                    ),
                    Some(v),
                ))
            }
        }
        Some(named) => Some(version_refusal(
            ErrorCode::UnsupportedProtocolVersion,
            "Bad Request: unsupported MCP-Protocol-Version",
            named,
        )),
    }
}

/// 400 with a JSON-RPC error naming the supported versions.
fn version_refusal(code: ErrorCode, message: &str, requested: Option<&str>) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": Value::Null,
        "error": {
            "code": code.code(),
            "message": message,
            "data": {
                "supported": supported_versions().collect::<Vec<_>>(),
                "requested": requested,
            },
        },
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
