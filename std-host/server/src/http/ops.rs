//! The operations endpoints (docs/guide.md, "Operating it"): `GET /metrics` (Prometheus
//! text), `GET /healthz` (the process answers: 200) and `GET /readyz` (200 while the store
//! takes writes and the server is not shutting down, else 503 saying why). On the `--http`
//! server beside `/mcp` (`/metrics` behind its bearer tokens and Host check when it has them;
//! the probes open, as an orchestrator's are), and alone at `--metrics-addr` for every
//! transport.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::Response;

use super::{ServeError, Server};
use crate::config::HttpLimits;
use crate::log::log;
use crate::metrics;
use crate::process::Process;

/// The HTTP server's entry: the operations endpoints, else `/mcp` ([`super::handle`]); every
/// response counted by its status class.
pub(super) async fn serve(State(server): State<Arc<Server>>, request: Request) -> Response {
    if let Some(asset) = super::status::asset(&request).filter(|_| server.status_page) {
        let response = super::status::answer(&server, asset, request.headers()).await;
        metrics::METRICS.http_response(response.status().as_u16());
        return response;
    }
    let response = match ops_path(&request) {
        Some(path) => {
            let headers = request.headers();
            let allowed = path != Path::Metrics
                || (server.origins.allows(
                    headers.get(header::HOST).map(HeaderValue::as_bytes),
                    headers.get(header::ORIGIN).map(HeaderValue::as_bytes),
                ) && server.tokens.as_ref().is_none_or(|t| {
                    t.principal(
                        headers
                            .get(header::AUTHORIZATION)
                            .map(HeaderValue::as_bytes),
                    )
                    .is_some()
                }));
            if allowed {
                answer(&server.process, path).await
            } else {
                let mut r = plain(
                    StatusCode::UNAUTHORIZED,
                    "a valid bearer token is required\n",
                );
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
        }
        None => super::handle(State(server), request).await,
    };
    metrics::METRICS.http_response(response.status().as_u16());
    response
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Metrics,
    Health,
    Ready,
}

fn ops_path(request: &Request) -> Option<Path> {
    if request.method() != Method::GET {
        return None;
    }
    match request.uri().path() {
        "/metrics" => Some(Path::Metrics),
        "/healthz" => Some(Path::Health),
        "/readyz" => Some(Path::Ready),
        _ => None,
    }
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = Response::new(Body::from(text.to_owned()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

async fn answer(process: &Arc<Process>, path: Path) -> Response {
    match path {
        Path::Metrics => {
            // Off the runtime: a scrape reads the store, which for PostgreSQL is a blocking
            // client (that may not run on a runtime's thread).
            let p = Arc::clone(process);
            let text = tokio::task::spawn_blocking(move || {
                metrics::encode(&p.store, p.readiness().is_ok())
            })
            .await;
            let Ok(text) = text else {
                return plain(StatusCode::INTERNAL_SERVER_ERROR, "metrics failed\n");
            };
            let mut r = Response::new(Body::from(text));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            r
        }
        Path::Health => plain(StatusCode::OK, "ok\n"),
        Path::Ready => match process.readiness() {
            Ok(()) => plain(StatusCode::OK, "ready\n"),
            Err(why) => plain(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("not ready: {why}\n"),
            ),
        },
    }
}

/// `--metrics-addr`: binds `addr` now, then serves only the operations endpoints (no auth: bind
/// it where only the scraper and the orchestrator reach) on a thread of its own for the life
/// of the process. Logs `metrics on http://ADDR/metrics`.
///
/// # Errors
/// [`ServeError::Http`] when the address cannot be used or the thread cannot start.
pub(crate) fn serve_ops(process: Arc<Process>, addr: &str) -> Result<(), ServeError> {
    let fail = |m: String| ServeError::Http(m);
    let bind: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| fail(format!("--metrics-addr {addr}: {e}")))?
        .next()
        .ok_or_else(|| fail(format!("--metrics-addr {addr}: no address")))?;
    let listener = std::net::TcpListener::bind(bind)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| fail(format!("--metrics-addr {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| fail(format!("--metrics-addr {addr}: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("starting the metrics runtime: {e}")))?;
    log!(Info, "metrics on http://{local}/metrics");
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    log!(Error, "--metrics-addr {local}: cannot serve");
                    return;
                };
                let app = axum::Router::new().fallback(move |request: Request| {
                    let process = Arc::clone(&process);
                    async move {
                        let r = match ops_path(&request) {
                            Some(path) => answer(&process, path).await,
                            None => plain(StatusCode::NOT_FOUND, "not found\n"),
                        };
                        metrics::METRICS.http_response(r.status().as_u16());
                        r
                    }
                });
                let limits = HttpLimits {
                    max_connections: 64,
                    ..HttpLimits::default()
                };
                super::conn::serve(
                    listener,
                    app,
                    limits,
                    std::future::pending(),
                    std::time::Duration::ZERO,
                )
                .await;
            });
        })
        .map_err(|e| fail(format!("starting the metrics thread: {e}")))?;
    Ok(())
}
