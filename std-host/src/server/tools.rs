//! The tools (MCP-DIGEST a.7): their definitions for `tools/list`, and turning a `tools/call`'s
//! arguments into a [`Workload`] by validating them against the tool's own `inputSchema`.
//!
//! The validator understands exactly the schema vocabulary our tools use (`type` integer /
//! number / string, `minimum`, `maximum`, `exclusiveMinimum`, `enum`, `required`,
//! `additionalProperties: false`), so the schema a client sees is the one that is enforced.

use serde_json::{json, Map, Value};

use super::lifecycle::Era;
use crate::workloads::{emit::Emit, trace, Workload};

/// Why a call cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No tool by that name: a protocol error (-32602).
    UnknownTool(String),
    /// The arguments do not fit the schema: a tool result with `isError: true`.
    BadArguments(String),
}

/// The limits that shape the schemas.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `--max-payload-bytes`.
    pub(crate) max_payload_bytes: u64,
}

fn emit_schema(limits: Limits) -> Value {
    json!({
        "type": "object",
        "properties": {
            "count": {
                "type": "integer", "minimum": 0, "maximum": 1_000_000,
                "description": "how many dev.taskstream.tick events to emit",
            },
            "interval_ms": {
                "type": "integer", "minimum": 0, "maximum": 3_600_000,
                "description": "pause between two events (default 0)",
            },
            "payload_bytes": {
                "type": "integer", "minimum": 0, "maximum": limits.max_payload_bytes,
                "description": "length of each event's data string (default 0)",
            },
            "fail_at": {
                "type": "integer", "minimum": 0,
                "description": "fail right after the event with this 0-based index",
            },
        },
        "required": ["count"],
        "additionalProperties": false,
    })
}

fn trace_schema() -> Value {
    let names: Vec<&str> = trace::bundled().iter().map(|t| t.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string", "enum": names,
                "description": "which bundled trace to replay",
            },
            "speed": {
                "type": "number", "exclusiveMinimum": 0, "maximum": 100_000,
                "description": "times real time (default 1)",
            },
        },
        "required": ["name"],
        "additionalProperties": false,
    })
}

/// The `tools/list` result for `era`, before dressing.
/// A `tools/list` result for a session with or without Tasks: without them (2025-06-18) no
/// tool claims `execution.taskSupport`.
pub(crate) fn for_session(mut list: Value, tasks: bool) -> Value {
    if !tasks {
        if let Some(tools) = list.get_mut("tools").and_then(Value::as_array_mut) {
            for t in tools.iter_mut().filter_map(Value::as_object_mut) {
                t.remove("execution");
            }
        }
    }
    list
}

pub(crate) fn list(era: Era, limits: Limits) -> Value {
    let mut tools = vec![
        json!({
            "name": "emit",
            "title": "Emit synthetic events",
            "description": "Emits `count` dev.taskstream.tick events with payload \
                {\"i\": index, \"data\": string of payload_bytes characters}, interval_ms apart; \
                fails right after event fail_at if given. Runs as a task when asked to.",
            "inputSchema": emit_schema(limits),
        }),
        json!({
            "name": "run_trace",
            "title": "Replay a bundled agent trace",
            "description": "Replays a bundled trace (partial content, tool calls and results, a \
                subtask, an artifact) as task events at `speed` times real time.",
            "inputSchema": trace_schema(),
        }),
    ];
    if era == Era::Legacy {
        for t in &mut tools {
            if let Some(obj) = t.as_object_mut() {
                obj.insert("execution".into(), json!({ "taskSupport": "optional" }));
            }
        }
    }
    let mut result = json!({ "tools": tools });
    if let (Era::Modern { .. }, Some(obj)) = (era, result.as_object_mut()) {
        obj.insert("ttlMs".into(), json!(3_600_000));
        obj.insert("cacheScope".into(), json!("public"));
    }
    result
}

/// Validates a call of tool `name` and turns it into a workload.
///
/// # Errors
/// [`CallError`].
pub(crate) fn plan(
    name: &str,
    args: &Map<String, Value>,
    limits: Limits,
) -> Result<Workload, CallError> {
    match name {
        "emit" => {
            validate(args, &emit_schema(limits))?;
            let int = |k: &str| args.get(k).and_then(Value::as_u64);
            let emit = Emit {
                count: int("count").unwrap_or(0),
                interval_ms: int("interval_ms").unwrap_or(0),
                payload_bytes: int("payload_bytes").unwrap_or(0),
                fail_at: int("fail_at"),
            };
            if emit.largest_payload() > limits.max_payload_bytes {
                return Err(CallError::BadArguments(format!(
                    "payload_bytes: each event's payload would be {} bytes, above the server's \
                     limit of {} (--max-payload-bytes)",
                    emit.largest_payload(),
                    limits.max_payload_bytes
                )));
            }
            Ok(Workload::Emit(emit))
        }
        "run_trace" => {
            validate(args, &trace_schema())?;
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            let trace = trace::find(name)
                .ok_or_else(|| CallError::BadArguments(format!("name: no trace {name:?}")))?;
            let speed = args.get("speed").and_then(Value::as_f64).unwrap_or(1.0);
            Ok(Workload::Trace(trace::Replay { trace, speed }))
        }
        other => Err(CallError::UnknownTool(other.to_owned())),
    }
}

/// Checks `args` against an object schema of the vocabulary above.
fn validate(args: &Map<String, Value>, schema: &Value) -> Result<(), CallError> {
    let bad = |field: &str, why: &str| Err(CallError::BadArguments(format!("{field}: {why}")));
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            if !args.contains_key(field) {
                return bad(field, "required");
            }
        }
    }
    for (field, value) in args {
        let Some(prop) = props.get(field) else {
            return bad(field, "unknown argument");
        };
        let number = match prop.get("type").and_then(Value::as_str) {
            Some("integer") => match value.as_u64() {
                Some(n) => n as f64,
                None if value.as_i64().is_some() => return bad(field, "must not be negative"),
                None => return bad(field, "must be an integer"),
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
            _ => continue,
        };
        if let Some(min) = prop.get("minimum").and_then(Value::as_f64) {
            if number < min {
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_payload_bytes: 100,
    };

    #[track_caller]
    fn check(name: &str, args: Value, expected: Result<(), &str>) {
        let args = args.as_object().cloned().unwrap_or_default();
        let got = plan(name, &args, LIMITS).map(|_| ()).map_err(|e| match e {
            CallError::UnknownTool(t) => format!("unknown {t}"),
            CallError::BadArguments(m) => m,
        });
        match expected {
            Ok(()) => assert_eq!(got, Ok(())),
            Err(prefix) => assert!(
                got.as_ref().is_err_and(|m| m.starts_with(prefix)),
                "{got:?} should start with {prefix:?}"
            ),
        }
    }

    #[test]
    fn emit_arguments_are_checked_against_the_schema() {
        check("emit", json!({"count": 3}), Ok(()));
        check(
            "emit",
            json!({"count": 3, "interval_ms": 5, "payload_bytes": 10, "fail_at": 1}),
            Ok(()),
        );
        check("emit", json!({}), Err("count: required"));
        check(
            "emit",
            json!({"count": -1}),
            Err("count: must not be negative"),
        );
        check(
            "emit",
            json!({"count": 1.5}),
            Err("count: must be an integer"),
        );
        check(
            "emit",
            json!({"count": "3"}),
            Err("count: must be an integer"),
        );
        check(
            "emit",
            json!({"count": 3, "colour": 1}),
            Err("colour: unknown argument"),
        );
        check(
            "emit",
            json!({"count": 3, "payload_bytes": 101}),
            Err("payload_bytes: must be at most"),
        );
        check(
            "emit",
            json!({"count": 3, "payload_bytes": 90}),
            Err("payload_bytes: each event"),
        );
        check("nope", json!({}), Err("unknown nope"));
    }

    #[test]
    fn run_trace_arguments_are_checked_against_the_schema() {
        check("run_trace", json!({}), Err("name: required"));
        check(
            "run_trace",
            json!({"name": "no-such-trace"}),
            Err("name: must be one of"),
        );
        if let Some(t) = trace::bundled().first() {
            check("run_trace", json!({"name": t.name, "speed": 2.5}), Ok(()));
            check(
                "run_trace",
                json!({"name": t.name, "speed": 0}),
                Err("speed: must be greater"),
            );
        }
    }

    #[test]
    fn legacy_tools_declare_optional_task_support() {
        let l = list(Era::Legacy, LIMITS);
        assert_eq!(
            l["tools"][0]["execution"],
            json!({"taskSupport": "optional"})
        );
        assert!(l.get("ttlMs").is_none());
        let m = list(Era::Modern { tasks: true }, LIMITS);
        assert_eq!(m["ttlMs"], json!(3_600_000));
        assert_eq!(m["cacheScope"], json!("public"));
        assert!(m["tools"][0].get("execution").is_none());
    }
}
