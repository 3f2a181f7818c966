//! The protocol's decisions for one incoming line: parse it with the core, pick the era, and
//! route each request to the file that answers it (`tasks`, `stream`, `plain`, the tools, or
//! the server behind the gateway); the failed-lookup allowance and the running-task limits.
//! It reads and writes only the connection's state and what the process hands it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use taskstream_core::rpc::{self, Message, Reason};
use taskstream_core::RequestId;

use super::state::ConnectionState;
use crate::log::log;
use crate::metrics;
use crate::process::{self, Forward};
use crate::tools;
use crate::wire::era::{self, Codec, Era, Session};
use crate::wire::{self, ServerError};

impl ConnectionState {
    /// Handles one incoming line.
    pub(crate) fn handle_line(self: &Arc<Self>, session: &mut Session, line: &[u8]) {
        let mut scratch = [0u8; rpc::MAX_METHOD_BYTES];
        match rpc::parse(line, &mut scratch) {
            Err(e) => {
                if e.is_answered() {
                    let err = ServerError::Core(rpc::RpcError::from(&e));
                    self.out.send(&err.line(e.id()));
                }
            }
            Ok(Message::Response(_)) => self.response(line),
            Ok(Message::Notification(n)) => {
                self.notification(session, n.method, n.params.unwrap_or(b"{}"));
            }
            Ok(Message::Request(r)) => {
                self.request(session, &r.id, r.method, r.params.unwrap_or(b"{}"));
            }
        }
    }

    fn notification(&self, session: &mut Session, method: &str, raw: &[u8]) {
        match method {
            "notifications/initialized" if session.mark_initialized() => {
                log!(Debug, "client initialized");
            }
            rpc::method::CANCELLED => match rpc::parse_cancelled_params(raw) {
                Ok(id) => self.cancel_request(&id),
                Err(e) => log!(Debug, "ignored notifications/cancelled: {e}"),
            },
            other => {
                if let Some(f) = &self.process.extra.forward {
                    if f.handles(other) {
                        let params = serde_json::from_slice(raw).unwrap_or_default();
                        f.notify(other, params);
                    }
                }
                // Other notifications are dropped silently (JSON-RPC).
            }
        }
    }

    /// `notifications/cancelled`: a stream stops with no response and no further frame
    /// (TS-08, DX-04) and its task goes on; a plain call stops; a waiting `tasks/result` is
    /// dropped. Unknown ids are ignored (MCP-DIGEST a.6).
    fn cancel_request(&self, id: &RequestId) {
        if let Some(task) = self.streams().cancel(id) {
            log!(Debug, "stream {id} cancelled");
            // A stream delivered without the delivery thread (HTTP) sees it when woken.
            self.process.wake(task);
            return;
        }
        if !self.plain.cancel(id) {
            self.pending().cancel_waiter(id);
        }
    }

    fn request(self: &Arc<Self>, session: &mut Session, id: &RequestId, method: &str, raw: &[u8]) {
        let params = match wire::object_params(raw) {
            Ok(p) => p,
            Err(e) => return self.out.send(&e.line(Some(id))),
        };
        if method == "initialize" {
            let r = session.initialize(&params, &self.process.extra.identity);
            if r.is_ok() {
                self.legacy.store(true, Ordering::Relaxed);
                log!(Info, "legacy session initialized");
            }
            return self.reply(id, Era::Legacy, r);
        }
        let era = match session.era_of(method, &params) {
            Ok(era) => era,
            Err(e) => return self.out.send(&e.line(Some(id))),
        };
        let span = crate::otel::request(
            method,
            crate::otel::era_name(era),
            self.transport(),
            &params,
        );
        let _in_span = span.enter();
        if self.process.store.has_failed() && method != "ping" {
            // Fail-stop: no new work, and no answer from a store that can no longer record.
            let e = ServerError::Internal(wire::STORAGE_FAILED.into());
            return self.reply(id, era, Err(e));
        }
        // A 2025-06-18 session has no Tasks: no Tasks method, and `params.task` is an unknown
        // member of `tools/call` (the call runs plainly).
        let mut params = params;
        if !session.offers_tasks() {
            if is_task_lookup(method) {
                return self.reply(id, era, Err(ServerError::MethodNotFound(method.to_owned())));
            }
            params.remove("task");
        }
        // Ok(Some): answer now; Ok(None): answered (or to be answered) elsewhere.
        let answer = if is_task_lookup(method) {
            self.lookup(id, era, method, raw, &params)
        } else {
            match method {
                "ping" => Ok(Some(json!({}))),
                "server/discover" if era != Era::Legacy => {
                    Ok(Some(era::discover(&self.process.extra.identity)))
                }
                "tools/list" => Ok(Some(tools::list(era, &self.process.tools)))
                    .map(|list| list.map(|l| tools::for_session(l, session.offers_tasks()))),
                "tools/call" => self.tools_call(id, era, &params).map(|()| None),
                other => match &self.process.extra.forward {
                    Some(f) if f.handles(other) => {
                        self.forward(f, id, era, other, params);
                        Ok(None)
                    }
                    _ => Err(ServerError::MethodNotFound(other.to_owned())),
                },
            }
        };
        match answer {
            Ok(Some(v)) => self.reply(id, era, Ok(v)),
            Ok(None) => {}
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                self.reply(id, era, Err(e));
            }
        }
    }

    /// A Tasks method or `tasks/stream`. A miss spends the failed-lookup allowance (SE-07); while
    /// it is spent, a miss is answered `too_many_failures` instead of its own error and costs
    /// nothing, and a request that finds one of the principal's own tasks is served as ever.
    fn lookup(
        self: &Arc<Self>,
        id: &RequestId,
        era: Era,
        method: &str,
        raw: &[u8],
        params: &Map<String, Value>,
    ) -> Result<Option<Value>, ServerError> {
        let codec = || Codec::for_method(era, method);
        self.guarded(|| match method {
            "tasks/get" => codec().and_then(|c| self.tasks_get(c, params)).map(Some),
            "tasks/cancel" => codec().and_then(|c| self.tasks_cancel(c, params)).map(Some),
            "tasks/update" if era != Era::Legacy => {
                codec().and_then(|_| self.tasks_update(params)).map(Some)
            }
            "tasks/list" => codec().and_then(|_| self.tasks_list(params)).map(Some),
            "tasks/result" => codec()
                .and_then(|_| self.refuse_id_in_use(id))
                .and_then(|()| self.tasks_result(id, params))
                .map(|()| None),
            rpc::method::TASKS_STREAM => self
                .refuse_id_in_use(id)
                .and_then(|()| self.open_stream(id, era, raw))
                .map(|()| None),
            other => Err(ServerError::MethodNotFound(other.to_owned())),
        })
    }

    /// Refuses a request that would stay open under an id another open request of this
    /// connection already uses (a plain call, a stream, a waiting `tasks/result`): a later
    /// answer or cancellation could not tell them apart. (JSON-RPC forbids reusing ids; this
    /// keeps "answered exactly once" true for clients that do anyway.)
    fn refuse_id_in_use(&self, id: &RequestId) -> Result<(), ServerError> {
        let in_use = self.plain.contains(id)
            || self.streams().uses_id(id)
            || self.pending().waiters.iter().any(|(_, w)| w == id);
        if in_use {
            Err(ServerError::InvalidRequest(
                "an active request already uses this id",
            ))
        } else {
            Ok(())
        }
    }

    /// Refuses new work when this principal runs `--max-running-tasks` tasks and this
    /// connection's plain calls, or the process runs `--max-total-running-tasks`.
    fn refuse_over_running_limit(&self) -> Result<(), ServerError> {
        let (mine, all) = self.process.running(&self.principal);
        let plain = self.plain.len();
        let refused = mine + plain >= self.process.config.max_running_tasks
            || all + plain >= self.process.config.max_total_running_tasks;
        if refused {
            metrics::METRICS.refused(metrics::Limit::Tasks);
        }
        if mine + plain >= self.process.config.max_running_tasks {
            Err(ServerError::Limit {
                reason: Reason::TaskLimit,
                what: "too many tasks running for this principal, with this connection's \
                       plain tool calls (--max-running-tasks); retry when one has ended",
            })
        } else if all + plain >= self.process.config.max_total_running_tasks {
            Err(ServerError::Limit {
                reason: Reason::TaskLimit,
                what: "too many tasks running in this server (--max-total-running-tasks); \
                       retry when one has ended",
            })
        } else {
            Ok(())
        }
    }

    /// `tools/call`: validates, then runs as a task (legacy `params.task`; modern: declared
    /// extension) or plainly. Answers itself (at once, or when the plain call ends), except for
    /// the errors it returns.
    fn tools_call(
        self: &Arc<Self>,
        id: &RequestId,
        era: Era,
        params: &Map<String, Value>,
    ) -> Result<(), ServerError> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(ServerError::InvalidParams("name must be a string".into()));
        };
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(a)) => a,
            Some(_) => {
                return Err(ServerError::InvalidParams(
                    "arguments must be an object".into(),
                ));
            }
        };
        let workload = match tools::plan(name, args, &self.process.tools) {
            Ok(w) => w,
            Err(tools::CallError::UnknownTool(t)) => {
                let shown: String = t.chars().take(64).collect();
                return Err(ServerError::InvalidParams(format!(
                    "unknown tool {shown:?}"
                )));
            }
            Err(tools::CallError::BadArguments(m)) => {
                self.reply(id, era, Ok(crate::tool::text_result(&m, true)));
                return Ok(());
            }
        };
        let as_task = match (era, params.get("task")) {
            (Era::Legacy, None | Some(Value::Null)) => None,
            (Era::Legacy, Some(Value::Object(t))) => Some(t.get("ttl").and_then(Value::as_u64)),
            (Era::Legacy, Some(_)) => {
                return Err(ServerError::InvalidParams("task must be an object".into()));
            }
            // SEP-2663: the server decides; params.task is ignored.
            (Era::Modern { tasks }, _) => tasks.then_some(None),
        };
        self.refuse_over_running_limit()?;
        match as_task {
            Some(ttl) => self.create_task(id, era, name, workload, ttl),
            None => {
                self.refuse_id_in_use(id)?;
                let token = params
                    .get("_meta")
                    .and_then(|m| m.get("progressToken"))
                    .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                    .cloned();
                self.spawn_plain(id.clone(), era, workload, token);
            }
        }
        Ok(())
    }
}

impl ConnectionState {
    /// A response from the client: the answer to a request the server asked it on behalf of
    /// the server behind the gateway, or dropped.
    fn response(&self, line: &[u8]) {
        let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(id) = msg.get("id").and_then(Value::as_str) else {
            return;
        };
        if !id.starts_with(process::ASKED_PREFIX) {
            return;
        }
        let answer = match (msg.get("result"), msg.get("error")) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => return,
        };
        if !self.process.client_answered(id, answer) {
            log!(
                Debug,
                "an answer to request {id}, which no longer waits; dropped"
            );
        }
    }

    /// Passes a request on (the gateway) on a thread of its own, and answers it when the
    /// answer comes back.
    fn forward(
        self: &Arc<Self>,
        forward: &Arc<dyn Forward>,
        id: &RequestId,
        era: Era,
        method: &str,
        mut params: Map<String, Value>,
    ) {
        // The modern `_meta` keys are this hop's; the inner server speaks the legacy era.
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
        let shared = Arc::clone(self);
        let forward = Arc::clone(forward);
        let request_id = id.clone();
        let method = method.to_owned();
        let spawned = std::thread::Builder::new()
            .name("forward".into())
            .stack_size(256 * 1024)
            .spawn(move || match forward.request(&method, params) {
                Ok(v) => shared.reply(&request_id, era, Ok(v)),
                Err(error) => shared
                    .out
                    .send(&wire::error_object_response(&request_id, &error)),
            });
        if let Err(e) = spawned {
            log!(Error, "forwarding a request: cannot start a thread: {e}");
            self.reply(
                id,
                era,
                Err(ServerError::Internal(
                    "the server could not pass the request on (its log says why)".into(),
                )),
            );
        }
    }
}

/// Whether `method` looks a task up: the Tasks methods and `tasks/stream`.
fn is_task_lookup(method: &str) -> bool {
    matches!(
        method,
        "tasks/get" | "tasks/cancel" | "tasks/update" | "tasks/list" | "tasks/result"
    ) || method == rpc::method::TASKS_STREAM
}
