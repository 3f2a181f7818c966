//! The `emit` tool (docs/interface.md): exactly `count` events of type `dev.taskstream.tick` with
//! payload `{"i": <0-based index>, "data": <payload_bytes characters>}`, `interval_ms` apart;
//! with `fail_at = k` the work fails right after event `k` (so `k + 1` ticks are emitted);
//! with `checkpoint_every = n` a `dev.taskstream.checkpoint` `{"coversThrough": SEQ, "state":
//! {"ticks": <ticks so far>}}` follows every `n`-th tick.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::{int, schema};
use crate::tool::{Step, Steps, TaskContext, Tool, ToolError, ToolResult};
use taskstream_core::CHECKPOINT_EVENT_TYPE;

/// The event type of each tick.
pub(crate) const TICK_TYPE: &str = "dev.taskstream.tick";

/// Validated arguments of `emit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Emit {
    /// How many ticks.
    pub(crate) count: u64,
    /// Pause between two ticks, in ms.
    pub(crate) interval_ms: u64,
    /// Length of each tick's `data` string.
    pub(crate) payload_bytes: u64,
    /// Fail right after the tick with this index.
    pub(crate) fail_at: Option<u64>,
    /// Append a checkpoint after every this many ticks.
    pub(crate) checkpoint_every: Option<u64>,
}

/// The `emit` tool.
pub(crate) fn tool(max_payload_bytes: u64) -> Tool {
    let input = schema(
        json!({
            "count": {
                "type": "integer", "minimum": 0, "maximum": 1_000_000,
                "description": "how many dev.taskstream.tick events to emit",
            },
            "interval_ms": {
                "type": "integer", "minimum": 0, "maximum": 3_600_000,
                "description": "pause between two events (default 0)",
            },
            "payload_bytes": {
                "type": "integer", "minimum": 0, "maximum": max_payload_bytes,
                "description": "length of each event's data string (default 0)",
            },
            "fail_at": {
                "type": "integer", "minimum": 0,
                "description": "fail right after the event with this 0-based index",
            },
            "checkpoint_every": {
                "type": "integer", "minimum": 1,
                "description": "after every N ticks, append a dev.taskstream.checkpoint event \
                                {\"coversThrough\": seq, \"state\": {\"ticks\": ticks so far}}",
            },
        }),
        &["count"],
    );
    Tool::stepped(
        "emit",
        "Emits `count` dev.taskstream.tick events with payload \
         {\"i\": index, \"data\": string of payload_bytes characters}, interval_ms apart; \
         fails right after event fail_at if given; with checkpoint_every N, a \
         dev.taskstream.checkpoint {\"coversThrough\", \"state\": {\"ticks\": n}} follows every \
         N-th tick. Runs as a task when asked to.",
        input,
        |args| Box::new(Emit::from_args(args).steps()),
    )
    .title("Emit synthetic events")
    .check_arguments(move |args| {
        let emit = Emit::from_args(args);
        if emit.largest_payload() > max_payload_bytes {
            return Err(format!(
                "payload_bytes: each event's payload would be {} bytes, above the server's \
                 limit of {max_payload_bytes} (--max-payload-bytes)",
                emit.largest_payload(),
            ));
        }
        Ok(())
    })
    .expected_events(|args| Some(Emit::from_args(args).total_events()))
}

impl Emit {
    /// The call's arguments (already checked against the schema).
    pub(crate) fn from_args(args: &Map<String, Value>) -> Emit {
        Emit {
            count: int(args, "count").unwrap_or(0),
            interval_ms: int(args, "interval_ms").unwrap_or(0),
            payload_bytes: int(args, "payload_bytes").unwrap_or(0),
            fail_at: int(args, "fail_at"),
            checkpoint_every: int(args, "checkpoint_every").filter(|n| *n > 0),
        }
    }

    /// How many events the call emits when it does not fail: its ticks and checkpoints.
    pub(crate) fn total_events(&self) -> u64 {
        self.count + self.checkpoint_every.map_or(0, |n| self.count / n)
    }

    /// The compact size of the largest tick payload this call produces.
    pub(crate) fn largest_payload(&self) -> u64 {
        let digits = self.count.saturating_sub(1).checked_ilog10().unwrap_or(0) + 1;
        // {"i":N,"data":"…"}
        16 + u64::from(digits) + self.payload_bytes
    }

    /// The call's work as steps: between two ticks its task holds no thread.
    pub(crate) fn steps(self) -> EmitSteps {
        EmitSteps {
            data: "x".repeat(usize::try_from(self.payload_bytes).unwrap_or(0)),
            emit: self,
            i: 0,
            start: None,
        }
    }

    /// Runs the call to its end on this thread.
    #[cfg(test)]
    pub(crate) fn run(self, ctx: &mut TaskContext<'_>) -> Result<ToolResult, ToolError> {
        crate::tool::drive(&mut self.steps(), ctx)
    }
}

/// Ticks while they are due: the first at once, then one per `interval_ms` on a fixed schedule
/// from the first (a late step catches up rather than drifting).
pub(crate) struct EmitSteps {
    emit: Emit,
    data: String,
    /// The index of the next tick.
    i: u64,
    /// When the first step ran.
    start: Option<Instant>,
}

/// Ticks a step with no interval emits before it lets other tasks' steps run.
const TICKS_PER_STEP: u64 = 1024;

impl Steps for EmitSteps {
    fn step(&mut self, ctx: &mut TaskContext<'_>) -> Result<Step, ToolError> {
        let start = *self.start.get_or_insert_with(Instant::now);
        let interval = Duration::from_millis(self.emit.interval_ms);
        let mut emitted = 0;
        while self.i < self.emit.count {
            let i = self.i;
            // Called back at the deadline asked for: the tick is due.
            let payload = format!(r#"{{"i":{i},"data":"{}"}}"#, self.data);
            let seq = ctx.emit_json(TICK_TYPE, payload.as_bytes())?;
            self.i += 1;
            emitted += 1;
            if self
                .emit
                .checkpoint_every
                .is_some_and(|n| self.i.is_multiple_of(n))
            {
                // The state of a run of ticks is how many there were (CP-02).
                let checkpoint = format!(
                    r#"{{"coversThrough":{seq},"state":{{"ticks":{}}}}}"#,
                    self.i
                );
                ctx.emit_json(CHECKPOINT_EVENT_TYPE, checkpoint.as_bytes())?;
            }
            if self.emit.fail_at == Some(i) {
                return Ok(Step::Done(ToolResult::error(format!(
                    "emit failed after event {i}"
                ))));
            }
            if self.i == self.emit.count {
                break;
            }
            if !interval.is_zero() {
                let due = u32::try_from(self.i)
                    .ok()
                    .and_then(|n| interval.checked_mul(n))
                    .and_then(|d| start.checked_add(d))
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
                return Ok(Step::WakeAt(due));
            }
            if emitted >= TICKS_PER_STEP {
                return Ok(Step::WakeAt(Instant::now()));
            }
        }
        Ok(Step::Done(ToolResult::text(format!(
            "emitted {} events",
            self.emit.count
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Recorder;
    use super::*;
    use crate::tool::{text_result, Outcome};

    fn emit(count: u64, payload_bytes: u64, fail_at: Option<u64>) -> Emit {
        Emit {
            count,
            interval_ms: 5,
            payload_bytes,
            fail_at,
            checkpoint_every: None,
        }
    }

    fn run(e: &Emit, sink: &mut Recorder) -> Result<Outcome, ToolError> {
        let mut ctx = TaskContext::new(sink);
        e.clone().run(&mut ctx).map(Outcome::from)
    }

    #[test]
    fn emits_exactly_count_ticks_with_their_index() {
        let mut sink = Recorder::default();
        let out = run(&emit(3, 4, None), &mut sink);
        assert_eq!(
            out,
            Ok(Outcome::Completed(text_result("emitted 3 events", false)))
        );
        let expected: Vec<(String, String)> = (0..3)
            .map(|i| {
                (
                    TICK_TYPE.to_owned(),
                    format!(r#"{{"i":{i},"data":"xxxx"}}"#),
                )
            })
            .collect();
        assert_eq!(sink.events, expected);
        assert_eq!(sink.waits.get(), 2);
    }

    #[test]
    fn fails_right_after_event_fail_at() {
        let mut sink = Recorder::default();
        let out = run(&emit(10, 0, Some(2)), &mut sink);
        assert_eq!(out, Ok(Outcome::failed("emit failed after event 2".into())));
        assert_eq!(sink.events.len(), 3);
    }

    #[test]
    fn stops_when_the_sink_says_so() {
        let mut sink = Recorder {
            cancel_after: Some(1),
            ..Recorder::default()
        };
        assert_eq!(
            run(&emit(10, 0, None), &mut sink),
            Err(ToolError::Cancelled)
        );
        assert_eq!(sink.events.len(), 1);
    }

    #[test]
    fn largest_payload_is_exact() {
        for (count, bytes) in [(1, 0), (10, 3), (11, 0), (1000, 7)] {
            let e = emit(count, bytes, None);
            let last = format!(
                r#"{{"i":{},"data":"{}"}}"#,
                count - 1,
                "x".repeat(bytes as usize)
            );
            assert_eq!(e.largest_payload(), last.len() as u64, "{count}");
        }
    }

    #[test]
    fn checkpoint_every_follows_every_nth_tick_with_the_ticks_so_far() {
        // CP-02
        let mut sink = Recorder::default();
        let e = Emit {
            checkpoint_every: Some(2),
            ..emit(5, 0, None)
        };
        assert_eq!(e.total_events(), 7);
        run(&e, &mut sink).unwrap();
        let types: Vec<&str> = sink.events.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            [
                TICK_TYPE,
                TICK_TYPE,
                CHECKPOINT_EVENT_TYPE,
                TICK_TYPE,
                TICK_TYPE,
                CHECKPOINT_EVENT_TYPE,
                TICK_TYPE
            ]
        );
        assert_eq!(
            sink.events[2].1,
            r#"{"coversThrough":1,"state":{"ticks":2}}"#
        );
        assert_eq!(
            sink.events[5].1,
            r#"{"coversThrough":4,"state":{"ticks":4}}"#
        );
    }
}
