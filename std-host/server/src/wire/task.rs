//! What a task looks like on the wire, in either codec: its id, the task object, its
//! retained-event summary, the error of a failed task, the `tasks/result` answer, the lifecycle
//! and progress the core's stream rules are given, and why the store refused a write as a
//! client reads it. Pure functions of the store's values.

use serde_json::{json, Map, Value};
use taskstream_core::streams::Progress;
use taskstream_core::{Lifecycle, RequestId};

use super::era::Codec;
use super::{self as wire, ServerError};
use taskstream_store::clock;
use taskstream_store::{AppendError, TaskStatus, TaskView};

/// The `_meta` key of the retained-range summary on `tasks/get`.
pub(crate) const EVENTS_META: &str = "dev.taskstream/events";

/// Parses one of our task ids: exactly 32 lowercase hex digits.
pub(crate) fn parse_task_id(id: &str) -> Option<u128> {
    let ok = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        u128::from_str_radix(id, 16).ok()
    } else {
        None
    }
}

/// The wire form of a task id.
pub(crate) fn format_task_id(id: u128) -> String {
    format!("{id:032x}")
}

/// What a client is told when storage cannot be read now (a shared store's database is
/// unreachable): nothing of the host.
pub(crate) const STORE_UNAVAILABLE: &str = "the task store cannot be reached now; try again";

/// The error object of a failed (or cancelled) task.
pub(crate) fn stored_error(view: &TaskView) -> Value {
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

/// Why the store refused a write, as a client reads it (an error message, a failed task's
/// status message): written for the client, nothing of the host. A storage failure's details
/// (paths, the operating system's error) go to the log, never here.
pub(crate) fn refusal(e: &AppendError) -> String {
    match e {
        AppendError::UnknownTask => "the task no longer exists".into(),
        AppendError::Terminal => "the task has already ended".into(),
        AppendError::InvalidPayload(_) => "the event payload is not a JSON object".into(),
        AppendError::InvalidType(_) => {
            "the event type is not a vendor-prefixed name of three or more labels".into()
        }
        AppendError::PayloadTooLarge { size, limit } => {
            format!("an event payload of {size} bytes exceeds the limit of {limit}")
        }
        AppendError::StoreFull { limit, .. } => store_full(*limit),
        AppendError::Storage(taskstream_store::StoreError::SeqExhausted) => {
            "the task has used every sequence number".into()
        }
        AppendError::Storage(taskstream_store::StoreError::Database(_)) => STORE_UNAVAILABLE.into(),
        // Every other storage error of a write stops the store (fail-stop).
        AppendError::Storage(_) => super::STORAGE_FAILED.into(),
    }
}

/// Why a store that reached its budget refused something, for the client.
pub(crate) fn store_full(limit: u64) -> String {
    format!(
        "the server's retained events already take its storage budget of {limit} bytes \
         (--max-store-bytes); retention frees it as tasks expire"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip_and_nothing_else_parses() {
        let id = 0x0123_4567_89ab_cdef_0011_2233_4455_6677_u128;
        assert_eq!(format_task_id(id), "0123456789abcdef0011223344556677");
        assert_eq!(parse_task_id(&format_task_id(id)), Some(id));
        assert_eq!(parse_task_id(&format_task_id(0)), Some(0));
        for bad in [
            "",
            "0123",
            "0123456789ABCDEF0011223344556677",
            "+123456789abcdef0011223344556677",
            "0123456789abcdef00112233445566778",
        ] {
            assert_eq!(parse_task_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn refusals_leak_nothing_of_the_host() {
        use taskstream_store::StoreError;
        let secret = std::path::PathBuf::from("/srv/secret-data-dir/wal/00000042.wal");
        let io = || std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let errors = [
            AppendError::UnknownTask,
            AppendError::Terminal,
            AppendError::PayloadTooLarge {
                size: 70_000,
                limit: 65_536,
            },
            AppendError::StoreFull {
                stored: 10,
                limit: 10,
            },
            AppendError::Storage(StoreError::Io {
                context: "appending to the log",
                path: secret.clone(),
                source: io(),
            }),
            AppendError::Storage(StoreError::Locked {
                dir: secret.clone(),
            }),
        ];
        for e in &errors {
            let told = refusal(e);
            let line = ServerError::Internal(format!("cannot create the task: {told}")).to_json();
            let text = line.to_string();
            for leak in [
                "secret", "/srv", ".wal", "No space", "Io {", "Storage(", "os error",
            ] {
                assert!(!text.contains(leak), "{leak:?} in {text} for {e:?}");
            }
            assert!(!told.is_empty());
        }
    }
}
