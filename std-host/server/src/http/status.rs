//! The live status page of the HTTP server (docs/guide.md, "The status page"), on unless
//! `--no-status-page`:
//!
//! - `GET /`: the page (HTML), and `GET /status.js`: its ES module, both served from the
//!   binary (no CDN, no framework). Neither carries data, so neither asks for a token.
//! - `GET /status.json`: the overview the page polls, behind the same Host/Origin check and
//!   the same auth as `/mcp`, and only the tasks of the request's principal: each task's
//!   status, earliest and latest retained seq, and the streams following it with their lag
//!   ([`crate::follow`]).
//!
//! The page's task timeline is no endpoint of its own: the module follows a task through
//! `tasks/stream` on `/mcp` (modern era, over Streamable HTTP), applying the SEP's client rules
//! (in-order seqs, duplicates dropped, resume with `after` when the connection drops).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;
use serde_json::{json, Value};

use super::Server;
use crate::follow;

/// The tasks the overview lists at most (the newest first); `taskCount` says how many there are.
const MAX_LISTED: usize = 200;

const PAGE: &str = include_str!("status/index.html");
const MODULE: &str = include_str!("status/status.js");

/// What the status page serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Asset {
    /// `GET /`.
    Page,
    /// `GET /status.js`.
    Module,
    /// `GET /status.json`.
    Overview,
}

/// The status page's asset `request` asks for, if any.
pub(super) fn asset(request: &Request) -> Option<Asset> {
    if request.method() != Method::GET {
        return None;
    }
    match request.uri().path() {
        "/" => Some(Asset::Page),
        "/status.js" => Some(Asset::Module),
        "/status.json" => Some(Asset::Overview),
        _ => None,
    }
}

fn with_type(body: impl Into<Body>, content_type: &'static str) -> Response {
    let mut r = Response::new(body.into());
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Answers `asset`.
pub(super) async fn answer(server: &Arc<Server>, asset: Asset, headers: &HeaderMap) -> Response {
    match asset {
        Asset::Page => {
            let mut r = with_type(PAGE, "text/html; charset=utf-8");
            r.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                     frame-ancestors 'none'",
                ),
            );
            r
        }
        Asset::Module => with_type(MODULE, "text/javascript; charset=utf-8"),
        Asset::Overview => match server.authenticate(headers).await {
            Ok(principal) => {
                let process = Arc::clone(&server.process);
                let body = tokio::task::spawn_blocking(move || overview(&process, &principal))
                    .await
                    .unwrap_or_else(|_| json!({"error": "the overview could not be read"}));
                with_type(body.to_string(), "application/json")
            }
            Err(refused) => refused,
        },
    }
}

/// The overview of `principal`'s tasks and the streams following them.
fn overview(process: &crate::process::Process, principal: &str) -> Value {
    let mut following: HashMap<String, Vec<u64>> = HashMap::new();
    for (task, next) in follow::snapshot() {
        following.entry(task).or_default().push(next);
    }
    let mut tasks: Vec<_> = process
        .store
        .tasks()
        .into_iter()
        .filter(|t| t.record.principal == principal)
        .collect();
    let count = tasks.len();
    tasks.sort_by(|a, b| {
        b.record
            .created_at
            .cmp(&a.record.created_at)
            .then_with(|| a.record.task_id.cmp(&b.record.task_id))
    });
    tasks.truncate(MAX_LISTED);
    let mut streams_open = 0;
    let listed: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let next = t.retained.next().get();
            let mut lags: Vec<u64> = following
                .get(&t.record.task_id)
                .map(|v| v.iter().map(|&s| follow::lag(next, s)).collect())
                .unwrap_or_default();
            lags.sort_unstable();
            streams_open += lags.len();
            json!({
                "taskId": t.record.task_id,
                "tool": t.record.tool,
                "status": t.record.status.as_str(),
                "createdAt": t.record.created_at.0,
                "lastUpdatedAt": t.record.last_updated_at.0,
                "earliestSeq": (!t.retained.is_empty()).then(|| t.retained.earliest().get()),
                "latestSeq": t.retained.last().map(|s| s.get()),
                "streams": lags.iter().map(|lag| json!({"lag": lag})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "principal": principal,
        "store": process.store.kind(),
        "ready": process.readiness().is_ok(),
        "taskCount": count,
        "streamsOpen": streams_open,
        "tasks": listed,
    })
}
