//! One connection to the server under test, in one era: a JSON-RPC client that sends requests,
//! waits for their answers with deadlines, and routes every task event it reads.
//!
//! JSON-RPC ties no notification to a request, so events are routed by `params.taskId`: SEP-2694
//! allows one active stream per task per connection, so the task names the stream. What cannot
//! be placed is kept as an observation for the rule it bears on: an event for a task the client
//! created but is not streaming is unsolicited (NT-03); one for a task whose stream was
//! cancelled, after a barrier proved the server had read the cancellation, breaks DX-04; one
//! naming a task nobody streams breaks EV-01. [`Session::finish`] turns these, the per-event
//! rules and the closing results into evidence.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::{Era, TaskProfile};
use crate::event::Event;
use crate::wire::{Incoming, ServerUnderTest};

mod reply;
mod stream;
mod verdicts;

pub(crate) use reply::{Broken, ConnectError, ReceivedError, Reply};
pub(crate) use stream::{After, StreamId, StreamRec, StreamState};

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The Tasks extension (SEP-2663).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Stands in for a raw `after` literal until the request is serialised.
const AFTER_SENTINEL: &str = "@@conformance-after@@";

/// Pause between two `tasks/get` polls, spent listening to the connection.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// One connection, in one era.
pub(crate) struct Session {
    server: ServerUnderTest,
    era: Era,
    timeout: Duration,
    next_id: u64,
    replies: HashMap<u64, Reply>,
    streams: Vec<StreamRec>,
    known_tasks: BTreeSet<String>,
    /// Tasks `tasks/get` has shown terminal: their history is final.
    terminal_tasks: BTreeSet<String>,
    /// `tools/call` requests awaiting their answer: an event for a task not yet known may belong
    /// to the task being created.
    creating: usize,
    orphans: Vec<Event>,
    unsolicited: Vec<String>,
    after_cancel: Vec<String>,
    exited: bool,
}

impl Session {
    /// Starts `command` and opens a session in `era`: `server/discover` (modern) or the
    /// `initialize` handshake (legacy). Answers the handshake's result too.
    pub(crate) fn connect(
        command: &[String],
        era: Era,
        timeout: Duration,
        label: &str,
        verbose: bool,
    ) -> Result<(Session, Value), ConnectError> {
        let server = match crate::wire::http_url(command) {
            Some(url) => ServerUnderTest::connect_http(url, era == Era::Modern, label, verbose)
                .map_err(|error| ConnectError::Failed(format!("{url}: {error}")))?,
            None => ServerUnderTest::spawn(command, label, verbose).map_err(|error| {
                ConnectError::Failed(format!("could not start {:?}: {error}", command.join(" ")))
            })?,
        };
        let mut session = Session {
            server,
            era,
            timeout,
            next_id: 1,
            replies: HashMap::new(),
            streams: Vec::new(),
            known_tasks: BTreeSet::new(),
            terminal_tasks: BTreeSet::new(),
            creating: 0,
            orphans: Vec::new(),
            unsolicited: Vec::new(),
            after_cancel: Vec::new(),
            exited: false,
        };
        let (method, params) = match era {
            Era::Modern => ("server/discover", session.with_meta(json!({}))),
            Era::Legacy => (
                "initialize",
                json!({
                    "protocolVersion": era.protocol_version(),
                    "capabilities": {},
                    "clientInfo": {"name": "taskstream-conformance", "version": env!("CARGO_PKG_VERSION")},
                }),
            ),
        };
        let reply = match session.call(method, params) {
            Ok(reply) => reply,
            Err(Broken::Exited(why)) => return Err(ConnectError::Failed(why)),
            Err(Broken::Timeout(why)) => return Err(ConnectError::NotSpoken(why)),
        };
        let result = match reply {
            Reply::Result(result) => result,
            Reply::Error(error) => {
                return Err(ConnectError::NotSpoken(format!(
                    "{method} answered {error}"
                )));
            }
        };
        if era == Era::Legacy {
            session
                .notify("notifications/initialized", json!({}))
                .map_err(|b| ConnectError::Failed(b.to_string()))?;
        }
        Ok((session, result))
    }

    pub(crate) fn era(&self) -> Era {
        self.era
    }

    /// Whether the session speaks Streamable HTTP (else stdio).
    pub(crate) fn is_http(&self) -> bool {
        self.server.is_http()
    }

    /// Stops (true) or resumes (false) reading from the server: a slow client.
    pub(crate) fn pause_reading(&self, pause: bool) {
        self.server.pause_reading(pause);
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `now + timeout`.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// The modern era's required `_meta`, declaring the Tasks extension or not.
    pub(crate) fn modern_meta(declare_tasks: bool) -> Value {
        let capabilities = if declare_tasks {
            json!({"extensions": {TASKS_EXTENSION: {}}})
        } else {
            json!({})
        };
        json!({
            PROTOCOL_VERSION: Era::Modern.protocol_version(),
            CLIENT_CAPABILITIES: capabilities,
            CLIENT_INFO: {"name": "taskstream-conformance", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    /// `params` with the era's standard `_meta` added (modern; legacy needs none).
    pub(crate) fn with_meta(&self, mut params: Value) -> Value {
        if self.era == Era::Modern {
            if let Some(object) = params.as_object_mut() {
                object.insert("_meta".to_owned(), Session::modern_meta(true));
            }
        }
        params
    }

    fn send_line(&mut self, line: &str) -> Result<(), Broken> {
        let http = self.server.is_http();
        self.server.send(line).map_err(|error| {
            if http {
                return Broken::Exited(format!("could not reach the endpoint ({error})"));
            }
            Broken::Exited(format!(
                "could not write to the server ({error}); its stderr began: {:?}",
                self.server.stderr_head()
            ))
        })
    }

    fn notify(&mut self, method: &str, params: Value) -> Result<(), Broken> {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.send_line(&line)
    }

    fn send_request_text(&mut self, method: &str, params: Value) -> (u64, String) {
        let id = self.next_id;
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        (id, line)
    }

    /// Sends a request with `params` exactly as given and waits for its answer.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Reply, Broken> {
        let (id, line) = self.send_request_text(method, params);
        let creating = method == "tools/call";
        if creating {
            self.creating += 1;
        }
        let sent = self.send_line(&line);
        let reply = match sent {
            Ok(()) => self.wait_reply(id, self.deadline()),
            Err(broken) => {
                if creating {
                    self.creating -= 1;
                }
                return Err(broken);
            }
        };
        if creating {
            self.creating -= 1;
        }
        reply.ok_or_else(|| self.broken(&format!("answer to {method}")))
    }

    /// Why a wait for `awaited` ended empty-handed.
    fn broken(&self, awaited: &str) -> Broken {
        if self.exited && self.server.is_http() {
            Broken::Exited(format!(
                "the endpoint stopped accepting connections before the {awaited} came"
            ))
        } else if self.exited {
            Broken::Exited(format!(
                "the server exited before the {awaited} came; its stderr began: {:?}",
                self.server.stderr_head()
            ))
        } else {
            Broken::Timeout(format!(
                "no {awaited} within {} ms",
                self.timeout.as_millis()
            ))
        }
    }

    fn wait_reply(&mut self, id: u64, deadline: Instant) -> Option<Reply> {
        loop {
            if let Some(reply) = self.replies.remove(&id) {
                return Some(reply);
            }
            if !self.pump(deadline) {
                return self.replies.remove(&id);
            }
        }
    }

    /// Reads and routes one item; `false` once `deadline` has passed or the server is gone.
    fn pump(&mut self, deadline: Instant) -> bool {
        match self.server.recv(deadline) {
            None => false,
            Some(Incoming::Closed) => {
                self.exited = true;
                false
            }
            Some(Incoming::Garbage(_)) => true,
            Some(Incoming::Message(message)) => {
                self.route(message);
                true
            }
        }
    }

    /// Routes incoming messages until `done` holds (true) or `deadline` passes (false).
    pub(crate) fn wait_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&Session) -> bool,
    ) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if !self.pump(deadline) {
                return done(self);
            }
        }
    }

    /// Routes whatever arrives until `until`: how the suite watches for things that must not
    /// come.
    pub(crate) fn listen(&mut self, until: Instant) {
        while self.pump(until) {}
    }

    fn route(&mut self, message: Value) {
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            if let Some(id) = message.get("id") {
                self.answer_server_request(id.clone(), method);
            } else if method == "notifications/tasks/event" {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.route_event(Event::parse(&params));
            }
            return;
        }
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            return;
        };
        let reply = match message.get("error") {
            Some(error) => Reply::Error(ReceivedError::parse(error)),
            None => Reply::Result(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let Some(stream) = self.streams.iter_mut().find(|s| s.request_id == id) else {
            self.replies.insert(id, reply);
            return;
        };
        match stream.state {
            StreamState::Open | StreamState::Cancelling => {
                stream.reply = Some(reply);
                stream.state = StreamState::Closed;
            }
            StreamState::Cancelled => self.after_cancel.push(format!(
                "the cancelled tasks/stream request {id} (task {}) was answered: {reply}",
                stream.task_id
            )),
            StreamState::Closed => {}
        }
    }

    /// Places one event, by these rules in turn:
    /// 1. the active stream opened for its task takes it;
    /// 2. if that task's stream was cancelled (and the barrier answered), it breaks DX-04;
    /// 3. an active stream opened for an inaccessible task id takes it as a leak (SE-03);
    /// 4. if its task is one this session created, it is unsolicited (NT-03);
    /// 5. with exactly one stream active and no task being created whose id it might carry, that
    ///    stream takes it (EV-01 then judges the id);
    /// 6. otherwise it waits as an orphan until [`Session::finish`] can tell.
    fn route_event(&mut self, event: Event) {
        let task = event.task_id.clone();
        let own = |s: &StreamRec| task.as_ref() == Some(&s.task_id);
        if let Some(stream) = self.streams.iter_mut().find(|s| s.is_active() && own(s)) {
            stream.events.push(event);
            return;
        }
        if let Some(stream) = self
            .streams
            .iter()
            .find(|s| s.state == StreamState::Cancelled && own(s))
        {
            self.after_cancel.push(format!(
                "{} arrived for the cancelled tasks/stream request {}",
                event.describe(),
                stream.request_id
            ));
            return;
        }
        if let Some(stream) = self
            .streams
            .iter_mut()
            .rev()
            .find(|s| s.foreign && s.is_active())
        {
            stream.events.push(event);
            return;
        }
        if let Some(task) = task.filter(|task| self.known_tasks.contains(task)) {
            self.unsolicited.push(format!(
                "{} for task {task}, which had no active tasks/stream",
                event.describe()
            ));
            return;
        }
        let active: Vec<usize> = (0..self.streams.len())
            .filter(|i| self.streams.get(*i).is_some_and(StreamRec::is_active))
            .collect();
        if let ([only], 0) = (active.as_slice(), self.creating) {
            if let Some(stream) = self.streams.get_mut(*only) {
                stream.events.push(event);
                return;
            }
        }
        self.orphans.push(event);
    }

    fn answer_server_request(&mut self, id: Value, method: &str) {
        // 2026-07-28 forbids the server to send requests and the client to send responses on
        // stdio, so a modern client stays silent; a legacy one answers as MCP requires.
        if self.era == Era::Modern {
            return;
        }
        let line = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
        };
        let _ = self.server.send(&line.to_string());
    }

    /// Calls `tools/call` so that it creates a task: legacy opts in with `params.task`, modern
    /// declares the Tasks extension. Answers the task id.
    pub(crate) fn create_task(
        &mut self,
        profile: &TaskProfile,
        args: &Value,
    ) -> Result<String, String> {
        let mut params = json!({"name": profile.tool, "arguments": args});
        if self.era == Era::Legacy {
            params["task"] = json!({"ttl": 60000});
        }
        let params = self.with_meta(params);
        let result = match self.call("tools/call", params) {
            Err(broken) => return Err(broken.to_string()),
            Ok(Reply::Error(error)) => {
                return Err(format!("tools/call {} answered {error}", profile.tool));
            }
            Ok(Reply::Result(result)) => result,
        };
        // Modern: a flat CreateTaskResult; legacy: {task: Task}. Either is accepted in either
        // era, since task creation is not what this suite judges.
        let id = result
            .get("taskId")
            .or_else(|| result.get("task").and_then(|task| task.get("taskId")))
            .and_then(Value::as_str);
        match id {
            Some(id) => {
                self.known_tasks.insert(id.to_owned());
                Ok(id.to_owned())
            }
            None => Err(format!(
                "tools/call {} did not create a task: {}",
                profile.tool,
                abbreviate(&result)
            )),
        }
    }

    /// `tasks/get` for `task`.
    pub(crate) fn tasks_get(&mut self, task: &str) -> Result<Reply, Broken> {
        let params = self.with_meta(json!({"taskId": task}));
        self.call("tasks/get", params)
    }

    /// The task's status by `tasks/get`.
    pub(crate) fn task_status(&mut self, task: &str) -> Result<String, String> {
        let status = match self.tasks_get(task) {
            Err(broken) => Err(broken.to_string()),
            Ok(Reply::Error(error)) => Err(format!("tasks/get {task} answered {error}")),
            Ok(Reply::Result(result)) => result
                .get("status")
                .or_else(|| result.get("task").and_then(|task| task.get("status")))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("tasks/get {task} has no status: {}", abbreviate(&result))),
        };
        if status.as_deref().is_ok_and(is_terminal) {
            self.terminal_tasks.insert(task.to_owned());
        }
        status
    }

    /// Polls `tasks/get` until the task is terminal, listening to the connection between polls.
    pub(crate) fn wait_terminal(
        &mut self,
        task: &str,
        deadline: Instant,
    ) -> Result<String, String> {
        loop {
            let status = self.task_status(task)?;
            if is_terminal(&status) {
                return Ok(status);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "task {task} was still {status:?} when the wait ended"
                ));
            }
            self.listen((now + POLL_EVERY).min(deadline));
        }
    }

    /// Sends `tasks/stream` for `task` with the standard `_meta`.
    pub(crate) fn open_stream(&mut self, task: &str, after: After<'_>) -> Result<StreamId, Broken> {
        let mut params = self.with_meta(json!({"taskId": task}));
        match after {
            After::Omitted => {}
            After::Seq(seq) => params["after"] = json!(seq),
            After::Literal(_) => params["after"] = json!(AFTER_SENTINEL),
        }
        let (id, line) = self.send_request_text("tasks/stream", params);
        let line = match after {
            After::Literal(text) => line.replacen(&format!("\"{AFTER_SENTINEL}\""), text, 1),
            _ => line,
        };
        let cursor = match after {
            After::Seq(seq) => Some(seq),
            After::Omitted | After::Literal(_) => None,
        };
        self.register_stream(id, task, after.shown(), cursor, &line, false)
    }

    /// Sends `tasks/stream` with `params` exactly as given (for the `_meta` checks).
    pub(crate) fn open_stream_exact(
        &mut self,
        task: &str,
        params: Value,
    ) -> Result<StreamId, Broken> {
        let cursor = params.get("after").and_then(Value::as_u64);
        let (id, line) = self.send_request_text("tasks/stream", params);
        let shown = cursor.map_or_else(|| "omitted".to_owned(), |seq| seq.to_string());
        self.register_stream(id, task, shown, cursor, &line, false)
    }

    /// Sends `tasks/stream` without `after` for a task id the client cannot access; events of
    /// other tasks that arrive meanwhile are taken to be leaked to it.
    pub(crate) fn open_foreign_stream(&mut self, task: &str) -> Result<StreamId, Broken> {
        let params = self.with_meta(json!({"taskId": task}));
        let (id, line) = self.send_request_text("tasks/stream", params);
        self.register_stream(id, task, "omitted".to_owned(), None, &line, true)
    }

    /// Leaves the stream out of EV-04: it is expected to see duplicates.
    pub(crate) fn unordered(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.get_mut(id.0) {
            stream.ordered = false;
        }
    }

    fn register_stream(
        &mut self,
        request_id: u64,
        task: &str,
        after: String,
        cursor: Option<u64>,
        line: &str,
        foreign: bool,
    ) -> Result<StreamId, Broken> {
        self.streams.push(StreamRec {
            request_id,
            task_id: task.to_owned(),
            after,
            cursor,
            on_terminal: self.terminal_tasks.contains(task),
            state: StreamState::Open,
            events: Vec::new(),
            reply: None,
            foreign,
            ordered: true,
        });
        let handle = StreamId(self.streams.len() - 1);
        self.send_line(line)?;
        Ok(handle)
    }

    pub(crate) fn stream(&self, id: StreamId) -> &StreamRec {
        // Handles are only made by `register_stream` and streams are never removed.
        &self.streams[id.0]
    }

    /// Waits until the stream is answered or `deadline` passes. A stream still open then is
    /// cancelled, so that it cannot disturb what follows.
    pub(crate) fn collect(&mut self, id: StreamId, deadline: Instant) -> Result<(), Broken> {
        self.wait_until(deadline, |s| s.stream(id).state != StreamState::Open);
        if self.stream(id).state == StreamState::Open {
            self.cancel(id)?;
        }
        if self.exited {
            return Err(self.broken("end of the stream"));
        }
        Ok(())
    }

    /// Cancels an open stream with `notifications/cancelled`, then sends a `tasks/get` as a
    /// barrier: once it is answered the server has read the cancellation, and anything it sends
    /// later for the stream breaks DX-04.
    pub(crate) fn cancel(&mut self, id: StreamId) -> Result<(), Broken> {
        let Some(stream) = self.streams.get_mut(id.0) else {
            return Ok(());
        };
        if stream.state != StreamState::Open {
            return Ok(());
        }
        stream.state = StreamState::Cancelling;
        let request_id = stream.request_id;
        let task = stream.task_id.clone();
        self.notify(
            "notifications/cancelled",
            json!({"requestId": request_id, "reason": "conformance check"}),
        )?;
        let barrier = self.tasks_get(&task);
        if let Some(stream) = self.streams.get_mut(id.0) {
            if stream.state == StreamState::Cancelling {
                stream.state = StreamState::Cancelled;
            }
        }
        barrier.map(|_| ())
    }

    /// Events for tasks this session created that arrived with no stream open for them.
    pub(crate) fn unsolicited(&mut self) -> &[String] {
        self.settle_orphans();
        &self.unsolicited
    }

    /// What arrived for cancelled streams after the server had read the cancellation.
    pub(crate) fn after_cancel(&self) -> &[String] {
        &self.after_cancel
    }

    /// Orphans whose task has since become known (its `tools/call` answered after them) were
    /// unsolicited.
    fn settle_orphans(&mut self) {
        let (known, unknown): (Vec<Event>, Vec<Event>) = std::mem::take(&mut self.orphans)
            .into_iter()
            .partition(|e| {
                e.task_id
                    .as_ref()
                    .is_some_and(|task| self.known_tasks.contains(task))
            });
        self.orphans = unknown;
        for event in known {
            self.unsolicited.push(format!(
                "{} for task {}, which had no active tasks/stream",
                event.describe(),
                event.task_id.as_deref().unwrap_or_default()
            ));
        }
    }
}

/// Whether a task status is terminal.
pub(crate) fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// A value as compact JSON, cut to a readable length.
pub(crate) fn abbreviate(value: &Value) -> String {
    const MAX: usize = 160;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviate_cuts_long_values() {
        let long = json!("x".repeat(500));
        let text = abbreviate(&long);
        assert!(text.ends_with("..."));
        assert_eq!(text.chars().count(), 163);
    }
}
