//! The `run_trace` tool: replays a bundled trace (`data/traces/<name>.jsonl`, embedded at build
//! time, line format in `data/README.md`) as task events at `speed` times real time.
//!
//! Format 1: the first line is `{"trace": {"format": 1, "name", "duration_ms", "event_count",
//! "outcome": "completed"|"failed", "status_message"?, "result": CallToolResult, …}}`; every
//! other line is `{"t_ms": <ms since start>, "type": "<vendor-prefixed>", "payload": {…}}` with
//! non-decreasing `t_ms`. A trace that does not parse is left out (and logged once).

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::schema;
use crate::tool::{Step, Steps, TaskContext, Tool, ToolError, ToolResult};
use taskstream_core::CHECKPOINT_EVENT_TYPE;

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/traces.rs"));
}

/// One event of a trace, ready to append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Offset from the start of the run, in ms of real time at speed 1.
    pub t_ms: u64,
    /// Its vendor-prefixed type.
    pub event_type: String,
    /// Its payload, compact JSON object text.
    pub payload: String,
}

/// A parsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Its name (the file stem).
    pub name: String,
    /// How long the run takes at speed 1, in ms.
    pub duration_ms: u64,
    /// Whether the run ends completed (else failed).
    pub completed: bool,
    /// The status message of a failed run.
    pub status_message: Option<String>,
    /// The final `CallToolResult`.
    pub result: Value,
    /// Its events in order.
    pub events: Vec<TraceEvent>,
}

/// Why a trace file was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// Parses one trace file.
///
/// # Errors
/// [`TraceError`] naming the first bad line.
pub fn parse(name: &str, text: &str) -> Result<Trace, TraceError> {
    let err = |line: usize, what: &str| TraceError {
        line,
        what: what.to_owned(),
    };
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or_else(|| err(1, "empty trace"))?;
    let head: Value = serde_json::from_str(first).map_err(|e| err(1, &e.to_string()))?;
    let head = head
        .get("trace")
        .ok_or_else(|| err(1, "no \"trace\" header"))?;
    if head.get("format").and_then(Value::as_u64) != Some(1) {
        return Err(err(1, "unsupported format"));
    }
    let completed = match head.get("outcome").and_then(Value::as_str) {
        Some("completed") => true,
        Some("failed") => false,
        _ => return Err(err(1, "outcome is not completed or failed")),
    };
    let result = head
        .get("result")
        .filter(|r| r.is_object())
        .cloned()
        .ok_or_else(|| err(1, "no result object"))?;
    let mut events = Vec::new();
    let mut last = 0;
    for (i, line) in lines {
        let v: Value = serde_json::from_str(line).map_err(|e| err(i + 1, &e.to_string()))?;
        let t_ms = v
            .get("t_ms")
            .and_then(Value::as_u64)
            .filter(|t| *t >= last)
            .ok_or_else(|| err(i + 1, "t_ms missing or decreasing"))?;
        last = t_ms;
        let event_type = v
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| err(i + 1, "no type"))?
            .to_owned();
        let payload = v
            .get("payload")
            .filter(|p| p.is_object())
            .ok_or_else(|| err(i + 1, "payload is not an object"))?
            .to_string();
        events.push(TraceEvent {
            t_ms,
            event_type,
            payload,
        });
    }
    Ok(Trace {
        name: name.to_owned(),
        duration_ms: head
            .get("duration_ms")
            .and_then(Value::as_u64)
            .unwrap_or(last)
            .max(last),
        completed,
        status_message: head
            .get("status_message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        result,
        events,
    })
}

/// The bundled traces that parse, sorted by name; parsed once.
pub fn bundled() -> &'static [Trace] {
    static TRACES: OnceLock<Vec<Trace>> = OnceLock::new();
    TRACES.get_or_init(|| {
        bundled::BUNDLED
            .iter()
            .filter_map(|(name, text)| match parse(name, text) {
                Ok(t) => Some(t),
                Err(e) => {
                    eprintln!(
                        "taskstream: bundled trace {name} line {}: {}; left out",
                        e.line, e.what
                    );
                    None
                }
            })
            .collect()
    })
}

/// The bundled trace called `name`.
pub fn find(name: &str) -> Option<&'static Trace> {
    bundled().iter().find(|t| t.name == name)
}

/// A trace to replay at a speed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Replay {
    /// The trace.
    pub(crate) trace: &'static Trace,
    /// Times real time (> 0).
    pub(crate) speed: f64,
    /// Append a checkpoint after every this many trace events.
    pub(crate) checkpoint_every: Option<u64>,
}

/// The `run_trace` tool.
pub(crate) fn tool() -> Tool {
    let names: Vec<&str> = bundled().iter().map(|t| t.name.as_str()).collect();
    let input = schema(
        json!({
            "name": {
                "type": "string", "enum": names,
                "description": "which bundled trace to replay",
            },
            "speed": {
                "type": "number", "exclusiveMinimum": 0, "maximum": 100_000,
                "description": "times real time (default 1)",
            },
            "checkpoint_every": {
                "type": "integer", "minimum": 1,
                "description": "after every N trace events, append a dev.taskstream.checkpoint \
                                whose state is {\"events\": n, \"types\": {type: count}}",
            },
        }),
        &["name"],
    );
    Tool::stepped(
        "run_trace",
        "Replays a bundled trace (partial content, tool calls and results, a subtask, an \
         artifact) as task events at `speed` times real time; with checkpoint_every N, a \
         dev.taskstream.checkpoint {\"events\": n, \"types\": {type: count}} follows every \
         N-th event.",
        input,
        |args| -> Box<dyn Steps> {
            match Replay::from_args(args) {
                Some(replay) => Box::new(replay.steps()),
                None => Box::new(|_: &mut TaskContext<'_>| {
                    Ok(Step::Done(ToolResult::error("name: no such trace")))
                }),
            }
        },
    )
    .title("Replay a bundled agent trace")
    .expected_events(|args| Replay::from_args(args).map(|r| r.total_events()))
}

impl Replay {
    /// The call's arguments (already checked against the schema), if the trace exists.
    pub(crate) fn from_args(args: &serde_json::Map<String, Value>) -> Option<Replay> {
        let name = args.get("name").and_then(Value::as_str)?;
        let speed = args.get("speed").and_then(Value::as_f64).unwrap_or(1.0);
        let checkpoint_every = args
            .get("checkpoint_every")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0);
        Some(Replay {
            trace: find(name)?,
            speed,
            checkpoint_every,
        })
    }

    pub(crate) fn total_events(&self) -> u64 {
        let n = self.trace.events.len() as u64;
        n + self.checkpoint_every.map_or(0, |k| n / k)
    }

    fn at(&self, start: Instant, t_ms: u64) -> Instant {
        // `speed` is validated finite and > 0; the quotient is finite and non-negative.
        let secs = (t_ms as f64 / 1000.0) / self.speed;
        start + Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(86_400))
    }

    /// The replay as steps: between two events its task holds no thread.
    pub(crate) fn steps(self) -> ReplaySteps {
        ReplaySteps {
            replay: self,
            next: 0,
            start: None,
            waited: false,
            types: BTreeMap::new(),
        }
    }

    /// Runs the replay to its end on this thread.
    #[cfg(test)]
    pub(crate) fn run(self, ctx: &mut TaskContext<'_>) -> Result<ToolResult, ToolError> {
        crate::tool::drive(&mut self.steps(), ctx)
    }

    /// The tool result at the end of the trace.
    fn result(&self) -> ToolResult {
        let mut value = self.trace.result.clone();
        if let (false, Some(obj)) = (self.trace.completed, value.as_object_mut()) {
            obj.insert("isError".into(), Value::Bool(true));
        }
        let result = ToolResult::of(value);
        if self.trace.completed {
            result
        } else {
            let message = self
                .trace
                .status_message
                .clone()
                .unwrap_or_else(|| format!("trace {} failed", self.trace.name));
            result.status_message(message)
        }
    }
}

/// Each event at its time from the first step, then the result at the trace's end.
pub(crate) struct ReplaySteps {
    replay: Replay,
    /// The index of the next event (the trace's length: the end is next).
    next: usize,
    start: Option<Instant>,
    /// Whether this step is the wake-up asked for the next event (or end): it is due.
    waited: bool,
    /// How many events of each type were emitted so far (the checkpoints' state).
    types: BTreeMap<&'static str, u64>,
}

impl Steps for ReplaySteps {
    fn step(&mut self, ctx: &mut TaskContext<'_>) -> Result<Step, ToolError> {
        let start = *self.start.get_or_insert_with(Instant::now);
        let events = &self.replay.trace.events;
        loop {
            let t_ms = events
                .get(self.next)
                .map_or(self.replay.trace.duration_ms, |e| e.t_ms);
            let at = self.replay.at(start, t_ms);
            if !self.waited && at > Instant::now() {
                self.waited = true;
                return Ok(Step::WakeAt(at));
            }
            self.waited = false;
            let Some(e) = events.get(self.next) else {
                return Ok(Step::Done(self.replay.result()));
            };
            let seq = ctx.emit_json(&e.event_type, e.payload.as_bytes())?;
            self.next += 1;
            if let Some(k) = self.replay.checkpoint_every {
                *self.types.entry(e.event_type.as_str()).or_insert(0) += 1;
                if (self.next as u64).is_multiple_of(k) {
                    // A state any client can derive from the events themselves (CP-01).
                    let state = json!({"events": self.next, "types": self.types});
                    let payload = json!({"coversThrough": seq, "state": state}).to_string();
                    ctx.emit_json(CHECKPOINT_EVENT_TYPE, payload.as_bytes())?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Recorder;
    use super::*;

    const SAMPLE: &str = concat!(
        r#"{"trace":{"format":1,"name":"t","duration_ms":50,"event_count":2,"outcome":"failed","status_message":"boom","result":{"content":[],"isError":true}}}"#,
        "\n",
        r#"{"t_ms":0,"type":"dev.taskstream.a.b","payload":{"x": 1}}"#,
        "\n",
        r#"{"t_ms":10,"type":"dev.taskstream.c.d","payload":{}}"#,
        "\n",
    );

    #[test]
    fn parses_and_replays_a_trace() {
        let t = parse("t", SAMPLE).map_err(|e| e.what);
        let Ok(t) = t else { panic!("{t:?}") };
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.events[0].payload, r#"{"x":1}"#);
        let leaked: &'static Trace = Box::leak(Box::new(t));
        let replay = Replay {
            trace: leaked,
            speed: 1000.0,
            checkpoint_every: None,
        };
        let mut sink = Recorder::default();
        let out = replay
            .run(&mut TaskContext::new(&mut sink))
            .map(crate::tool::Outcome::from);
        assert_eq!(
            out,
            Ok(crate::tool::Outcome::Failed {
                message: "boom".into(),
                result: serde_json::json!({"content":[],"isError":true})
            })
        );
        assert_eq!(
            sink.events,
            vec![
                ("dev.taskstream.a.b".to_owned(), r#"{"x":1}"#.to_owned()),
                ("dev.taskstream.c.d".to_owned(), "{}".to_owned()),
            ]
        );
    }

    #[test]
    fn rejects_bad_lines_with_their_number() {
        let bad = SAMPLE.replace(r#""t_ms":10"#, r#""t_ms":-1"#);
        assert_eq!(parse("t", &bad).map_err(|e| e.line), Err(3));
        assert_eq!(parse("t", "").map_err(|e| e.line), Err(1));
        assert_eq!(parse("t", "[1]").map_err(|e| e.line), Err(1));
    }

    #[test]
    fn every_bundled_trace_parses() {
        assert_eq!(bundled().len(), bundled::BUNDLED.len());
    }

    #[test]
    fn checkpoint_every_appends_the_counts_so_far() {
        // CP-01: the state is what the events before it add up to.
        let t = parse("t", SAMPLE).map_err(|e| e.what);
        let Ok(t) = t else { panic!("{t:?}") };
        let leaked: &'static Trace = Box::leak(Box::new(t));
        let replay = Replay {
            trace: leaked,
            speed: 1000.0,
            checkpoint_every: Some(1),
        };
        assert_eq!(replay.total_events(), 4);
        let mut sink = Recorder::default();
        let _ = replay.run(&mut TaskContext::new(&mut sink));
        let got: Vec<(&str, &str)> = sink
            .events
            .iter()
            .map(|(t, p)| (t.as_str(), p.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("dev.taskstream.a.b", r#"{"x":1}"#),
                (
                    CHECKPOINT_EVENT_TYPE,
                    r#"{"coversThrough":0,"state":{"events":1,"types":{"dev.taskstream.a.b":1}}}"#
                ),
                ("dev.taskstream.c.d", "{}"),
                (
                    CHECKPOINT_EVENT_TYPE,
                    r#"{"coversThrough":2,"state":{"events":2,"types":{"dev.taskstream.a.b":1,"dev.taskstream.c.d":1}}}"#
                ),
            ]
        );
    }
}
