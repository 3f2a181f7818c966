//! Tools of your own, run as durable tasks with resumable event streams.
//!
//! A [`Tool`] is a name, a description, a JSON input schema and a handler. The handler gets the
//! call's arguments and a [`TaskContext`]: it [emits](TaskContext::emit) events (a
//! vendor-prefixed type and a JSON object payload; each gets its `seq`), learns of cancellation
//! ([`is_cancelled`](TaskContext::is_cancelled), [`wait_cancelled`](TaskContext::wait_cancelled),
//! [`sleep`](TaskContext::sleep)), reports [progress](TaskContext::progress), and finishes by
//! returning a [`ToolResult`] or a [`ToolError`]. Serve the tools with
//! [`ServerBuilder`](crate::ServerBuilder); everything else (both protocol eras, Tasks,
//! `tasks/stream`, retention, `events_gone`, durability before delivery, recovery after a
//! crash) is the server's.
//!
//! When the client calls the tool as a task, every event goes to the task's durable log before
//! any client can see it, and the task's stream opens with `dev.taskstream.task.status
//! {"status":"working"}` (seq 0) and ends with the terminal status. When the client calls it
//! plainly, events are checked and counted but not kept, and (with a `progressToken`) each one
//! is reported as `notifications/progress` until the handler reports progress itself.
//!
//! ```
//! use serde_json::json;
//! use taskstream_server::tool::{Tool, ToolResult};
//!
//! let countdown = Tool::new(
//!     "countdown",
//!     "Counts down from `from`, one event a tick",
//!     json!({
//!         "type": "object",
//!         "properties": { "from": { "type": "integer", "minimum": 0, "maximum": 1000 } },
//!         "required": ["from"],
//!     }),
//!     |ctx, args| {
//!         let from = args.get("from").and_then(|v| v.as_u64()).unwrap_or(0);
//!         for n in (0..=from).rev() {
//!             ctx.emit("com.example.countdown.tick", &json!({ "n": n }))?;
//!             ctx.sleep(std::time::Duration::from_millis(10))?;
//!         }
//!         Ok(ToolResult::text("lift-off"))
//!     },
//! );
//! assert_eq!(countdown.name(), "countdown");
//! ```
//!
//! Why one file past ~600 lines: it is the whole public tool API, read as one page by whoever
//! writes a tool; its parts (`Tool`, `TaskContext`, `ToolResult` / `ToolError`, the `Sink` the
//! server implements, the `Registry` and the schema check) refer to each other throughout, and
//! about a third of it is the doc comments and examples of public items.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use taskstream_core::CHECKPOINT_EVENT_TYPE;

use crate::log::log;

/// The event type of [`TaskContext::progress`] in a task.
pub const PROGRESS_TYPE: &str = "dev.taskstream.progress";

/// Why a tool's work stopped early, or why one step of it was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", self.message())]
#[non_exhaustive]
pub enum ToolError {
    /// The task was cancelled (or the plain call's request was), or it already ended
    /// elsewhere: nothing more is recorded and nothing is answered for it. Return it (with
    /// `?`) as soon as you see it.
    Cancelled,
    /// The work failed: the task ends `failed` in either era (a plain call answers a tool
    /// result with `isError: true`) with this message, which the client reads. (A
    /// [`ToolResult::error`] is a tool-level error instead.)
    Failed(String),
    /// [`TaskContext::emit_expecting`] was told a seq other than the one the next event would
    /// get: nothing was appended. `next` is the seq the next event would get; a retried
    /// append whose first attempt landed sees `next == expected + 1`.
    SeqMismatch {
        /// The seq the caller expected its event to get.
        expected: u64,
        /// The seq the next event would get.
        next: u64,
    },
}

impl ToolError {
    /// A failure saying `message` (the client reads it: say what went wrong, leak nothing of
    /// the host).
    pub fn failed(message: impl Into<String>) -> ToolError {
        ToolError::Failed(message.into())
    }

    /// The message a failed task reports for this error.
    pub(crate) fn message(&self) -> String {
        match self {
            ToolError::Cancelled => "the task was cancelled".into(),
            ToolError::Failed(m) => m.clone(),
            ToolError::SeqMismatch { expected, next } => {
                format!("an event expected seq {expected}, but the next seq of the task is {next}")
            }
        }
    }
}

/// Why [`TaskContext::ask`] has no answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The work was cancelled while it waited: stop, and return [`ToolError::Cancelled`]
    /// (`?` converts it).
    #[error("the task was cancelled")]
    Cancelled,
    /// The client answered with this JSON-RPC error object (`{code, message, data?}`).
    #[error("the client refused: {}", error_message(.0))]
    Refused(Value),
    /// No client could be asked, or none answered in time; the message says which, for the
    /// client to read.
    #[error("{0}")]
    Unanswered(String),
}

/// The message of a JSON-RPC error object, bounded, for a client to read (it may come from
/// another program).
pub fn error_message(e: &Value) -> String {
    let m = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    m.chars().take(500).collect()
}

impl From<AskError> for ToolError {
    fn from(e: AskError) -> ToolError {
        match e {
            AskError::Cancelled => ToolError::Cancelled,
            other => ToolError::Failed(other.to_string()),
        }
    }
}

/// A `CallToolResult`: what a tool answers (a plain call) or stores as its task's result.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    value: Value,
    message: Option<String>,
}

/// A value that is not a `CallToolResult` (an object with a `content` array).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a valid CallToolResult: {0}")]
pub struct InvalidResult(pub(crate) &'static str);

impl ToolResult {
    /// A successful result with one text content block.
    pub fn text(text: impl AsRef<str>) -> ToolResult {
        ToolResult::of(text_result(text.as_ref(), false))
    }

    /// A tool-level error (`isError: true`) with one text content block: a task ends `failed`
    /// in a 2025-11-25 session and `completed` with this result in a 2026-07-28 one (the
    /// Tasks extension keeps `failed` for protocol errors).
    pub fn error(text: impl AsRef<str>) -> ToolResult {
        ToolResult::of(text_result(text.as_ref(), true))
    }

    /// A result from its JSON form, for structured content, several blocks or images.
    ///
    /// # Errors
    /// [`InvalidResult`] unless `value` is an object whose `content` is an array of objects
    /// each with a string `type`, and whose `isError`, if present, is a boolean.
    pub fn from_value(value: Value) -> Result<ToolResult, InvalidResult> {
        check_result(&value)?;
        Ok(ToolResult::of(value))
    }

    pub(crate) fn of(value: Value) -> ToolResult {
        ToolResult {
            value,
            message: None,
        }
    }

    /// Sets the status message a task reports when this result is a tool-level error (by
    /// default the text of its first text block).
    #[must_use]
    pub fn status_message(mut self, message: impl Into<String>) -> ToolResult {
        self.message = Some(message.into());
        self
    }

    /// Whether this is a tool-level error (`isError: true`).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.value.get("isError").and_then(Value::as_bool) == Some(true)
    }

    /// The JSON form.
    #[must_use]
    pub fn into_value(self) -> Value {
        self.value
    }

    /// The text of the first text block, or a fallback (a failed task's status message).
    fn first_text(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        self.value
            .get("content")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find_map(|b| b.get("text").and_then(Value::as_str).map(str::to_owned))
            })
            .unwrap_or_else(|| "the tool reported an error".into())
    }
}

/// Checks the shape of a `CallToolResult` (MCP-DIGEST a.7).
///
/// # Errors
/// What is wrong with it.
pub fn check_result(value: &Value) -> Result<(), InvalidResult> {
    let obj = value.as_object().ok_or(InvalidResult("not an object"))?;
    let content = obj
        .get("content")
        .and_then(Value::as_array)
        .ok_or(InvalidResult("no content array"))?;
    if !content
        .iter()
        .all(|b| b.get("type").is_some_and(Value::is_string))
    {
        return Err(InvalidResult("a content block has no string type"));
    }
    if obj.get("isError").is_some_and(|e| !e.is_boolean()) {
        return Err(InvalidResult("isError is not a boolean"));
    }
    Ok(())
}

/// A `CallToolResult` with one text content block.
pub(crate) fn text_result(text: &str, is_error: bool) -> Value {
    json!({
        "content": [{ "type": "text", "text": text }],
        "isError": is_error,
    })
}

/// How a tool's work ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Done; the `CallToolResult`.
    Completed(Value),
    /// Failed; a human-readable message and the `CallToolResult` (with `isError: true`).
    Failed {
        /// Why.
        message: String,
        /// The tool result describing the failure.
        result: Value,
    },
}

impl Outcome {
    /// A failure whose tool result is a single text block saying `message`.
    #[cfg(test)]
    pub(crate) fn failed(message: String) -> Outcome {
        let result = text_result(&message, true);
        Outcome::Failed { message, result }
    }
}

impl From<ToolResult> for Outcome {
    fn from(r: ToolResult) -> Outcome {
        if r.is_error() {
            Outcome::Failed {
                message: r.first_text(),
                result: r.value,
            }
        } else {
            Outcome::Completed(r.value)
        }
    }
}

/// Where a call's events go: the task's log, or a plain call's progress. The server's side of
/// a [`TaskContext`].
pub(crate) trait Sink {
    /// Records one event; its seq.
    ///
    /// # Errors
    /// [`ToolError`] when it was not recorded.
    fn emit(
        &mut self,
        expected: Option<u64>,
        event_type: &str,
        payload: &[u8],
    ) -> Result<u64, ToolError>;

    /// Reports progress.
    ///
    /// # Errors
    /// [`ToolError`] when it could not be recorded.
    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ToolError>;

    /// Whether the work was cancelled.
    fn is_cancelled(&self) -> bool;

    /// Waits until `deadline` or cancellation; whether it was cancelled.
    fn wait_cancelled(&self, deadline: Instant) -> bool;

    /// The task's id, if the call runs as a task.
    fn task_id(&self) -> Option<&str>;

    /// Runs `callback` when the work is cancelled (at once if it already was).
    fn on_cancel(&mut self, callback: Box<dyn FnOnce() + Send>);

    /// Asks the client `method` with `params` and waits for its answer until `deadline`.
    ///
    /// # Errors
    /// [`AskError`]: cancelled, refused by the client, or unanswered.
    fn ask(&mut self, method: &str, params: Value, deadline: Instant) -> Result<Value, AskError>;
}

/// What a tool's handler sees of its call: where its events go, and whether it was
/// cancelled. The same handler serves a task and a plain call.
pub struct TaskContext<'a> {
    sink: &'a mut dyn Sink,
}

impl<'a> TaskContext<'a> {
    pub(crate) fn new(sink: &'a mut dyn Sink) -> TaskContext<'a> {
        TaskContext { sink }
    }

    /// The task's id (32 hex digits) when the call runs as a task; `None` for a plain call.
    #[must_use]
    pub fn task_id(&self) -> Option<&str> {
        self.sink.task_id()
    }

    /// Emits one event and returns its seq. In a task the event is in the task's log when this
    /// returns, and no client sees it before it is durable as `--durability` says (with
    /// `group`, one flush covers every event logged meanwhile, so a fast emitter is not held to
    /// one flush per event); the task's end waits for all of them. A plain call's event is
    /// checked and counted, and its "seq" is its 0-based position among the call's events. `event_type` is a vendor-prefixed name of three or more dot-separated labels
    /// (`com.example.build.step`); `payload` must be a JSON object within
    /// `--max-payload-bytes`.
    ///
    /// # Errors
    /// [`ToolError::Cancelled`] once the task was cancelled (stop and return it);
    /// [`ToolError::Failed`] saying why the event was refused (a bad type, a payload that is not
    /// an object or too large, a full store).
    pub fn emit(&mut self, event_type: &str, payload: &Value) -> Result<u64, ToolError> {
        let bytes = object_bytes(payload)?;
        self.sink.emit(None, event_type, &bytes)
    }

    /// [`emit`](Self::emit) with a payload that is already compact JSON object text: no
    /// parsing or serialising on the way to the log.
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub fn emit_json(&mut self, event_type: &str, payload: &[u8]) -> Result<u64, ToolError> {
        self.sink.emit(None, event_type, payload)
    }

    /// [`emit`](Self::emit) only if the event would get seq `expected` (compare-and-set):
    /// retrying an append whose outcome was not seen never records it twice.
    ///
    /// # Errors
    /// [`ToolError::SeqMismatch`] with the seq the next event would get, and nothing appended;
    /// otherwise as [`emit`](Self::emit).
    pub fn emit_expecting(
        &mut self,
        expected: u64,
        event_type: &str,
        payload: &Value,
    ) -> Result<u64, ToolError> {
        let bytes = object_bytes(payload)?;
        self.sink.emit(Some(expected), event_type, &bytes)
    }

    /// Emits a checkpoint (docs/interface.md, "Checkpoints"; CP-01): an event of type
    /// `dev.taskstream.checkpoint` with payload `{"coversThrough": SEQ, "state": state}`, where
    /// `SEQ` is the seq of the event just before it and `state` the task's accumulated state
    /// after every event up to it, as the tool defines it. Returns its seq. Under
    /// `--retain-from-checkpoint` every earlier event of the task is dropped once it is
    /// appended, so a late joiner starts from it; a state that grows without bound is the
    /// tool's choice and cost.
    ///
    /// # Errors
    /// [`ToolError::Failed`] when `state` is not a JSON object, or when the checkpoint's
    /// payload exceeds `--max-payload-bytes` (nothing is stored: a checkpoint is one event,
    /// never split); otherwise as [`emit`](Self::emit).
    pub fn checkpoint(&mut self, state: &Value) -> Result<u64, ToolError> {
        if !state.is_object() {
            return Err(ToolError::Failed(
                "a checkpoint's state must be a JSON object".into(),
            ));
        }
        let state = serde_json::to_string(state)
            .map_err(|e| ToolError::Failed(format!("checkpoint state: {e}")))?;
        // The seq the checkpoint will get, asked without appending anything (no event can
        // have seq u64::MAX); its predecessor is what the state covers.
        let mut next = match self.sink.emit(Some(u64::MAX), CHECKPOINT_EVENT_TYPE, b"{}") {
            Err(ToolError::SeqMismatch { next, .. }) => next,
            Err(e) => return Err(e),
            Ok(_) => {
                return Err(ToolError::Failed(
                    "a checkpoint's position could not be found".into(),
                ))
            }
        };
        loop {
            let covers = next.saturating_sub(1);
            let payload = format!(r#"{{"coversThrough":{covers},"state":{state}}}"#);
            match self
                .sink
                .emit(Some(next), CHECKPOINT_EVENT_TYPE, payload.as_bytes())
            {
                // Another event of the task landed meanwhile (its status): cover it too.
                Err(ToolError::SeqMismatch { next: n, .. }) if n > next => next = n,
                Err(ToolError::Failed(m)) => {
                    return Err(ToolError::Failed(format!("checkpoint refused: {m}")))
                }
                other => return other,
            }
        }
    }

    /// Reports progress: in a task, an event `dev.taskstream.progress`
    /// `{progress, total?, message?}`; in a plain call with a `progressToken`,
    /// `notifications/progress` (only when `progress` is above the last one reported, as MCP
    /// asks).
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ToolError> {
        self.sink.progress(progress, total, message)
    }

    /// Whether the call was cancelled (`tasks/cancel`, `notifications/cancelled`, or the
    /// server stopping).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.sink.is_cancelled()
    }

    /// Blocks until the call is cancelled or `timeout` passes; whether it was cancelled.
    #[must_use]
    pub fn wait_cancelled(&self, timeout: Duration) -> bool {
        self.sink.wait_cancelled(deadline_after(timeout))
    }

    /// Runs `callback` the moment the call is cancelled, on the thread that cancels it (at once
    /// if it already was): to stop work the handler does not wait on itself, such as a child
    /// process or a request to another server. Keep it short; it must not block.
    pub fn on_cancel(&mut self, callback: impl FnOnce() + Send + 'static) {
        self.sink.on_cancel(Box::new(callback));
    }

    /// Asks the client for something and waits for its answer: `method` is a request a
    /// server makes of its client (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`), `params` its params; the answer is the client's result.
    ///
    /// - In a 2026-07-28 task (SEP-2663) the task is `input_required` while it waits:
    ///   `tasks/get` shows the request under `inputRequests`, the client answers with
    ///   `tasks/update` (from any connection, at any time before `timeout`), and the task is
    ///   `working` again. The stream has a `dev.taskstream.task.status` event for each change.
    /// - In a 2025-11-25 task the request goes to a 2025-11-25 session of the task's principal
    ///   on stdio; in a plain call, to the call's own client if it is one.
    ///
    /// # Errors
    /// [`AskError::Cancelled`] when the call is cancelled meanwhile; [`AskError::Refused`]
    /// with the client's error; [`AskError::Unanswered`] when no client can be asked or none
    /// answered within `timeout`.
    ///
    /// ```no_run
    /// # use serde_json::json;
    /// # fn handler(ctx: &mut taskstream_server::tool::TaskContext<'_>) -> Result<(), taskstream_server::tool::ToolError> {
    /// let answer = ctx.ask(
    ///     "elicitation/create",
    ///     json!({"message": "Deploy to production?", "requestedSchema": {"type": "object"}}),
    ///     std::time::Duration::from_secs(600),
    /// )?;
    /// if answer["action"] != "accept" {
    ///     return Err(taskstream_server::tool::ToolError::failed("the deployment was not confirmed"));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn ask(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        self.sink.ask(method, params, deadline_after(timeout))
    }

    /// Sleeps for `duration`, waking early on cancellation.
    ///
    /// # Errors
    /// [`ToolError::Cancelled`] if the call was cancelled meanwhile.
    pub fn sleep(&mut self, duration: Duration) -> Result<(), ToolError> {
        self.sleep_until(deadline_after(duration))
    }

    /// Sleeps until `deadline`, waking early on cancellation.
    ///
    /// # Errors
    /// [`ToolError::Cancelled`] if the call was cancelled meanwhile.
    pub fn sleep_until(&mut self, deadline: Instant) -> Result<(), ToolError> {
        if self.sink.wait_cancelled(deadline) {
            Err(ToolError::Cancelled)
        } else {
            Ok(())
        }
    }
}

fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}

fn object_bytes(payload: &Value) -> Result<Vec<u8>, ToolError> {
    if !payload.is_object() {
        return Err(ToolError::failed("an event payload must be a JSON object"));
    }
    serde_json::to_vec(payload)
        .map_err(|_| ToolError::failed("an event payload could not be serialised"))
}

/// What one step of a [stepped](Tool::stepped) handler asks for next.
#[derive(Debug)]
#[non_exhaustive]
pub enum Step {
    /// Run the next step at `Instant` (or soon after, or at once on cancellation). Until then
    /// the task holds no thread.
    WakeAt(Instant),
    /// The work is done, with this result.
    Done(ToolResult),
}

/// A call's work cut into steps, for tools whose tasks spend most of their time waiting (a
/// timer, a poll, a schedule): between two steps a task holds no thread, so a server can keep
/// tens of thousands of them running. The server runs each step on a small shared pool.
///
/// A step should return quickly: emit what is due, then [`Step::WakeAt`] the next time there is
/// work. Blocking in a step ([`TaskContext::sleep`], [`TaskContext::ask`], a long computation)
/// holds one of the pool's few threads and delays other tasks' steps: a tool that blocks belongs
/// in [`Tool::new`]. A step that returns [`ToolError::Cancelled`] (or runs after the task was
/// cancelled, which the server checks before each step) ends the work as cancelled.
///
/// Any `FnMut(&mut TaskContext<'_>) -> Result<Step, ToolError> + Send` is a `Steps`.
pub trait Steps: Send {
    /// Does the work that is due now.
    ///
    /// # Errors
    /// [`ToolError`] to end the work: cancelled, or failed.
    fn step(&mut self, ctx: &mut TaskContext<'_>) -> Result<Step, ToolError>;
}

impl<F> Steps for F
where
    F: FnMut(&mut TaskContext<'_>) -> Result<Step, ToolError> + Send,
{
    fn step(&mut self, ctx: &mut TaskContext<'_>) -> Result<Step, ToolError> {
        self(ctx)
    }
}

/// Runs `steps` to their end on this thread, sleeping (and waking early on cancellation)
/// between them: how a stepped tool serves a plain call.
///
/// # Errors
/// The first step's error, or [`ToolError::Cancelled`] when cancelled while waiting.
pub(crate) fn drive(
    steps: &mut dyn Steps,
    ctx: &mut TaskContext<'_>,
) -> Result<ToolResult, ToolError> {
    loop {
        match steps.step(ctx)? {
            Step::WakeAt(at) => ctx.sleep_until(at)?,
            Step::Done(result) => return Ok(result),
        }
    }
}

/// Starts a stepped call's work from its arguments (already checked against the input schema).
pub type StartSteps = dyn Fn(&Map<String, Value>) -> Box<dyn Steps> + Send + Sync;

/// A tool's handler: the call's arguments (already checked against the input schema) and its
/// context.
pub type Handler = dyn Fn(&mut TaskContext<'_>, &Map<String, Value>) -> Result<ToolResult, ToolError>
    + Send
    + Sync;

type Check = dyn Fn(&Map<String, Value>) -> Result<(), String> + Send + Sync;
type Estimate = dyn Fn(&Map<String, Value>) -> Option<u64> + Send + Sync;

/// A tool: its definition as `tools/list` shows it, and the handler that runs its calls.
#[derive(Clone)]
pub struct Tool {
    definition: Map<String, Value>,
    handler: Arc<Handler>,
    /// How a task of a stepped tool starts, to run without a thread of its own.
    stepper: Option<Arc<StartSteps>>,
    check: Option<Arc<Check>>,
    estimate: Option<Arc<Estimate>>,
    validate: bool,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool called `name`. `input_schema` is a JSON Schema object; the server checks each
    /// call's arguments against its `required`, `additionalProperties: false`, and per property
    /// `type` (`integer`, `number`, `string`, `boolean`, `object`, `array`), `minimum`,
    /// `maximum`, `exclusiveMinimum` and string `enum`: a call that does not fit is answered
    /// with a tool error naming the field, before any task is created. Other keywords are shown
    /// to clients and not enforced: check them in the handler.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl Fn(&mut TaskContext<'_>, &Map<String, Value>) -> Result<ToolResult, ToolError>
            + Send
            + Sync
            + 'static,
    ) -> Tool {
        let mut definition = Map::new();
        definition.insert("name".into(), Value::String(name.into()));
        definition.insert("description".into(), Value::String(description.into()));
        definition.insert("inputSchema".into(), input_schema);
        Tool {
            definition,
            handler: Arc::new(handler),
            stepper: None,
            check: None,
            estimate: None,
            validate: true,
        }
    }

    /// A tool whose work is cut into [`Steps`]: its tasks wait between steps without a thread
    /// of their own (a plain call runs the steps on its request's thread, sleeping between
    /// them). `start` makes a call's steps from its arguments; the schema is checked as
    /// [`Tool::new`] says.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use serde_json::json;
    /// use taskstream_server::tool::{Step, Steps, Tool, ToolResult};
    ///
    /// // One heartbeat a minute for `beats` minutes: 10 000 of these tasks hold no threads.
    /// let heartbeat = Tool::stepped(
    ///     "heartbeat",
    ///     "Emits a heartbeat every minute",
    ///     json!({"type": "object", "properties": {"beats": {"type": "integer", "minimum": 1}}}),
    ///     |args| {
    ///         let beats = args.get("beats").and_then(|v| v.as_u64()).unwrap_or(1);
    ///         let mut n = 0;
    ///         let mut next = Instant::now();
    ///         Box::new(move |ctx: &mut taskstream_server::tool::TaskContext<'_>| {
    ///             ctx.emit("com.example.heartbeat", &json!({ "n": n }))?;
    ///             n += 1;
    ///             if n == beats {
    ///                 return Ok(Step::Done(ToolResult::text("done")));
    ///             }
    ///             next += Duration::from_secs(60);
    ///             Ok(Step::WakeAt(next))
    ///         }) as Box<dyn Steps>
    ///     },
    /// );
    /// assert_eq!(heartbeat.name(), "heartbeat");
    /// ```
    pub fn stepped(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        start: impl Fn(&Map<String, Value>) -> Box<dyn Steps> + Send + Sync + 'static,
    ) -> Tool {
        let start: Arc<StartSteps> = Arc::new(start);
        let plain = Arc::clone(&start);
        let mut tool = Tool::new(name, description, input_schema, move |ctx, args| {
            drive(&mut *plain(args), ctx)
        });
        tool.stepper = Some(start);
        tool
    }

    /// A tool whose `tools/list` entry is `definition` exactly as given (it must have a string
    /// `name`), with no argument checking by the server: for relaying another server's tools.
    #[must_use]
    pub fn relayed(definition: Map<String, Value>, handler: Arc<Handler>) -> Tool {
        Tool {
            definition,
            handler,
            stepper: None,
            check: None,
            estimate: None,
            validate: false,
        }
    }

    /// Sets the human-readable `title`.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Tool {
        self.definition
            .insert("title".into(), Value::String(title.into()));
        self
    }

    /// Adds a check of the arguments beyond the schema, run before any task is created; its
    /// error is answered as a tool error (`isError: true`).
    #[must_use]
    pub fn check_arguments(
        mut self,
        check: impl Fn(&Map<String, Value>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Tool {
        self.check = Some(Arc::new(check));
        self
    }

    /// How many events a call will emit, when known: a plain call reports it as the `total`
    /// of its per-event progress.
    #[must_use]
    pub fn expected_events(
        mut self,
        estimate: impl Fn(&Map<String, Value>) -> Option<u64> + Send + Sync + 'static,
    ) -> Tool {
        self.estimate = Some(Arc::new(estimate));
        self
    }

    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The `tools/list` entry, before the era's additions.
    pub(crate) fn definition(&self) -> &Map<String, Value> {
        &self.definition
    }

    /// Checks a call's arguments.
    ///
    /// # Errors
    /// The message of the tool error to answer.
    pub(crate) fn check(&self, args: &Map<String, Value>) -> Result<(), String> {
        if self.validate {
            let schema = self.definition.get("inputSchema").unwrap_or(&Value::Null);
            validate(args, schema)?;
        }
        match &self.check {
            Some(c) => c(args),
            None => Ok(()),
        }
    }

    /// How a task of this tool starts its steps, if it is a stepped tool.
    pub(crate) fn stepper(&self) -> Option<&Arc<StartSteps>> {
        self.stepper.as_ref()
    }

    /// The expected number of events of a call.
    pub(crate) fn estimate(&self, args: &Map<String, Value>) -> Option<u64> {
        self.estimate.as_ref().and_then(|e| e(args))
    }

    /// Runs the handler to its end. A handler that panics ends its call failed; the server
    /// goes on.
    pub(crate) fn run(
        &self,
        args: &Map<String, Value>,
        sink: &mut dyn Sink,
    ) -> Result<Outcome, ToolError> {
        let mut ctx = TaskContext::new(sink);
        let ran = catch_unwind(AssertUnwindSafe(|| (self.handler)(&mut ctx, args)));
        match ran {
            Ok(Ok(result)) => Ok(result.into()),
            Ok(Err(e)) => Err(e),
            Err(panic) => Err(self.panicked(&*panic)),
        }
    }

    /// Logs a panic of this tool's code, and says to the client that the call failed (without
    /// the panic's words, which are the host's).
    pub(crate) fn panicked(&self, panic: &(dyn std::any::Any + Send)) -> ToolError {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        log!(Error, "tool {}: the handler panicked: {what}", self.name());
        ToolError::Failed(format!(
            "the tool {} failed unexpectedly (the server's log says why)",
            self.name()
        ))
    }
}

/// A validated call, ready to run.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    /// The tool.
    pub(crate) tool: Arc<Tool>,
    /// Its arguments.
    pub(crate) args: Map<String, Value>,
}

impl Workload {
    /// How many events the call emits if it runs to the end, when known.
    pub(crate) fn total_events(&self) -> Option<u64> {
        self.tool.estimate(&self.args)
    }

    /// Runs the call to its end.
    ///
    /// # Errors
    /// [`ToolError::Cancelled`] when it stopped for a cancellation, another [`ToolError`] when
    /// it failed.
    pub(crate) fn run(&self, sink: &mut dyn Sink) -> Result<Outcome, ToolError> {
        self.tool.run(&self.args, sink)
    }
}

/// The tools one server offers, by name, in the order given.
#[derive(Clone, Debug, Default)]
pub(crate) struct Registry {
    tools: Vec<Arc<Tool>>,
}

impl Registry {
    /// A registry of `tools`; a later tool of the same name replaces an earlier one.
    pub(crate) fn new(tools: Vec<Tool>) -> Registry {
        let mut r = Registry::default();
        for t in tools {
            r.tools.retain(|old| old.name() != t.name());
            r.tools.push(Arc::new(t));
        }
        r
    }

    /// The tool called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Every tool, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.iter()
    }
}

/// Checks `args` against an object schema of the vocabulary [`Tool::new`] names.
///
/// # Errors
/// `field: why`.
pub(crate) fn validate(args: &Map<String, Value>, schema: &Value) -> Result<(), String> {
    let bad = |field: &str, why: &str| Err(format!("{field}: {why}"));
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            if !args.contains_key(field) {
                return bad(field, "required");
            }
        }
    }
    for (field, value) in args {
        let Some(prop) = props.get(field) else {
            if closed {
                return bad(field, "unknown argument");
            }
            continue;
        };
        let number = match prop.get("type").and_then(Value::as_str) {
            Some("integer") => match value.as_u64() {
                Some(n) => n as f64,
                None => match value.as_i64() {
                    Some(n) => n as f64,
                    None => return bad(field, "must be an integer"),
                },
            },
            Some("number") => match value.as_f64() {
                Some(x) => x,
                None => return bad(field, "must be a number"),
            },
            Some("string") => {
                let Some(s) = value.as_str() else {
                    return bad(field, "must be a string");
                };
                if let Some(allowed) = prop.get("enum").and_then(Value::as_array) {
                    if !allowed.iter().any(|a| a.as_str() == Some(s)) {
                        let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
                        return bad(field, &format!("must be one of {}", names.join(", ")));
                    }
                }
                continue;
            }
            Some("boolean") if !value.is_boolean() => return bad(field, "must be a boolean"),
            Some("object") if !value.is_object() => return bad(field, "must be an object"),
            Some("array") if !value.is_array() => return bad(field, "must be an array"),
            _ => continue,
        };
        if let Some(min) = prop.get("minimum").and_then(Value::as_f64) {
            if number < min {
                if min == 0.0 {
                    return bad(field, "must not be negative");
                }
                return bad(field, &format!("must be at least {min}"));
            }
        }
        if let Some(min) = prop.get("exclusiveMinimum").and_then(Value::as_f64) {
            if number <= min {
                return bad(field, &format!("must be greater than {min}"));
            }
        }
        if let Some(max) = prop.get("maximum").and_then(Value::as_f64) {
            if number > max {
                return bad(field, &format!("must be at most {max}"));
            }
        }
    }
    Ok(())
}
