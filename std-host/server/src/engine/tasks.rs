//! Tasks: one model (the store's [`TaskRecord`] and event log), two codecs at the edge.
//!
//! - SEP-1686 (legacy sessions): `params.task` opt-in → `{task: Task}`; `tasks/get` → Task;
//!   `tasks/result` waits for the terminal status (without blocking the reader: the delivery
//!   thread answers it); paginated `tasks/list`; `tasks/cancel` → the cancelled Task, -32602
//!   for a terminal one; `notifications/tasks/status` on transitions (sent by the delivery
//!   thread).
//! - SEP-2663 (modern requests that declare the extension): flat `CreateTaskResult`;
//!   `tasks/get` → DetailedTask with `result` / `error` inline (and `inputRequests` while the
//!   task waits for input, `input.rs`); `tasks/update` (answers those requests) and
//!   `tasks/cancel` acks; `tasks/result` and `tasks/list` → -32601; -32021 without the
//!   extension (DX-03).
//!
//! Both: a task belongs to the principal that created it; for any other principal it does not
//! exist (SE-01, SE-03). `tasks/get` also reports the retained event range under
//! `_meta["dev.taskstream/events"]`, so a client can see where to resume without replaying.
//!
//! Each task runs on its own thread; it only appends to the store and never writes to stdout,
//! so a slow reader never holds a task back.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use taskstream_core::rpc::Reason;
use taskstream_core::RequestId;

use super::state::ConnectionState;
use crate::log::log;
use crate::tool::Workload;
use crate::wire::era::{Codec, Era};
use crate::wire::task::{
    events_summary, final_answer, format_task_id, parse_task_id, refusal, stored_error, task_json,
    EVENTS_META, STORE_UNAVAILABLE,
};
use crate::wire::ServerError;
use taskstream_store::clock;
use taskstream_store::{AppendError, TaskRecord, TaskStatus, TaskView};

/// Suggested polling interval.
const POLL_INTERVAL_MS: u64 = 1000;
/// Page size of `tasks/list`.
const LIST_PAGE: usize = 50;

/// A fresh task id with 128 random bits (≥ 122 required; SEP-2663 security).
fn new_task_id() -> Result<u128, ServerError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        log!(Error, "no randomness for a task id: {e}");
        ServerError::Internal("the server could not draw a task id (its log says why)".into())
    })?;
    Ok(u128::from_le_bytes(bytes))
}

impl ConnectionState {
    /// The task `task_id` as this connection's principal may see it.
    pub(crate) fn visible_task(&self, task_id: &str) -> Option<(u128, TaskView)> {
        let key = parse_task_id(task_id)?;
        let view = self.process.store.task(task_id)?;
        (view.record.principal == self.principal).then_some((key, view))
    }

    fn task_param(&self, params: &Map<String, Value>) -> Result<(u128, TaskView), ServerError> {
        let id = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| ServerError::InvalidParams("taskId must be a string".into()))?;
        let key = parse_task_id(id).ok_or(ServerError::UNKNOWN_TASK)?;
        let view = self.process.store.lookup(id).map_err(|e| {
            log!(Error, "reading task {id}: {e}");
            ServerError::Internal(STORE_UNAVAILABLE.into())
        })?;
        view.filter(|v| v.record.principal == self.principal)
            .map(|v| (key, v))
            .ok_or(ServerError::UNKNOWN_TASK)
    }

    /// `tools/call` as a task: creates it (durably: `tasks/get` resolves before the answer is
    /// written, SEP-2663), answers, then starts its thread.
    pub(crate) fn create_task(
        self: &Arc<Self>,
        id: &RequestId,
        era: Era,
        tool: &str,
        workload: Workload,
        ttl_ms: Option<u64>,
    ) {
        let codec = if era == Era::Legacy {
            Codec::Legacy
        } else {
            Codec::Modern
        };
        let created = (|| {
            let key = new_task_id()?;
            let task_id = format_task_id(key);
            let now = clock::now();
            let retention_ms = self.process.config.retention.terminal_retention.0;
            let record = TaskRecord {
                task_id: task_id.clone(),
                principal: self.principal.clone(),
                tool: tool.to_owned(),
                status: TaskStatus::Working,
                status_message: None,
                created_at: now,
                last_updated_at: now,
                ttl_ms: Some(ttl_ms.map_or(retention_ms, |t| t.min(retention_ms))),
                poll_interval_ms: POLL_INTERVAL_MS,
                result: None,
                error: None,
            };
            self.process.store.create_task(record, now).map_err(|e| {
                log!(Error, "cannot create a task: {e:?}");
                ServerError::Internal(format!("cannot create the task: {}", refusal(&e)))
            })?;
            let view = self
                .process
                .store
                .task(&task_id)
                .ok_or_else(|| ServerError::Internal("the new task vanished".into()))?;
            Ok::<_, ServerError>((key, view))
        })();
        let (key, view) = match created {
            Ok(v) => v,
            Err(e) => return self.reply(id, era, Err(e)),
        };
        let token = self.process.add_runner(key, &self.principal);
        let result = match codec {
            Codec::Legacy => json!({ "task": task_json(&view, codec) }),
            Codec::Modern => {
                let mut t = task_json(&view, codec);
                if let Some(obj) = t.as_object_mut() {
                    obj.insert("resultType".into(), json!("task"));
                }
                t
            }
        };
        self.reply(id, era, Ok(result));
        log!(Info, "task {} created ({tool})", view.record.task_id);
        self.process.spawn_task(
            key,
            view.record.task_id,
            self.principal.clone(),
            workload,
            token,
            codec,
        );
    }

    /// `tasks/get`.
    pub(crate) fn tasks_get(
        &self,
        codec: Codec,
        params: &Map<String, Value>,
    ) -> Result<Value, ServerError> {
        let (key, view) = self.task_param(params)?;
        let mut t = task_json(&view, codec);
        // A running task waiting for input (`input.rs`) is `input_required` while it waits.
        let inputs = if view.record.status.is_terminal() {
            None
        } else {
            self.process.inputs.requests(key)
        };
        if let (Some(requests), Some(obj)) = (inputs, t.as_object_mut()) {
            obj.insert("status".into(), json!(TaskStatus::InputRequired.as_str()));
            if codec == Codec::Modern {
                obj.insert("inputRequests".into(), Value::Object(requests));
            }
        }
        if let (Codec::Modern, Some(obj)) = (codec, t.as_object_mut()) {
            match view.record.status {
                TaskStatus::Completed => {
                    // The inline result is a 2026-07-28 result: it carries `resultType` too.
                    let mut result = view
                        .record
                        .result
                        .clone()
                        .unwrap_or_else(|| json!({"content": []}));
                    if let Some(r) = result.as_object_mut() {
                        r.entry("resultType").or_insert_with(|| json!("complete"));
                    }
                    obj.insert("result".into(), result);
                }
                TaskStatus::Failed => {
                    obj.insert("error".into(), stored_error(&view));
                }
                _ => {}
            }
        }
        if let Some(obj) = t.as_object_mut() {
            obj.insert(
                "_meta".into(),
                json!({ EVENTS_META: events_summary(&view) }),
            );
        }
        Ok(t)
    }

    /// `tasks/cancel`: ends a running task as cancelled (the first end wins).
    pub(crate) fn tasks_cancel(
        &self,
        codec: Codec,
        params: &Map<String, Value>,
    ) -> Result<Value, ServerError> {
        let (key, view) = self.task_param(params)?;
        let task_id = view.record.task_id.clone();
        let ended = if view.record.status.is_terminal() {
            false
        } else {
            self.process.stop_runner(key);
            let error = ServerError::Internal("the task was cancelled".into()).to_json();
            match self.process.store.finish(
                &task_id,
                TaskStatus::Cancelled,
                Some("cancelled by the client".into()),
                None,
                Some(error),
                clock::now(),
            ) {
                Ok(_) => true,
                Err(AppendError::Terminal) => false,
                Err(e) => {
                    log!(
                        Error,
                        "task {task_id}: cannot store its cancellation: {e:?}"
                    );
                    return Err(ServerError::Internal(format!(
                        "cannot cancel: {}",
                        refusal(&e)
                    )));
                }
            }
        };
        if ended {
            log!(Info, "task {task_id} cancelled");
            self.process.announce(key, &self.principal);
        }
        match codec {
            Codec::Modern => Ok(json!({})),
            Codec::Legacy if !ended => Err(ServerError::TaskTerminal),
            Codec::Legacy => {
                let view = self
                    .process
                    .store
                    .task(&task_id)
                    .ok_or(ServerError::UNKNOWN_TASK)?;
                Ok(task_json(&view, codec))
            }
        }
    }

    /// `tasks/update` (SEP-2663): `inputResponses` answer the task's waiting input requests
    /// (`input.rs`); keys of no waiting request are ignored. An ack.
    pub(crate) fn tasks_update(&self, params: &Map<String, Value>) -> Result<Value, ServerError> {
        let (key, view) = self.task_param(params)?;
        let responses = match params.get("inputResponses") {
            None | Some(Value::Null) => return Ok(json!({})),
            Some(Value::Object(r)) => r,
            Some(_) => {
                return Err(ServerError::InvalidParams(
                    "inputResponses must be an object of input keys to results".into(),
                ))
            }
        };
        if let Some((k, _)) = responses.iter().find(|(_, v)| !v.is_object()) {
            let k: String = k.chars().take(64).collect();
            return Err(ServerError::InvalidParams(format!(
                "inputResponses[{k:?}] must be the request's result, an object"
            )));
        }
        let answered = self.process.inputs.answer(key, responses);
        if answered > 0 {
            log!(
                Info,
                "task {}: {answered} input request(s) answered",
                view.record.task_id
            );
        }
        Ok(json!({}))
    }

    /// `tasks/list` (SEP-1686): this principal's tasks, oldest first, [`LIST_PAGE`] a page.
    /// The cursor is the position after the last task of the previous page.
    pub(crate) fn tasks_list(&self, params: &Map<String, Value>) -> Result<Value, ServerError> {
        let after = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(parse_cursor(c).ok_or(ServerError::InvalidCursor)?),
            Some(_) => return Err(ServerError::InvalidCursor),
        };
        let all = self.process.store.list().map_err(|e| {
            log!(Error, "listing tasks: {e}");
            ServerError::Internal(STORE_UNAVAILABLE.into())
        })?;
        let mine: Vec<TaskView> = all
            .into_iter()
            .filter(|v| v.record.principal == self.principal)
            .filter(|v| after.as_ref().is_none_or(|a| list_key(v) > *a))
            .collect();
        let page: Vec<Value> = mine
            .iter()
            .take(LIST_PAGE)
            .map(|v| task_json(v, Codec::Legacy))
            .collect();
        let mut result = json!({ "tasks": page });
        if mine.len() > LIST_PAGE {
            if let (Some(last), Some(obj)) = (mine.get(LIST_PAGE - 1), result.as_object_mut()) {
                let (at, id) = list_key(last);
                obj.insert("nextCursor".into(), json!(format!("{at}.{id}")));
            }
        }
        Ok(result)
    }

    /// `tasks/result` (SEP-1686): answers now if the task is terminal, else registers the
    /// request for the delivery thread to answer when it ends. At most
    /// `--max-running-tasks` requests wait at once.
    ///
    /// # Errors
    /// An unknown task, or the waiter limit; the caller answers.
    pub(crate) fn tasks_result(
        &self,
        id: &RequestId,
        params: &Map<String, Value>,
    ) -> Result<(), ServerError> {
        let mut pending = self.pending();
        let (key, view) = self.task_param(params)?;
        if !view.record.status.is_terminal() {
            if pending.waiters.len() >= self.process.config.max_running_tasks {
                crate::metrics::METRICS.refused(crate::metrics::Limit::Waiters);
                return Err(ServerError::Limit {
                    reason: Reason::WaiterLimit,
                    what: "too many tasks/result requests waiting on this connection",
                });
            }
            pending.waiters.push((key, id.clone()));
            return Ok(());
        }
        drop(pending);
        self.out.send(&final_answer(id, &view));
        Ok(())
    }
}

fn list_key(v: &TaskView) -> (u64, String) {
    (v.record.created_at.0, v.record.task_id.clone())
}

fn parse_cursor(c: &str) -> Option<(u64, String)> {
    let (at, id) = c.split_once('.')?;
    parse_task_id(id)?;
    Some((at.parse().ok()?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_differ() {
        assert_ne!(new_task_id().ok(), new_task_id().ok());
    }

    #[test]
    fn codecs_per_era() {
        assert_eq!(
            Codec::for_method(Era::Legacy, "tasks/list"),
            Ok(Codec::Legacy)
        );
        assert_eq!(
            Codec::for_method(Era::Modern { tasks: true }, "tasks/get"),
            Ok(Codec::Modern)
        );
        assert_eq!(
            Codec::for_method(Era::Modern { tasks: false }, "tasks/get"),
            Err(ServerError::MissingTasksExtension)
        );
        assert_eq!(
            Codec::for_method(Era::Modern { tasks: true }, "tasks/result")
                .map_err(|e| e.code().code()),
            Err(-32601)
        );
    }
}
