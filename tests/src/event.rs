//! The task event envelope as received, and the rules one event can be judged by alone.
//!
//! Parsing is lenient on purpose: every field is optional here, so that a malformed event still
//! reaches the check for the rule it breaks instead of vanishing in a parse error.

use serde_json::Value;

use crate::catalog::Id;
use crate::evidence::Evidence;

/// The `_meta` key SEP-2694 requires on every task event notification.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The highest seq the suite treats as a number at all (2^53 - 1, the largest integer every
/// JSON peer reads exactly).
pub(crate) const MAX_SAFE_SEQ: u64 = (1 << 53) - 1;

/// One `notifications/tasks/event`, as received.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// `params.seq`, when it is an integer in `0..=2^53-1`.
    pub(crate) seq: Option<u64>,
    /// `params.taskId`, when it is a string.
    pub(crate) task_id: Option<String>,
    /// `params.type`, when it is a string.
    pub(crate) kind: Option<String>,
    /// `params.payload`, whatever it is.
    pub(crate) payload: Option<Value>,
    /// The whole `params`, for messages and for the rules below.
    pub(crate) params: Value,
}

impl Event {
    pub(crate) fn parse(params: &Value) -> Event {
        Event {
            seq: params
                .get("seq")
                .and_then(Value::as_u64)
                .filter(|seq| *seq <= MAX_SAFE_SEQ),
            task_id: params
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            kind: params
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned),
            payload: params.get("payload").cloned(),
            params: params.clone(),
        }
    }

    /// A short name for messages: `seq 3 (com.example.tick)`.
    pub(crate) fn describe(&self) -> String {
        let seq = match self.seq {
            Some(seq) => seq.to_string(),
            None => format!("{}", self.params.get("seq").unwrap_or(&Value::Null)),
        };
        match &self.kind {
            Some(kind) => format!("seq {seq} ({kind})"),
            None => format!("seq {seq}"),
        }
    }

    /// The related-task id in `_meta`, or why there is none.
    fn related_task(&self) -> Result<&str, &'static str> {
        let Some(meta) = self.params.get("_meta") else {
            return Err("no _meta");
        };
        let Some(meta) = meta.as_object() else {
            return Err("_meta is not an object");
        };
        let Some(related) = meta.get(RELATED_TASK) else {
            return Err("_meta has no io.modelcontextprotocol/related-task");
        };
        match related.get("taskId").and_then(Value::as_str) {
            Some(id) => Ok(id),
            None => Err("related-task has no string taskId"),
        }
    }

    /// Judges the rules that one event can break on its own: EV-01 (against its owner), EV-03
    /// (seq is an integer), EV-05, EV-06, EV-07, NT-01, NT-02.
    pub(crate) fn judge(&self, owner: Owner<'_>, ev: &mut Evidence) {
        let name = self.describe();
        match (owner, &self.task_id) {
            (Owner::Leak, _) => {}
            (_, None) => ev.fail(Id::Ev01, format!("{name} has no string taskId")),
            (Owner::Stream(want), Some(got)) if want == got => ev.pass(Id::Ev01),
            (Owner::Stream(want), Some(got)) => ev.fail(
                Id::Ev01,
                format!("{name} on the stream of task {want} says taskId {got:?}"),
            ),
            (Owner::Nobody, Some(got)) => ev.fail(
                Id::Ev01,
                format!("{name} names task {got:?}, which no stream on this connection asked for"),
            ),
        }

        if self.seq.is_none() {
            ev.fail(
                Id::Ev03,
                format!("{name}: seq is not an integer in 0..=2^53-1"),
            );
        }

        match &self.payload {
            Some(Value::Object(_)) => ev.pass(Id::Ev05),
            Some(other) => ev.fail(Id::Ev05, format!("{name}: payload is {}", json_kind(other))),
            None => ev.fail(Id::Ev05, format!("{name}: no payload")),
        }

        match self.kind.as_deref().map(classify_type) {
            Some(TypeName::Vendor) => {
                ev.pass(Id::Ev06);
                ev.pass(Id::Ev07);
            }
            Some(TypeName::Unprefixed) => ev.fail(
                Id::Ev06,
                format!("{name}: type is unprefixed (fewer than three dot-separated labels)"),
            ),
            Some(TypeName::Malformed) => {
                ev.pass(Id::Ev06);
                ev.fail(
                    Id::Ev07,
                    format!("{name}: type has an empty or ill-formed label"),
                );
            }
            Some(TypeName::McpNamespace) => {
                ev.pass(Id::Ev06);
                ev.fail(
                    Id::Ev07,
                    format!("{name}: type uses MCP's own namespace, not a vendor's"),
                );
            }
            None => ev.fail(Id::Ev07, format!("{name}: type is not a string")),
        }

        match self.related_task() {
            Ok(related) => {
                ev.pass(Id::Nt01);
                match &self.task_id {
                    Some(task) if task == related => ev.pass(Id::Nt02),
                    Some(task) => ev.fail(
                        Id::Nt02,
                        format!(
                            "{name}: related-task taskId {related:?} but params.taskId {task:?}"
                        ),
                    ),
                    // Without a params.taskId there is nothing to match; EV-01 reports it.
                    None => {}
                }
            }
            Err(why) => ev.fail(Id::Nt01, format!("{name}: {why}")),
        }
    }
}

/// Whose an event is, as far as routing could tell.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owner<'a> {
    /// It arrived on the stream opened for this task id.
    Stream(&'a str),
    /// No stream on the connection asked for its task.
    Nobody,
    /// It arrived on a stream opened for a task id the client cannot access; SE-03 judges it,
    /// not EV-01.
    Leak,
}

/// What an event type string is, for EV-06 and EV-07.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TypeName {
    /// Fewer than three dot-separated labels, like the SEP's reserved `task.status`.
    Unprefixed,
    /// Enough labels, but one is empty or has characters outside `[A-Za-z0-9_-]`.
    Malformed,
    /// Under `io.modelcontextprotocol` or `modelcontextprotocol`: MCP's namespace, no vendor's.
    McpNamespace,
    /// A vendor namespace of at least two labels, then a name.
    Vendor,
}

/// Classifies an event type. The SEP calls its own examples `content.partial` and `task.status`
/// unprefixed although they contain a dot, so a prefix is taken to be a reverse-DNS namespace
/// of at least two labels followed by a name.
pub(crate) fn classify_type(kind: &str) -> TypeName {
    let labels: Vec<&str> = kind.split('.').collect();
    if labels.len() < 3 {
        return TypeName::Unprefixed;
    }
    let well_formed = labels.iter().all(|label| {
        !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    if !well_formed {
        return TypeName::Malformed;
    }
    let namespace = labels
        .first()
        .map(|first| first.to_ascii_lowercase())
        .unwrap_or_default();
    let second = labels
        .get(1)
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_default();
    if namespace == "modelcontextprotocol"
        || (namespace == "io" && second == "modelcontextprotocol")
    {
        return TypeName::McpNamespace;
    }
    TypeName::Vendor
}

/// The JSON kind of a value, for messages.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A task status as a status-like event or `tasks/get` reports it.
pub(crate) fn status_of(event: &Event) -> Option<&str> {
    let status = event.payload.as_ref()?.get("status")?.as_str()?;
    matches!(
        status,
        "working" | "input_required" | "completed" | "failed" | "cancelled"
    )
    .then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(kind: &str, expected: TypeName) {
        assert_eq!(classify_type(kind), expected, "{kind}");
    }

    #[test]
    fn type_names() {
        check("dev.taskstream.tick", TypeName::Vendor);
        check("com.example.review.comment", TypeName::Vendor);
        check("com.example-corp.task_status", TypeName::Vendor);
        check("tick", TypeName::Unprefixed);
        check("task.status", TypeName::Unprefixed);
        check("content.partial", TypeName::Unprefixed);
        check("", TypeName::Unprefixed);
        check("com..tick", TypeName::Malformed);
        check(".com.example.tick", TypeName::Malformed);
        check("com.example.tick ", TypeName::Malformed);
        check("io.modelcontextprotocol.tick", TypeName::McpNamespace);
        check("modelcontextprotocol.task.status", TypeName::McpNamespace);
        check("io.example.tick", TypeName::Vendor);
    }

    fn judged(params: Value, stream_task: Option<&str>) -> Vec<String> {
        let mut ev = Evidence::default();
        let owner = match stream_task {
            Some(task) => Owner::Stream(task),
            None => Owner::Nobody,
        };
        Event::parse(&params).judge(owner, &mut ev);
        ev.failures()
    }

    #[test]
    fn a_correct_event_breaks_nothing() {
        let params = serde_json::json!({
            "seq": 0, "taskId": "t1", "type": "dev.taskstream.tick", "payload": {"i": 0},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}
        });
        assert_eq!(judged(params, Some("t1")), Vec::<String>::new());
    }

    #[test]
    fn each_broken_field_names_its_rule() {
        let base = serde_json::json!({
            "seq": 0, "taskId": "t1", "type": "dev.taskstream.tick", "payload": {"i": 0},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}
        });
        let with = |key: &str, value: Value| {
            let mut params = base.clone();
            params[key] = value;
            params
        };
        assert_eq!(judged(base.clone(), Some("t2")), ["EV-01"]);
        assert_eq!(
            judged(with("seq", serde_json::json!(1.5)), Some("t1")),
            ["EV-03"]
        );
        assert_eq!(
            judged(with("payload", serde_json::json!([1])), Some("t1")),
            ["EV-05"]
        );
        assert_eq!(
            judged(with("type", serde_json::json!("tick")), Some("t1")),
            ["EV-06"]
        );
        assert_eq!(
            judged(with("type", serde_json::json!(7)), Some("t1")),
            ["EV-07"]
        );
        assert_eq!(
            judged(with("_meta", serde_json::json!({})), Some("t1")),
            ["NT-01"]
        );
        let mismatched =
            serde_json::json!({"io.modelcontextprotocol/related-task": {"taskId": "t9"}});
        assert_eq!(judged(with("_meta", mismatched), Some("t1")), ["NT-02"]);
    }
}
