//! Plain (non-task) `tools/call`: the workload runs to completion on its own thread and the
//! result is the response. With `_meta.progressToken` each event is reported as
//! `notifications/progress` (strictly increasing, MCP-DIGEST a.6); nothing follows the
//! response. `notifications/cancelled` stops the work and suppresses the response.
//!
//! The response and the progress notifications are written while holding the table of
//! in-flight calls, and a cancellation takes that same lock, so once a cancellation has been
//! read nothing more is written for the call.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use taskstream_core::{EventType, Payload, RequestId};

use super::state::ConnectionState;
use crate::cancel::CancelToken;
use crate::log::log;
use crate::tool::{AskError, Outcome, Sink, ToolError, Workload};
use crate::wire::era::Era;

impl ConnectionState {
    /// Starts a plain call on its own thread.
    pub(crate) fn spawn_plain(
        self: &Arc<Self>,
        id: RequestId,
        era: Era,
        workload: Workload,
        progress_token: Option<Value>,
    ) {
        let token = Arc::new(CancelToken::default());
        self.plain.lock().insert(id.clone(), Arc::clone(&token));
        let shared = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("plain-call".into())
            .stack_size(256 * 1024)
            .spawn({
                let id = id.clone();
                move || shared.run_plain(&id, era, &workload, progress_token, &token)
            });
        if let Err(e) = spawned {
            self.plain.lock().remove(&id);
            log!(Error, "tool call {id}: cannot start a thread: {e}");
            self.reply(
                &id,
                era,
                Err(crate::wire::ServerError::Internal(
                    "the server could not start the call (its log says why)".into(),
                )),
            );
        }
    }

    fn run_plain(
        &self,
        id: &RequestId,
        era: Era,
        workload: &Workload,
        progress_token: Option<Value>,
        token: &CancelToken,
    ) {
        let mut sink = PlainSink {
            shared: self,
            id,
            token,
            progress_token,
            total: workload.total_events(),
            emitted: 0,
            reported: None,
        };
        let outcome = workload.run(&mut sink);
        let result = match outcome {
            Ok(Outcome::Completed(r) | Outcome::Failed { result: r, .. }) => r,
            Err(ToolError::Cancelled) => {
                self.plain.lock().remove(id);
                return;
            }
            Err(e) => crate::tool::text_result(&e.message(), true),
        };
        let calls = self.plain.lock();
        if calls.get(id).is_some_and(|t| !t.is_cancelled()) {
            self.reply(id, era, Ok(result));
        } else {
            log!(Debug, "plain call {id} cancelled; no response");
        }
        drop(calls);
        self.plain.lock().remove(id);
    }
}

/// A plain call's sink: checks each event as the store would, counts it, reports progress.
struct PlainSink<'a> {
    shared: &'a ConnectionState,
    id: &'a RequestId,
    token: &'a CancelToken,
    progress_token: Option<Value>,
    total: Option<u64>,
    emitted: u64,
    /// The last progress the handler reported itself (then events no longer count).
    reported: Option<f64>,
}

impl PlainSink<'_> {
    fn send_progress(&self, params: Value) {
        let calls = self.shared.plain.lock();
        if calls.get(self.id).is_some_and(|t| !t.is_cancelled()) {
            self.shared.out.send(&crate::wire::notification(
                "notifications/progress",
                &params,
            ));
        }
    }
}

impl Sink for PlainSink<'_> {
    fn emit(
        &mut self,
        expected: Option<u64>,
        event_type: &str,
        payload: &[u8],
    ) -> Result<u64, ToolError> {
        if self.token.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if let Some(e) = expected.filter(|e| *e != self.emitted) {
            return Err(ToolError::SeqMismatch {
                expected: e,
                next: self.emitted,
            });
        }
        EventType::new(event_type).map_err(|e| ToolError::Failed(e.to_string()))?;
        let p = Payload::new(payload).map_err(|e| ToolError::Failed(e.to_string()))?;
        let limit = self.shared.process.config.retention.max_payload_bytes;
        if p.compact_len() > limit as usize {
            return Err(ToolError::Failed(format!(
                "an event payload of {} bytes exceeds the limit of {limit}",
                p.compact_len()
            )));
        }
        let seq = self.emitted;
        self.emitted += 1;
        if let (Some(progress), None) = (&self.progress_token, self.reported) {
            let mut params = json!({
                "progressToken": progress,
                "progress": self.emitted,
            });
            if let (Some(total), Some(obj)) = (self.total, params.as_object_mut()) {
                obj.insert("total".into(), json!(total));
            }
            self.send_progress(params);
        }
        Ok(seq)
    }

    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ToolError> {
        if self.token.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let payload = crate::process::progress_payload(progress, total, message)?;
        // MCP-DIGEST a.6: progress strictly increases.
        if self.reported.is_some_and(|last| progress <= last) {
            return Ok(());
        }
        self.reported = Some(progress);
        if let Some(token) = &self.progress_token {
            let mut params: serde_json::Map<String, Value> =
                serde_json::from_slice(&payload).unwrap_or_default();
            params.insert("progressToken".into(), token.clone());
            self.send_progress(Value::Object(params));
        }
        Ok(())
    }

    fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    fn wait_cancelled(&self, deadline: Instant) -> bool {
        self.token.wait_until(deadline)
    }

    fn on_cancel(&mut self, callback: Box<dyn FnOnce() + Send>) {
        self.token.on_cancel(callback);
    }

    fn task_id(&self) -> Option<&str> {
        None
    }

    fn ask(&mut self, method: &str, params: Value, deadline: Instant) -> Result<Value, AskError> {
        if self.token.is_cancelled() {
            return Err(AskError::Cancelled);
        }
        if !self.shared.can_be_asked() {
            return Err(AskError::Unanswered(format!(
                "the client of this call cannot be asked for {}: only a 2025-11-25 session on \
                 stdio can be asked outside a task (a 2026-07-28 client is asked through a task's \
                 input_required)",
                crate::process::shown(method)
            )));
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        self.shared
            .process
            .ask_connection(self.shared, method, params, timeout)
            .map_err(AskError::Refused)
    }
}
