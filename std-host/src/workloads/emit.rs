//! The `emit` tool (docs/interface.md): exactly `count` events of type `dev.taskstream.tick` with
//! payload `{"i": <0-based index>, "data": <payload_bytes characters>}`, `interval_ms` apart;
//! with `fail_at = k` the work fails right after event `k` (so `k + 1` ticks are emitted).

use std::time::{Duration, Instant};

use super::{text_result, Outcome, Sink, Stop};

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
}

impl Emit {
    /// The compact size of the largest tick payload this call produces.
    pub(crate) fn largest_payload(&self) -> u64 {
        let digits = self.count.saturating_sub(1).checked_ilog10().unwrap_or(0) + 1;
        // {"i":N,"data":"…"}
        16 + u64::from(digits) + self.payload_bytes
    }

    pub(super) fn run(&self, sink: &mut dyn Sink) -> Result<Outcome, Stop> {
        let data = "x".repeat(usize::try_from(self.payload_bytes).unwrap_or(0));
        let interval = Duration::from_millis(self.interval_ms);
        let mut next = Instant::now();
        for i in 0..self.count {
            if i > 0 && !interval.is_zero() {
                next += interval;
                sink.wait_until(next)?;
            }
            let payload = format!(r#"{{"i":{i},"data":"{data}"}}"#);
            sink.emit(TICK_TYPE, payload.as_bytes())?;
            if self.fail_at == Some(i) {
                return Ok(Outcome::failed(format!("emit failed after event {i}")));
            }
        }
        let result = text_result(&format!("emitted {} events", self.count), false);
        Ok(Outcome::Completed(result))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Recorder;
    use super::*;

    fn emit(count: u64, payload_bytes: u64, fail_at: Option<u64>) -> Emit {
        Emit {
            count,
            interval_ms: 5,
            payload_bytes,
            fail_at,
        }
    }

    #[test]
    fn emits_exactly_count_ticks_with_their_index() {
        let mut sink = Recorder::default();
        let out = emit(3, 4, None).run(&mut sink);
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
        assert_eq!(sink.waits, 2);
    }

    #[test]
    fn fails_right_after_event_fail_at() {
        let mut sink = Recorder::default();
        let out = emit(10, 0, Some(2)).run(&mut sink);
        assert_eq!(out, Ok(Outcome::failed("emit failed after event 2".into())));
        assert_eq!(sink.events.len(), 3);
    }

    #[test]
    fn stops_when_the_sink_says_so() {
        let mut sink = Recorder {
            cancel_after: Some(1),
            ..Recorder::default()
        };
        assert_eq!(emit(10, 0, None).run(&mut sink), Err(Stop::Cancelled));
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
}
