//! `tasks/stream` over HTTP: opening a stream as SSE (both eras), the 2025-11-25 session's
//! `GET` streams, and `Last-Event-ID` resumption through the engine's resume decision.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use taskstream_core::rpc::{ErrorCode, Reason};
use taskstream_core::RequestId;

use super::{
    header_str, http_error, json_response, lock, sse, sse_response, status, HttpSession, Server,
    HISTORY,
};
use crate::engine::ConnectionState;
use crate::engine::DetachedStart;
use crate::wire::era::{Era, Session};
use crate::wire::ServerError;

/// The answer when a principal's streams are at `--max-principal-streams` (SE-07): the limit
/// named is the one that was hit, never the connection's.
const PRINCIPAL_STREAM_LIMIT: ServerError = ServerError::Limit {
    reason: Reason::StreamLimit,
    what: "too many active streams for this principal (--max-principal-streams); end one first",
};

/// The `tasks/stream` requests of a session, by stream number, for `Last-Event-ID`.
#[derive(Default)]
pub(super) struct History {
    pub(super) map: HashMap<u64, Resumable>,
    order: VecDeque<u64>,
}

#[derive(Clone)]
pub(super) struct Resumable {
    id: RequestId,
    task_id: String,
    after: Option<u64>,
    pub(super) superseded: Arc<AtomicBool>,
}

impl Server {
    /// `tasks/stream`: admitted and started by the engine (the core's rules), then delivered
    /// as SSE by a producer that waits on the task's wake-up.
    pub(super) async fn open_stream(
        self: &Arc<Self>,
        shared: Arc<ConnectionState>,
        session: Option<Arc<HttpSession>>,
        id: RequestId,
        params: &Value,
        principal: String,
        modern: bool,
    ) -> Response {
        let Some(slot) = self.stream_slot(&principal) else {
            crate::metrics::METRICS.refused(crate::metrics::Limit::Streams);
            return json_response(PRINCIPAL_STREAM_LIMIT.line(Some(&id)));
        };
        let raw = params.to_string().into_bytes();
        let era = if modern {
            match Session::default().era_of(
                "tasks/stream",
                params.as_object().unwrap_or(&serde_json::Map::new()),
            ) {
                Ok(e) => e,
                Err(e) => return json_response(e.line(Some(&id))),
            }
        } else {
            Era::Legacy
        };
        let task_id = params
            .get("taskId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let after = params.get("after").and_then(Value::as_u64);
        let superseded = Arc::new(AtomicBool::new(false));
        let hold =
            sse::StreamHold::unarmed(shared, id.clone(), Arc::clone(&superseded), slot, !modern);
        // The hold goes with the blocking call: if this request is dropped while it runs, the
        // runtime drops the call's result, and with it the hold, releasing what it took.
        let Ok((hold, opened)) = tokio::task::spawn_blocking(move || hold.open(era, &raw)).await
        else {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        };
        match opened {
            Err(e) => json_response(e.line(Some(&id))),
            Ok(DetachedStart::Complete(line)) => json_response(line),
            Ok(DetachedStart::Streaming(detached)) => {
                let (label, first) = match &session {
                    Some(s) => {
                        let n = s.next_stream.fetch_add(1, Ordering::Relaxed);
                        s.remember(
                            n,
                            Resumable {
                                id,
                                task_id,
                                after,
                                superseded,
                            },
                        );
                        (Some(n), Some(sse::priming(&format!("{n}-p"))))
                    }
                    None => (None, None),
                };
                let body =
                    sse::stream_body(Arc::clone(&self.process), detached, label, first, hold);
                sse_response(body)
            }
        }
    }

    /// A place in `principal`'s count of streams (`--max-principal-streams`), if it has one
    /// left.
    fn stream_slot(&self, principal: &str) -> Option<sse::Slot> {
        sse::Slot::take(
            &self.stream_counts,
            principal,
            self.limits.max_principal_streams,
        )
    }

    /// `GET` in a session: with `Last-Event-ID`, the resumption of that `tasks/stream`;
    /// without, the session's notification stream (one at a time: 409 for a second).
    pub(super) fn get(
        self: &Arc<Self>,
        headers: &HeaderMap,
        session: &Arc<HttpSession>,
    ) -> Response {
        if let Some(last) = header_str(headers, "last-event-id") {
            return self.resume(session, last);
        }
        match session.router.open_standalone() {
            Some(rx) => sse_response(sse::standalone_body(rx, Arc::clone(&self.process))),
            None => http_error(
                StatusCode::CONFLICT,
                ErrorCode::InvalidRequest,
                "Conflict: this session's GET stream is already open",
                None,
            ),
        }
    }

    /// Resumes stream `N` after the event `N-SEQ` (or from where it began, `N-p`): the same
    /// request, reopened through the core's decision with `after = SEQ`.
    pub(super) fn resume(self: &Arc<Self>, session: &Arc<HttpSession>, last: &str) -> Response {
        let parsed = last.split_once('-').and_then(|(n, rest)| {
            let n: u64 = n.parse().ok()?;
            let seq = if rest == "p" {
                None
            } else {
                Some(rest.parse::<u64>().ok()?)
            };
            Some((n, seq))
        });
        let Some((n, seq)) = parsed else {
            return http_error(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRequest,
                "Bad Request: Last-Event-ID is not one this server sent",
                None,
            );
        };
        let Some(old) = lock(&session.streams).map.get(&n).cloned() else {
            return http_error(
                StatusCode::NOT_FOUND,
                ErrorCode::InvalidRequest,
                "Not Found: no stream of this session has that event id",
                None,
            );
        };
        let Some(slot) = self.stream_slot(&session.principal) else {
            crate::metrics::METRICS.refused(crate::metrics::Limit::Streams);
            let line = PRINCIPAL_STREAM_LIMIT.line(Some(&old.id));
            return sse_response(futures_util::stream::iter([Ok(sse::event(None, &line))]));
        };
        // The new response takes over the old one's hold.
        old.superseded.store(true, Ordering::Release);
        session.shared.release_detached(&old.id);
        if let Some(key) = crate::wire::task::parse_task_id(&old.task_id) {
            self.process.wake(key);
        }
        let after = match seq {
            Some(s) => Some(s),
            None => old.after,
        };
        let mut params = json!({ "taskId": old.task_id });
        if let (Some(a), Some(obj)) = (after, params.as_object_mut()) {
            obj.insert("after".into(), json!(a));
        }
        let raw = params.to_string().into_bytes();
        let superseded = Arc::new(AtomicBool::new(false));
        let hold = sse::StreamHold::unarmed(
            Arc::clone(&session.shared),
            old.id.clone(),
            Arc::clone(&superseded),
            slot,
            true,
        );
        let server = Arc::clone(self);
        let session = Arc::clone(session);
        let body = futures_util::stream::once(async move {
            // As in `open_stream`: the hold travels with the blocking call.
            let opened = tokio::task::spawn_blocking(move || hold.open(Era::Legacy, &raw)).await;
            (server, session, old, n, superseded, opened)
        });
        let body = futures_util::StreamExt::flat_map(
            body,
            |(server, session, old, n, superseded, opened)| {
                let frames: std::pin::Pin<
                    Box<
                        dyn futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>>
                            + Send,
                    >,
                > = match opened {
                    Ok((hold, Ok(DetachedStart::Streaming(detached)))) => {
                        session.remember(
                            n,
                            Resumable {
                                superseded,
                                ..old.clone()
                            },
                        );
                        Box::pin(sse::stream_body(
                            Arc::clone(&server.process),
                            detached,
                            Some(n),
                            Some(sse::priming(&format!("{n}-p"))),
                            hold,
                        ))
                    }
                    Ok((_, Ok(DetachedStart::Complete(line)))) => {
                        Box::pin(futures_util::stream::iter([Ok(sse::event(None, &line))]))
                    }
                    // events_gone (or another refusal) is the resumed stream's answer: never an
                    // empty success.
                    Ok((_, Err(e))) => Box::pin(futures_util::stream::iter([Ok(sse::event(
                        None,
                        &e.line(Some(&old.id)),
                    ))])),
                    Err(_) => Box::pin(futures_util::stream::empty()),
                };
                frames
            },
        );
        sse_response(body)
    }
}

impl HttpSession {
    pub(super) fn remember(&self, n: u64, r: Resumable) {
        let mut h = lock(&self.streams);
        if h.map.insert(n, r).is_none() {
            h.order.push_back(n);
        }
        while h.order.len() > HISTORY {
            if let Some(old) = h.order.pop_front() {
                h.map.remove(&old);
            }
        }
    }
}
