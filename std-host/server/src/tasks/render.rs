//! What a task looks like on the wire, in either codec: the task object, its retained-event
//! summary, the error of a failed task, the `tasks/result` answer, and the lifecycle and
//! progress the core's stream rules are given.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The error object of a failed (or cancelled) task.
pub(super) fn stored_error(view: &TaskView) -> Value {
    view.record.error.clone().unwrap_or_else(|| {
        let message = view
            .record
            .status_message
            .clone()
            .unwrap_or_else(|| format!("the task {}", view.record.status.as_str()));
        ServerError::Internal(message).to_json()
    })
}

/// The `tasks/result` answer for a terminal task: exactly the tool result (with the
/// related-task `_meta`), or the stored error when there is no result (cancelled, or failed
/// without one).
pub(crate) fn final_answer(id: &RequestId, view: &TaskView) -> Vec<u8> {
    let result = view
        .record
        .result
        .clone()
        .filter(|r| r.is_object() && view.record.status != TaskStatus::Cancelled);
    match result {
        Some(mut r) => {
            if let Some(obj) = r.as_object_mut() {
                let meta = obj
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(
                        wire::RELATED_TASK.into(),
                        json!({ "taskId": view.record.task_id }),
                    );
                }
            }
            wire::response(id, &r)
        }
        None => wire::error_object_response(id, &stored_error(view)),
    }
}

/// `{earliestSeq, latestSeq, nextSeq}`: where the retained events are.
pub(crate) fn events_summary(view: &TaskView) -> Value {
    json!({
        "earliestSeq": view.retained.earliest().get(),
        "latestSeq": view.retained.last().map(|s| s.get()),
        "nextSeq": view.retained.next().get(),
    })
}

/// The Task object in `codec`'s shape.
pub(crate) fn task_json(view: &TaskView, codec: Codec) -> Value {
    let r = &view.record;
    let mut t = Map::new();
    t.insert("taskId".into(), json!(r.task_id));
    t.insert("status".into(), json!(r.status.as_str()));
    if let Some(m) = &r.status_message {
        t.insert("statusMessage".into(), json!(m));
    }
    t.insert("createdAt".into(), json!(clock::iso8601(r.created_at)));
    t.insert(
        "lastUpdatedAt".into(),
        json!(clock::iso8601(r.last_updated_at)),
    );
    let (ttl, poll) = match codec {
        Codec::Legacy => ("ttl", "pollInterval"),
        Codec::Modern => ("ttlMs", "pollIntervalMs"),
    };
    t.insert(ttl.into(), json!(r.ttl_ms));
    t.insert(poll.into(), json!(r.poll_interval_ms));
    Value::Object(t)
}

/// The progress a stream pump is given for a task whose storage cannot be read now: nothing
/// new, still running. The stream waits and is polled again; it never completes or is told
/// `events_gone` for want of a read.
pub(crate) const UNREADABLE: Progress = Progress {
    retained: taskstream_core::Retained::EMPTY,
    lifecycle: Lifecycle::Running,
};

/// The lifecycle the core's stream rules need.
pub(crate) fn lifecycle(view: &TaskView) -> Lifecycle {
    if view.record.status.is_terminal() {
        Lifecycle::Terminal
    } else {
        Lifecycle::Running
    }
}
