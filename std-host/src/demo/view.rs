//! Renders a bundled trace's events (the `dev.taskstream.` vocabulary of `data/README.md`) as
//! timeline lines: partial text is accumulated per message and shown as it grows (the live
//! tail), tool calls and results, subtasks, artifacts and status changes get one line each.
//! Unknown types get a generic line: payloads are data, never instructions (SE-05).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::demo::ui::{fit, fit_tail};
use taskstream_client::TaskEvent;

const PREFIX: &str = "dev.taskstream.";
const WIDTH: usize = 86;

/// The rendering state of one task's events.
#[derive(Default)]
pub(crate) struct TraceView {
    /// Text so far per message (`messageId`, or `childTaskId/messageId` for a subtask's).
    messages: HashMap<String, String>,
    /// Agent name per child task id.
    agents: HashMap<String, String>,
    tail: String,
}

fn str_field<'a>(p: &'a Map<String, Value>, key: &str) -> &'a str {
    p.get(key).and_then(Value::as_str).unwrap_or("?")
}

fn u64_field(p: &Map<String, Value>, key: &str) -> u64 {
    p.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The text of a content block list.
fn text_of(p: &Map<String, Value>) -> String {
    p.get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

fn size(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

impl TraceView {
    /// What is growing right now (for the live line).
    pub(crate) fn tail(&self) -> &str {
        &self.tail
    }

    /// One event: a line to print, or `None` for events that only grow the live tail.
    pub(crate) fn render(&mut self, event: &TaskEvent) -> Option<String> {
        let p = &event.payload;
        let kind = event
            .event_type
            .strip_prefix(PREFIX)
            .unwrap_or(&event.event_type);
        let body = match kind {
            "task.status" => {
                let status = str_field(p, "status");
                self.tail = format!("task {status}");
                Some(format!("status      {status}"))
            }
            "content.partial" => {
                let text = self
                    .messages
                    .entry(str_field(p, "messageId").to_owned())
                    .or_default();
                text.push_str(&text_of(p));
                self.tail = format!("{}: {}", str_field(p, "role"), fit_tail(text, 200));
                None
            }
            "content.done" => {
                self.messages.remove(str_field(p, "messageId"));
                let text = text_of(p);
                self.tail = String::new();
                Some(format!(
                    "{:<11} \"{}\" ({} deltas, {})",
                    str_field(p, "role"),
                    fit(&text, 58),
                    u64_field(p, "deltas"),
                    str_field(p, "stopReason")
                ))
            }
            "model.usage" => Some(format!(
                "usage       {} in ({} cached), {} out [{}]",
                u64_field(p, "inputTokens"),
                u64_field(p, "cacheReadTokens"),
                u64_field(p, "outputTokens"),
                fit(str_field(p, "model"), 30)
            )),
            "plan.updated" => {
                let steps = p.get("steps").and_then(Value::as_array);
                let total = steps.map_or(0, Vec::len);
                let done = steps.map_or(0, |st| {
                    st.iter()
                        .filter(|x| x.get("status").and_then(Value::as_str) == Some("done"))
                        .count()
                });
                let now = steps
                    .and_then(|st| {
                        st.iter().find(|x| {
                            x.get("status").and_then(Value::as_str) == Some("in_progress")
                        })
                    })
                    .and_then(|x| x.get("title"))
                    .and_then(Value::as_str)
                    .unwrap_or("-");
                Some(format!(
                    "plan        {done}/{total} done; now: {}",
                    fit(now, 50)
                ))
            }
            "tool.call" => {
                let args = p.get("arguments").map(Value::to_string).unwrap_or_default();
                Some(format!(
                    "tool call   {} {}",
                    fit(str_field(p, "name"), 20),
                    fit(&args, 54)
                ))
            }
            "tool.output" => {
                self.tail = format!("{} │ {}", str_field(p, "stream"), str_field(p, "text"));
                None
            }
            "tool.result" => {
                let ok = if p.get("isError").and_then(Value::as_bool) == Some(true) {
                    "error"
                } else {
                    "ok"
                };
                Some(format!(
                    "tool result {} {ok} in {} ms: \"{}\"",
                    fit(str_field(p, "name"), 20),
                    u64_field(p, "durationMs"),
                    fit(&text_of(p), 44)
                ))
            }
            "subtask.started" => {
                let child = str_field(p, "childTaskId");
                self.agents
                    .insert(child.to_owned(), str_field(p, "agent").to_owned());
                Some(format!(
                    "subtask ⇢   {} \"{}\" (task {}…)",
                    fit(str_field(p, "agent"), 18),
                    fit(str_field(p, "title"), 44),
                    short_id(child)
                ))
            }
            "subtask.progress" => {
                let agent = self.agent(str_field(p, "childTaskId"));
                self.tail = format!(
                    "{agent} {}/{}: {}",
                    u64_field(p, "progress"),
                    u64_field(p, "total"),
                    str_field(p, "message")
                );
                None
            }
            "subtask.content.partial" => {
                let child = str_field(p, "childTaskId");
                let key = format!("{child}/{}", str_field(p, "messageId"));
                let agent = self.agent(child);
                let text = self.messages.entry(key).or_default();
                text.push_str(&text_of(p));
                self.tail = format!("{agent}: {}", fit_tail(text, 200));
                None
            }
            "subtask.completed" => {
                let child = str_field(p, "childTaskId");
                let agent = self.agent(child);
                self.messages.retain(|k, _| !k.starts_with(child));
                let secs = u64_field(p, "durationMs") as f64 / 1000.0;
                let what = match p.get("summary").and_then(Value::as_str) {
                    Some(summary) => fit(summary, 44),
                    None => p
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .map_or_else(String::new, |m| fit(m, 44)),
                };
                Some(format!(
                    "subtask ⇠   {} {} in {secs:.1} s: \"{what}\"",
                    fit(&agent, 18),
                    str_field(p, "status")
                ))
            }
            "artifact" => Some(format!(
                "artifact    {} ({}, {}) {}",
                fit(str_field(p, "name"), 28),
                str_field(p, "mimeType"),
                size(u64_field(p, "size")),
                fit(str_field(p, "uri"), 40)
            )),
            "review.comment" => Some(format!(
                "comment     {}:{} [{}] {}",
                fit(str_field(p, "path"), 30),
                u64_field(p, "line"),
                str_field(p, "severity"),
                fit(str_field(p, "title"), 40)
            )),
            "review.submitted" => Some(format!(
                "review      {} with {} comments",
                str_field(p, "verdict"),
                u64_field(p, "commentCount")
            )),
            "phase.started" => Some(format!(
                "phase ▶     {} ({}/{})",
                fit(str_field(p, "name"), 40),
                u64_field(p, "index") + 1,
                u64_field(p, "total")
            )),
            "phase.progress" => {
                self.tail = format!(
                    "{} {}/{} {}",
                    str_field(p, "phaseId"),
                    u64_field(p, "completed"),
                    u64_field(p, "total"),
                    str_field(p, "unit")
                );
                None
            }
            "phase.completed" => Some(format!(
                "phase ■     {} {} in {} ms",
                fit(str_field(p, "phaseId"), 30),
                str_field(p, "status"),
                u64_field(p, "durationMs")
            )),
            "log" => {
                self.tail = str_field(p, "line").to_owned();
                None
            }
            "test.result" if str_field(p, "status") != "failed" => {
                self.tail = format!("test {} {}", str_field(p, "name"), str_field(p, "status"));
                None
            }
            "test.result" => Some(format!("test FAILED {}", fit(str_field(p, "name"), 60))),
            "test.summary" => Some(format!(
                "tests       {}: {} passed, {} failed, {} ignored",
                str_field(p, "kind"),
                u64_field(p, "passed"),
                u64_field(p, "failed"),
                u64_field(p, "ignored")
            )),
            "build.diagnostic" => Some(format!(
                "diagnostic  {} {}: {}",
                str_field(p, "level"),
                str_field(p, "code"),
                fit(str_field(p, "message"), 50)
            )),
            other => Some(format!("event       {}", fit(other, 60))),
        }?;
        Some(fit(&format!("#{:<5} {body}", event.seq), WIDTH + 8))
    }

    fn agent(&self, child: &str) -> String {
        self.agents
            .get(child)
            .cloned()
            .unwrap_or_else(|| format!("task {}…", short_id(child)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, kind: &str, payload: Value) -> TaskEvent {
        let Value::Object(payload) = payload else {
            panic!("payload must be an object");
        };
        TaskEvent {
            seq,
            task_id: "t".into(),
            event_type: format!("{PREFIX}{kind}"),
            payload,
            meta: None,
        }
    }

    #[test]
    fn partial_text_grows_then_the_message_is_one_line() {
        let mut view = TraceView::default();
        let part = |i, text| {
            event(
                i,
                "content.partial",
                json!({"messageId": "m", "role": "assistant", "index": i,
                    "content": [{"type": "text", "text": text}]}),
            )
        };
        assert_eq!(view.render(&part(1, "Hel")), None);
        assert_eq!(view.render(&part(2, "lo\x1b[2J")), None);
        assert_eq!(view.tail(), "assistant: Hello\u{fffd}[2J");
        let done = event(
            3,
            "content.done",
            json!({"messageId": "m", "role": "assistant", "deltas": 2, "stopReason": "end_turn",
                "content": [{"type": "text", "text": "Hello"}]}),
        );
        assert_eq!(
            view.render(&done).as_deref(),
            Some("#3     assistant   \"Hello\" (2 deltas, end_turn)")
        );
    }
}
