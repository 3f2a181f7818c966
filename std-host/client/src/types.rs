//! The values the client hands out: events, tasks, tools, the server's identity; and the
//! parsing of each from the wire. Parsing is strict where SEP-2694 is (a seq is an integer in
//! 0..=2^53-1, a payload is an object) and lenient about members it does not need.

use serde_json::{Map, Value};

use crate::error::Violation;

/// The modern protocol revision (MCP 2026-07-28).
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";
/// The legacy protocol revision the client asks for in `initialize`.
pub const LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";
/// The Tasks extension (SEP-2663).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The related-task `_meta` key (NT-01).
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";
/// taskstream's status-without-replay `_meta` key on `tasks/get`:
/// `{earliestSeq, latestSeq, nextSeq}`.
pub const EVENTS_META: &str = "dev.taskstream/events";
/// The largest seq (2^53 - 1, the largest integer every JSON reader keeps exact).
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// A seq from JSON: an integer literal in 0..=2^53-1 (RS-01). `1.0`, `-1`, strings are `None`.
#[must_use]
pub fn seq_of(value: &Value) -> Option<u64> {
    value.as_u64().filter(|&n| n <= MAX_SEQ)
}

/// Which revision of MCP a connection speaks (MCP-DIGEST a.3 / a.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: no handshake, `_meta` on every request, Tasks as an extension.
    Modern,
    /// 2025-11-25: `initialize`, then SEP-1686 tasks opted into with `params.task`.
    Legacy,
}

impl Era {
    /// The protocol version string.
    #[must_use]
    pub const fn protocol_version(self) -> &'static str {
        match self {
            Era::Modern => MODERN_PROTOCOL_VERSION,
            Era::Legacy => LEGACY_PROTOCOL_VERSION,
        }
    }
}

/// How the client picks the era when it connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EraChoice {
    /// Speak 2026-07-28; fail if `server/discover` fails.
    Modern,
    /// Send `initialize` for 2025-11-25.
    Legacy,
    /// Probe with `server/discover` and fall back to `initialize` on any other error or a
    /// timeout (MCP-DIGEST a.4: the fallback does not key on one error code).
    Probe,
}

/// What the server said about itself when the client connected.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerInfo {
    /// The era of this connection.
    pub era: Era,
    /// The protocol version the server confirmed.
    pub protocol_version: String,
    /// `serverInfo.name` (legacy) or the `_meta` server info (modern), if given.
    pub name: Option<String>,
    /// The server's capabilities object, as sent.
    pub capabilities: Value,
    /// Whether the server advertises task event streams (TS-02): `eventStreams` inside its
    /// Tasks capability, or (2026-07-28) the `dev.taskstream/event-streams` extension beside
    /// it. A receiver may support `tasks/stream` without saying so.
    pub event_streams: bool,
}

/// A task status (SEP-1686 and SEP-2663 share these names).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskStatus {
    /// `working`.
    Working,
    /// `input_required`.
    InputRequired,
    /// `completed`.
    Completed,
    /// `failed`.
    Failed,
    /// `cancelled`.
    Cancelled,
    /// A status this client does not know.
    Other(String),
}

impl TaskStatus {
    /// Parses a wire name.
    #[must_use]
    pub fn parse(s: &str) -> TaskStatus {
        match s {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            other => TaskStatus::Other(other.to_owned()),
        }
    }

    /// The wire name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Other(s) => s,
        }
    }

    /// Whether no transition leaves this status.
    #[must_use]
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The retained range of a task's events, from `tasks/get`
/// `_meta["dev.taskstream/events"]`: status without replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRange {
    /// The oldest retained seq, `None` when nothing is retained.
    pub earliest_seq: Option<u64>,
    /// The newest assigned seq, `None` before the first event.
    pub latest_seq: Option<u64>,
    /// The seq the next event will get.
    pub next_seq: u64,
}

impl EventRange {
    fn parse(value: &Value) -> Option<EventRange> {
        let opt = |key: &str| match value.get(key) {
            None | Some(Value::Null) => Some(None),
            Some(v) => seq_of(v).map(Some),
        };
        let next_seq = seq_of(value.get("nextSeq")?)?;
        Some(EventRange {
            earliest_seq: opt("earliestSeq")?,
            latest_seq: opt("latestSeq")?,
            next_seq,
        })
    }
}

/// A task as `tasks/get` (or a create or cancel result) describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// `taskId`.
    pub task_id: String,
    /// `status`.
    pub status: TaskStatus,
    /// `statusMessage`, if any.
    pub status_message: Option<String>,
    /// The retained event range, if the server reports it (`_meta["dev.taskstream/events"]`).
    pub events: Option<EventRange>,
    /// The final result (modern `DetailedTask` of a completed task).
    pub result: Option<Value>,
    /// The final error (modern `DetailedTask` of a failed task).
    pub error: Option<Value>,
    /// The object as sent.
    pub raw: Value,
}

impl TaskInfo {
    /// Parses a `Task` / `DetailedTask` object (flat, or nested under `task` as a SEP-1686
    /// `CreateTaskResult`). `_meta` is looked up on the object and on `outer`.
    ///
    /// # Errors
    ///
    /// [`Violation::BadResult`] without a string `taskId` and `status`.
    pub fn parse(method: &str, value: &Value) -> Result<TaskInfo, Violation> {
        let task = match value.get("task") {
            Some(inner) if inner.is_object() => inner,
            _ => value,
        };
        let bad = |detail: &str| Violation::BadResult {
            method: method.to_owned(),
            detail: detail.to_owned(),
        };
        let task_id = task
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no string taskId"))?;
        let status = task
            .get("status")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no string status"))?;
        let events = [task, value]
            .iter()
            .find_map(|v| v.get("_meta")?.get(EVENTS_META))
            .map(|v| EventRange::parse(v).ok_or_else(|| bad("malformed dev.taskstream/events")))
            .transpose()?;
        Ok(TaskInfo {
            task_id: task_id.to_owned(),
            status: TaskStatus::parse(status),
            status_message: task
                .get("statusMessage")
                .and_then(Value::as_str)
                .map(str::to_owned),
            events,
            result: task.get("result").cloned(),
            error: task.get("error").cloned(),
            raw: value.clone(),
        })
    }
}

/// A tool from `tools/list`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// `name`.
    pub name: String,
    /// `description`, if any.
    pub description: Option<String>,
    /// The tool object as sent.
    pub raw: Value,
}

/// What a `tools/call` that may create a task returned.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The server ran the tool and answered with its result.
    Complete(Value),
    /// The server created a task (SEP-2663 `resultType: "task"`, or SEP-1686 `{task}`).
    Task(TaskInfo),
}

/// The type of a checkpoint event: `{"coversThrough": SEQ, "state": OBJECT}`, the task's state
/// after every event up to and including `coversThrough` (docs/interface.md "Checkpoints").
pub const CHECKPOINT_EVENT_TYPE: &str = "dev.taskstream.checkpoint";

/// A checkpoint event's payload ([`TaskEvent::checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Checkpoint<'a> {
    /// The seq of the last event the state covers (the one just before the checkpoint).
    pub covers_through: u64,
    /// The task's accumulated state, as its tool defines it.
    pub state: &'a Map<String, Value>,
}

/// One task event (SEP-2694 `TaskEvent`), parsed from `notifications/tasks/event` params.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskEvent {
    /// `seq`: 0 for the first event of the task, +1 for each later one.
    pub seq: u64,
    /// `taskId`.
    pub task_id: String,
    /// `type`, e.g. `dev.taskstream.content.partial`.
    pub event_type: String,
    /// `payload`: always a JSON object.
    pub payload: Map<String, Value>,
    /// `_meta`, if sent.
    pub meta: Option<Map<String, Value>>,
}

impl TaskEvent {
    /// Parses notification params.
    ///
    /// # Errors
    ///
    /// [`Violation::BadEvent`] unless `seq` is an integer in 0..=2^53-1, `taskId` and `type`
    /// are strings, `payload` is an object (EV-05) and `_meta`, if present, is an object.
    pub fn parse(params: &Value) -> Result<TaskEvent, Violation> {
        let bad = |detail: String| Violation::BadEvent { detail };
        let seq = params
            .get("seq")
            .and_then(seq_of)
            .ok_or_else(|| bad(format!("seq is not an integer in 0..=2^53-1: {params}")))?;
        let task_id = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("seq {seq}: no string taskId")))?;
        let event_type = params
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("seq {seq}: no string type")))?;
        let payload = match params.get("payload") {
            Some(Value::Object(map)) => map.clone(),
            _ => return Err(bad(format!("seq {seq}: payload is not an object (EV-05)"))),
        };
        let meta = match params.get("_meta") {
            None => None,
            Some(Value::Object(map)) => Some(map.clone()),
            Some(_) => return Err(bad(format!("seq {seq}: _meta is not an object"))),
        };
        Ok(TaskEvent {
            seq,
            task_id: task_id.to_owned(),
            event_type: event_type.to_owned(),
            payload,
            meta,
        })
    }

    /// This event as a checkpoint (docs/interface.md "Checkpoints"; CP-01): its type is
    /// [`CHECKPOINT_EVENT_TYPE`] and its payload `{"coversThrough": SEQ, "state": OBJECT}`.
    /// `None` for any other event, or a checkpoint whose payload is not of that shape.
    #[must_use]
    pub fn checkpoint(&self) -> Option<Checkpoint<'_>> {
        if self.event_type != CHECKPOINT_EVENT_TYPE {
            return None;
        }
        let covers_through = self.payload.get("coversThrough").and_then(seq_of)?;
        let state = self.payload.get("state")?.as_object()?;
        Some(Checkpoint {
            covers_through,
            state,
        })
    }

    /// The task id in `_meta["io.modelcontextprotocol/related-task"].taskId`, if present.
    #[must_use]
    pub fn related_task_id(&self) -> Option<&str> {
        self.meta
            .as_ref()?
            .get(RELATED_TASK_META)?
            .get("taskId")?
            .as_str()
    }

    /// Checks the related-task `_meta` (NT-01: present; NT-02: the same task as `taskId`).
    ///
    /// # Errors
    ///
    /// [`Violation::MissingRelatedTask`] or [`Violation::RelatedTaskMismatch`].
    pub fn check_related_task(&self) -> Result<(), Violation> {
        match self.related_task_id() {
            None => Err(Violation::MissingRelatedTask { seq: self.seq }),
            Some(id) if id == self.task_id => Ok(()),
            Some(id) => Err(Violation::RelatedTaskMismatch {
                seq: self.seq,
                meta_task_id: id.to_owned(),
            }),
        }
    }

    /// The event as the JSON object `{seq, taskId, type, payload}` (without `_meta`): what two
    /// deliveries of the same event must agree on (EV-08, events are immutable).
    #[must_use]
    pub fn content(&self) -> Value {
        serde_json::json!({
            "seq": self.seq,
            "taskId": self.task_id,
            "type": self.event_type,
            "payload": self.payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seq_of_accepts_only_exact_integers_in_range() {
        assert_eq!(seq_of(&json!(0)), Some(0));
        assert_eq!(seq_of(&json!(MAX_SEQ)), Some(MAX_SEQ));
        assert_eq!(seq_of(&json!(MAX_SEQ + 1)), None);
        assert_eq!(seq_of(&json!(-1)), None);
        assert_eq!(seq_of(&json!(1.0)), None);
        assert_eq!(seq_of(&json!("1")), None);
    }

    #[test]
    fn event_parse_and_related_task() {
        let ok = json!({"seq": 3, "taskId": "t", "type": "dev.x.y", "payload": {"a": 1},
            "_meta": {RELATED_TASK_META: {"taskId": "t"}}});
        let event = TaskEvent::parse(&ok).expect("valid event");
        assert_eq!(event.seq, 3);
        assert_eq!(event.check_related_task(), Ok(()));

        let other = json!({"seq": 3, "taskId": "t", "type": "dev.x.y", "payload": {},
            "_meta": {RELATED_TASK_META: {"taskId": "u"}}});
        assert_eq!(
            TaskEvent::parse(&other)
                .expect("valid")
                .check_related_task(),
            Err(Violation::RelatedTaskMismatch {
                seq: 3,
                meta_task_id: "u".into()
            })
        );
        let bare = json!({"seq": 0, "taskId": "t", "type": "dev.x.y", "payload": {}});
        assert_eq!(
            TaskEvent::parse(&bare).expect("valid").check_related_task(),
            Err(Violation::MissingRelatedTask { seq: 0 })
        );
        let array_payload = json!({"seq": 0, "taskId": "t", "type": "dev.x.y", "payload": []});
        assert!(matches!(
            TaskEvent::parse(&array_payload),
            Err(Violation::BadEvent { .. })
        ));
        let float_seq = json!({"seq": 1.5, "taskId": "t", "type": "dev.x.y", "payload": {}});
        assert!(matches!(
            TaskEvent::parse(&float_seq),
            Err(Violation::BadEvent { .. })
        ));
    }

    #[test]
    fn task_info_flat_nested_and_events_meta() {
        let flat = json!({"resultType": "complete", "taskId": "a", "status": "failed",
            "_meta": {EVENTS_META: {"earliestSeq": 0, "latestSeq": 9, "nextSeq": 10}}});
        let info = TaskInfo::parse("tasks/get", &flat).expect("valid");
        assert_eq!(info.status, TaskStatus::Failed);
        assert_eq!(
            info.events,
            Some(EventRange {
                earliest_seq: Some(0),
                latest_seq: Some(9),
                next_seq: 10
            })
        );
        let nested = json!({"task": {"taskId": "b", "status": "working"}});
        let info = TaskInfo::parse("tools/call", &nested).expect("valid");
        assert_eq!(
            (info.task_id.as_str(), info.status),
            ("b", TaskStatus::Working)
        );
        assert_eq!(info.events, None);
        let empty_range = json!({"taskId": "c", "status": "working",
            "_meta": {EVENTS_META: {"earliestSeq": null, "latestSeq": null, "nextSeq": 0}}});
        let info = TaskInfo::parse("tasks/get", &empty_range).expect("valid");
        assert_eq!(
            info.events,
            Some(EventRange {
                earliest_seq: None,
                latest_seq: None,
                next_seq: 0
            })
        );
    }

    #[test]
    fn events_gone_is_recognised_and_checked() {
        use crate::error::RpcError;
        let good = RpcError::from_value(&json!({"code": -32010,
            "message": "Task events are no longer available",
            "data": {"reason": "events_gone", "taskId": "t", "earliestSeq": 7}}));
        let gone = good.events_gone().expect("is events_gone").expect("valid");
        assert_eq!((gone.task_id.as_str(), gone.earliest_seq), ("t", 7));
        let other = RpcError::from_value(&json!({"code": -32602, "message": "bad"}));
        assert!(other.events_gone().is_none());
        let malformed = RpcError::from_value(&json!({"code": -32010, "message": "x",
            "data": {"reason": "events_gone", "taskId": "t"}}));
        assert!(matches!(malformed.events_gone(), Some(Err(_))));
    }
}
