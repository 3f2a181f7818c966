//! The server's state and every method it answers. One thread owns it all: requests, timers and
//! stream delivery happen in one order, so what a client sees is deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod stream;

use stream::Stream;

use crate::faulty::fault::{Fault, Faults};
use crate::faulty::task::{Emit, Record, Status, Task};

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
const MODERN: &str = "2026-07-28";
/// The type of a checkpoint event (taskstream's `dev.taskstream.checkpoint`).
const CHECKPOINT: &str = "dev.taskstream.checkpoint";

/// The largest valid seq: an integer from 0 to 2^53 - 1.
const MAX_SEQ: u64 = (1 << 53) - 1;

/// Settings from the command line.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) faults: Faults,
    pub(crate) max_events: usize,
    /// Events older than this are dropped, when set.
    pub(crate) max_age: Option<Duration>,
    pub(crate) max_streams: usize,
    /// Keep each task's events from its latest checkpoint on, and advertise it.
    pub(crate) retain_from_checkpoint: bool,
}

/// A JSON-RPC error to answer.
struct OutgoingError {
    code: i64,
    message: String,
    data: Option<Value>,
}

fn error(code: i64, message: impl Into<String>) -> OutgoingError {
    OutgoingError {
        code,
        message: message.into(),
        data: None,
    }
}

/// What a request gets: an answer now, or nothing yet (an open stream).
enum Answer {
    Now(Result<Value, OutgoingError>),
    Later,
}

/// The reference server: its tasks and streams, and the faults it commits on purpose.
pub(crate) struct FaultyServer<W: Write> {
    opts: Options,
    out: W,
    /// An `initialize` handshake selected the legacy era for this process.
    legacy: bool,
    tasks: BTreeMap<String, Task>,
    streams: Vec<Stream>,
    /// Tasks a stream followed live to their end (drop-history-tail).
    followed: BTreeSet<String>,
    /// Tasks resumed with `after` once already (gone-on-resume).
    resumed: BTreeSet<String>,
    /// The task a `tools/call` is creating right now (push-unsolicited).
    creating: Option<String>,
    rng: u64,
}

impl<W: Write> FaultyServer<W> {
    pub(crate) fn new(opts: Options, out: W, seed: u64) -> FaultyServer<W> {
        FaultyServer {
            opts,
            out,
            legacy: false,
            tasks: BTreeMap::new(),
            streams: Vec::new(),
            followed: BTreeSet::new(),
            resumed: BTreeSet::new(),
            creating: None,
            rng: seed | 1,
        }
    }

    fn has(&self, fault: Fault) -> bool {
        self.opts.faults.has(fault)
    }

    fn write(&mut self, message: &Value) {
        // A client that has gone away is noticed as stdin EOF; nothing to do about it here.
        let _ = writeln!(self.out, "{message}");
        let _ = self.out.flush();
    }

    fn respond(&mut self, id: &Value, answer: Result<Value, OutgoingError>) {
        let message = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => {
                let mut err = json!({"code": e.code, "message": e.message});
                if let Some(data) = e.data {
                    err["data"] = data;
                }
                json!({"jsonrpc": "2.0", "id": id, "error": err})
            }
        };
        self.write(&message);
    }

    /// A result with `resultType: "complete"` in the modern era.
    fn complete(&self, mut result: Value) -> Value {
        if !self.legacy {
            if let Some(object) = result.as_object_mut() {
                object
                    .entry("resultType")
                    .or_insert_with(|| json!("complete"));
            }
        }
        result
    }

    /// The earliest instant a timer is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.tasks.values().filter_map(|t| t.due).min()
    }

    /// Handles one line from stdin.
    pub(crate) fn handle_line(&mut self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        // Only requests observe what is retained, so events age out as each one arrives.
        self.expire(Instant::now());
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(_) => {
                self.respond(&Value::Null, Err(error(-32700, "Parse error")));
                return;
            }
        };
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            if message.get("result").is_none() && message.get("error").is_none() {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                self.respond(&id, Err(error(-32600, "Invalid Request")));
            }
            return;
        };
        let method = method.to_owned();
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let Some(id) = message.get("id").cloned() else {
            self.notification(&method, &params);
            return;
        };
        if let Answer::Now(answer) = self.request(&id, &method, &params) {
            self.respond(&id, answer);
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            if let Some(request_id) = params.get("requestId") {
                self.cancel_stream(request_id);
            }
        }
    }

    fn request(&mut self, id: &Value, method: &str, params: &Value) -> Answer {
        if method == "initialize" {
            return Answer::Now(Ok(self.initialize(params)));
        }
        let declared = match self.check_meta(method, params) {
            Ok(declared) => declared,
            Err(e) => return Answer::Now(Err(e)),
        };
        let needs_extension = matches!(method, "tasks/get" | "tasks/cancel")
            || (method == "tasks/stream" && !self.has(Fault::NoExtCheck));
        if !self.legacy && needs_extension && !declared {
            let mut e = error(-32021, "Missing required client capability");
            e.data = Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}));
            return Answer::Now(Err(e));
        }
        let answer = match method {
            "ping" => Ok(json!({})),
            "server/discover" => Ok(self.discover()),
            "tools/list" => Ok(self.tools_list()),
            "tools/call" => self.tools_call(params, declared),
            "tasks/get" => self.tasks_get(params),
            "tasks/cancel" => self.tasks_cancel(params),
            "tasks/stream" if self.has(Fault::NoStreams) => Err(error(-32601, "Method not found")),
            "tasks/stream" => return self.tasks_stream(id, params),
            _ => Err(error(-32601, "Method not found")),
        };
        Answer::Now(answer)
    }

    /// Modern requests need `_meta` with the protocol version and client capabilities (MCP
    /// digest, a.4). Answers whether the Tasks extension was declared (always, in legacy).
    fn check_meta(&self, method: &str, params: &Value) -> Result<bool, OutgoingError> {
        if self.legacy {
            return Ok(true);
        }
        let meta = params.get("_meta");
        let version = meta
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str);
        let Some(version) = version else {
            if method == "tasks/stream" && self.has(Fault::NoMetaCheck) {
                return Ok(true);
            }
            return Err(error(
                -32602,
                "_meta needs io.modelcontextprotocol/protocolVersion",
            ));
        };
        if version != MODERN {
            let mut e = error(-32022, "Unsupported protocol version");
            e.data = Some(json!({"supported": [MODERN], "requested": version}));
            return Err(e);
        }
        let capabilities = meta
            .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
            .filter(|c| c.is_object())
            .ok_or_else(|| {
                error(
                    -32602,
                    "_meta needs io.modelcontextprotocol/clientCapabilities",
                )
            })?;
        Ok(capabilities
            .get("extensions")
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some_and(Value::is_object))
    }

    fn initialize(&mut self, params: &Value) -> Value {
        self.legacy = true;
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = requested
            .filter(|v| matches!(*v, "2025-11-25" | "2025-06-18"))
            .unwrap_or("2025-11-25");
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}, "eventStreams": {}},
            },
            "serverInfo": {"name": "faulty-server", "version": env!("CARGO_PKG_VERSION")},
        });
        self.advertise_checkpoints(&mut result);
        result
    }

    fn discover(&self) -> Value {
        let mut result = json!({
            "resultType": "complete",
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}, "dev.taskstream/event-streams": {}}},
            "serverInfo": {"name": "faulty-server", "version": env!("CARGO_PKG_VERSION")},
            "ttlMs": 60000,
            "cacheScope": "public",
        });
        self.advertise_checkpoints(&mut result);
        result
    }

    /// With `--retain-from-checkpoint`, taskstream's `experimental["dev.taskstream/checkpoints"]`.
    fn advertise_checkpoints(&self, result: &mut Value) {
        if self.opts.retain_from_checkpoint {
            result["capabilities"]["experimental"] = json!({
                "dev.taskstream/checkpoints": {
                    "eventType": CHECKPOINT,
                    "retainFromCheckpoint": true,
                },
            });
        }
    }

    fn tools_list(&self) -> Value {
        let mut result = json!({"tools": [{
            "name": "emit",
            "description": "Emits count tick events, interval_ms apart, as a task.",
            "inputSchema": {"type": "object", "properties": {
                "count": {"type": "integer", "minimum": 0},
                "interval_ms": {"type": "integer", "minimum": 0},
                "payload_bytes": {"type": "integer", "minimum": 0},
                "fail_at": {"type": "integer", "minimum": 0},
            }, "required": ["count"]},
            "execution": {"taskSupport": "optional"},
        }]});
        if !self.legacy {
            result["ttlMs"] = json!(60000);
            result["cacheScope"] = json!("public");
        }
        self.complete(result)
    }

    fn tools_call(&mut self, params: &Value, declared: bool) -> Result<Value, OutgoingError> {
        if params.get("name").and_then(Value::as_str) != Some("emit") {
            return Err(error(-32602, "Unknown tool"));
        }
        let emit = match Emit::parse(params.get("arguments").unwrap_or(&Value::Null)) {
            Ok(emit) => emit,
            Err(why) => {
                return Ok(self.complete(
                    json!({"content": [{"type": "text", "text": why}], "isError": true}),
                ));
            }
        };
        let as_task = if self.legacy {
            params.get("task").is_some_and(Value::is_object)
        } else {
            declared
        };
        if !as_task {
            let text = format!("emitted {} events", emit.count);
            return Ok(self.complete(json!({"content": [{"type": "text", "text": text}]})));
        }
        let id = self.new_task_id();
        let first_seq = u64::from(self.has(Fault::StartAtOne));
        self.tasks
            .insert(id.clone(), Task::new(id.clone(), emit, first_seq));
        self.creating = Some(id.clone());
        self.append(
            &id,
            "dev.taskstream.task.status",
            json!({"status": "working"}),
        );
        if emit.interval.is_zero() {
            while self.tasks.get(&id).is_some_and(|t| !t.status.is_terminal()) {
                self.tick(&id);
            }
        } else if let Some(task) = self.tasks.get_mut(&id) {
            task.due = Some(Instant::now() + emit.interval);
        }
        self.creating = None;
        let task = self.task_json(&id);
        Ok(if self.legacy {
            json!({"task": task})
        } else {
            let mut flat = task;
            flat["resultType"] = json!("task");
            flat
        })
    }

    fn new_task_id(&mut self) -> String {
        // xorshift64: unguessable enough for a test server, and never repeats within a run.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        format!("task-{:016x}", self.rng)
    }

    fn task_json(&self, id: &str) -> Value {
        let Some(task) = self.tasks.get(id) else {
            return Value::Null;
        };
        let mut json = json!({
            "taskId": task.id,
            "status": task.status.name(),
            "createdAt": task.created_at,
            "lastUpdatedAt": task.updated_at,
        });
        if self.legacy {
            json["ttl"] = json!(60000);
            json["pollInterval"] = json!(50);
        } else {
            json["ttlMs"] = json!(60000);
            json["pollIntervalMs"] = json!(50);
        }
        json
    }

    fn unknown_task(&self) -> OutgoingError {
        if self.has(Fault::UnknownTaskCode) {
            error(-32600, "Unknown task")
        } else {
            error(-32602, "Unknown task")
        }
    }

    fn task_id_param(params: &Value) -> Result<&str, OutgoingError> {
        params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| error(-32602, "taskId must be a string"))
    }

    fn tasks_get(&self, params: &Value) -> Result<Value, OutgoingError> {
        let id = Self::task_id_param(params)?;
        let Some(task) = self.tasks.get(id) else {
            return Err(self.unknown_task());
        };
        let mut json = self.task_json(id);
        if self.opts.retain_from_checkpoint {
            json["_meta"] = json!({"dev.taskstream/events": {"earliestSeq": task.earliest()}});
        }
        if !self.legacy {
            match task.status {
                Status::Completed => {
                    let text = format!("emitted {} events", task.emit.count);
                    json["result"] =
                        json!({"content": [{"type": "text", "text": text}], "isError": false});
                }
                Status::Failed => {
                    json["error"] = json!({"code": -32603, "message": "emit failed as asked"});
                }
                Status::Working | Status::Cancelled => {}
            }
        }
        Ok(self.complete(json))
    }

    fn tasks_cancel(&mut self, params: &Value) -> Result<Value, OutgoingError> {
        let id = Self::task_id_param(params)?.to_owned();
        let Some(task) = self.tasks.get(&id) else {
            return Err(self.unknown_task());
        };
        if task.status.is_terminal() {
            if self.legacy {
                return Err(error(-32602, "Task is already terminal"));
            }
            return Ok(self.complete(json!({})));
        }
        self.finish(&id, Status::Cancelled);
        if self.legacy {
            Ok(self.task_json(&id))
        } else {
            Ok(self.complete(json!({})))
        }
    }

    /// Drops every event older than the maximum age at `now`.
    fn expire(&mut self, now: Instant) {
        let Some(cutoff) = self.opts.max_age.and_then(|age| now.checked_sub(age)) else {
            return;
        };
        for task in self.tasks.values_mut() {
            task.expire(cutoff);
        }
    }

    /// Fires every timer due by `now`.
    pub(crate) fn fire_timers(&mut self, now: Instant) {
        let due: Vec<String> = self
            .tasks
            .values()
            .filter(|t| t.due.is_some_and(|d| d <= now))
            .map(|t| t.id.clone())
            .collect();
        for id in due {
            self.tick(&id);
            if let Some(task) = self.tasks.get_mut(&id) {
                if let Some(due) = task.due.as_mut() {
                    *due += task.emit.interval;
                }
            }
        }
    }

    /// One tick of `emit`, and the task's end after the last one (or at `fail_at`).
    fn tick(&mut self, id: &str) {
        let Some(task) = self.tasks.get_mut(id) else {
            return;
        };
        if task.status.is_terminal() {
            return;
        }
        let i = task.ticks;
        if i >= task.emit.count {
            self.finish(id, Status::Completed);
            return;
        }
        task.ticks += 1;
        let (count, fail_at, bytes) = (task.emit.count, task.emit.fail_at, task.emit.payload_bytes);
        let kind = if self.has(Fault::UnprefixedType) {
            "tick"
        } else if self.has(Fault::ReservedNamespaceType) {
            "io.modelcontextprotocol.tick"
        } else {
            "dev.taskstream.tick"
        };
        let payload = if self.has(Fault::PayloadNotObject) {
            json!([i])
        } else {
            json!({"i": i, "data": "x".repeat(bytes)})
        };
        self.append(id, kind, payload);
        let every = self.tasks.get(id).and_then(|t| t.emit.checkpoint_every);
        if every.is_some_and(|n| (i + 1) % n == 0) {
            self.checkpoint(id, i + 1);
        }
        if fail_at == Some(i) {
            self.finish(id, Status::Failed);
        } else if i + 1 == count {
            self.finish(id, Status::Completed);
        }
    }

    /// Appends a checkpoint of `ticks` ticks so far, and with `--retain-from-checkpoint` drops
    /// every event before it.
    fn checkpoint(&mut self, id: &str, ticks: u64) {
        let Some(task) = self.tasks.get(id) else {
            return;
        };
        let seq = task.next_seq;
        let covers = if self.has(Fault::CheckpointCoversItself) {
            Some(seq)
        } else {
            task.last_seq
        };
        self.append(
            id,
            CHECKPOINT,
            json!({"coversThrough": covers, "state": {"ticks": ticks}}),
        );
        let drops = self.opts.retain_from_checkpoint && !self.has(Fault::CheckpointNotEarliest);
        if let Some(task) = self.tasks.get_mut(id).filter(|_| drops) {
            task.drop_below(seq);
            task.from_checkpoint = true;
        }
    }

    /// Ends a task: its status first, then the terminal status event, which closes its streams.
    fn finish(&mut self, id: &str, status: Status) {
        let Some(task) = self.tasks.get_mut(id) else {
            return;
        };
        task.set_status(status);
        let said = if status == Status::Completed && self.has(Fault::StatusMismatch) {
            "failed"
        } else {
            status.name()
        };
        self.append(id, "dev.taskstream.task.status", json!({"status": said}));
        if self.has(Fault::DropOnTerminal) {
            if let Some(task) = self.tasks.get_mut(id) {
                task.log.clear();
                task.dropped = true;
            }
        }
    }

    /// Stores an event and delivers it to the task's streams.
    fn append(&mut self, id: &str, kind: &str, payload: Value) {
        let skip_seq = self.has(Fault::SkipSeq);
        let max_events = self.opts.max_events;
        let Some(task) = self.tasks.get_mut(id) else {
            return;
        };
        let seq = task.next_seq;
        task.next_seq = if skip_seq && seq == 1 { 3 } else { seq + 1 };
        let record = Record {
            seq,
            kind: kind.to_owned(),
            payload,
            stored_at: Instant::now(),
        };
        let unsolicited = self.creating.as_deref() == Some(id) && self.has(Fault::PushUnsolicited);
        if unsolicited {
            let note = self.notification_for(id, &record, true);
            self.write(&note);
        }
        if let Some(task) = self.tasks.get_mut(id) {
            task.store(record, max_events);
        }
        for i in 0..self.streams.len() {
            if self.streams.get(i).is_some_and(|s| s.task_id == id) {
                self.pump(i, Some(seq));
            }
        }
        self.streams.retain(|s| !s.closed);
    }

    /// The notification for one event; `live` when it is delivered as it happens.
    fn notification_for(&self, id: &str, record: &Record, live: bool) -> Value {
        let shown = if self.has(Fault::ForeignTaskId) {
            format!("{id}-other")
        } else {
            id.to_owned()
        };
        let mut payload = record.payload.clone();
        if !live && self.has(Fault::MutableReplay) {
            if let Some(object) = payload.as_object_mut() {
                object.insert("replayed".to_owned(), json!(true));
            }
        }
        let mut params =
            json!({"seq": record.seq, "taskId": shown, "type": record.kind, "payload": payload});
        let related = if self.has(Fault::MetaMismatch) {
            format!("{id}-x")
        } else {
            shown
        };
        if !self.has(Fault::DropMeta) {
            params["_meta"] = json!({RELATED_TASK: {"taskId": related}});
        }
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/event", "params": params})
    }
}
