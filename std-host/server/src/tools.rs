//! The tools (MCP-DIGEST a.7): their definitions for `tools/list`, and turning a `tools/call`'s
//! arguments into a [`Workload`] by checking them against the tool's own `inputSchema` (the
//! vocabulary [`Tool::new`](crate::tool::Tool::new) names), so the schema a client sees is the
//! one that is enforced.

use serde_json::{json, Map, Value};

use crate::tool::{Registry, Workload};
use crate::wire::era::Era;

/// Why a call cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No tool by that name: a protocol error (-32602).
    UnknownTool(String),
    /// The arguments do not fit the schema: a tool result with `isError: true`.
    BadArguments(String),
}

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

/// The `tools/list` result for `era`, before dressing.
pub(crate) fn list(era: Era, registry: &Registry) -> Value {
    let tools: Vec<Value> = registry
        .iter()
        .map(|t| {
            let mut def = t.definition().clone();
            match era {
                Era::Legacy => {
                    def.insert("execution".into(), json!({ "taskSupport": "optional" }));
                }
                // SEP-2663: the server decides; no per-tool declaration.
                Era::Modern { .. } => {
                    def.remove("execution");
                }
            }
            Value::Object(def)
        })
        .collect();
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
    registry: &Registry,
) -> Result<Workload, CallError> {
    let tool = registry
        .get(name)
        .ok_or_else(|| CallError::UnknownTool(name.to_owned()))?;
    tool.check(args).map_err(CallError::BadArguments)?;
    Ok(Workload {
        tool: std::sync::Arc::clone(tool),
        args: args.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{builtin, trace};

    fn registry() -> Registry {
        Registry::new(builtin(100))
    }

    #[track_caller]
    fn check(name: &str, args: Value, expected: Result<(), &str>) {
        let args = args.as_object().cloned().unwrap_or_default();
        let got = plan(name, &args, &registry())
            .map(|_| ())
            .map_err(|e| match e {
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
        let l = list(Era::Legacy, &registry());
        assert_eq!(
            l["tools"][0]["execution"],
            json!({"taskSupport": "optional"})
        );
        assert!(l.get("ttlMs").is_none());
        let m = list(Era::Modern { tasks: true }, &registry());
        assert_eq!(m["ttlMs"], json!(3_600_000));
        assert_eq!(m["cacheScope"], json!("public"));
        assert!(m["tools"][0].get("execution").is_none());
    }

    #[test]
    fn tools_keep_their_definition_order_and_fields() {
        let l = list(Era::Legacy, &registry());
        assert_eq!(l["tools"][0]["name"], "emit");
        assert_eq!(l["tools"][0]["title"], "Emit synthetic events");
        assert_eq!(l["tools"][1]["name"], "run_trace");
        assert_eq!(l["tools"][1]["inputSchema"]["required"], json!(["name"]));
    }
}
