//! Retention as data (SEP-2694, "Event Retention"; RT-01..RT-04, SE-07, SE-08).
//!
//! A [`RetentionPolicy`] says what a receiver keeps; the ring and the host's log both enforce
//! it. Time comes from the caller ([`Millis`]); this module never reads a clock.

use crate::time::Millis;

/// What a receiver retains, per task. The defaults are the `taskstream serve` defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Events retained per task; appending beyond this drops the oldest.
    pub max_events: u32,
    /// Bytes of stored events (type + compact payload) retained per task.
    pub max_bytes: u32,
    /// Events older than this are dropped.
    pub max_event_age: Millis,
    /// How long a terminal task and its events stay retrievable.
    pub terminal_retention: Millis,
    /// The largest compact payload of one event; larger events are refused.
    pub max_payload_bytes: u32,
    /// Retention from the latest checkpoint (`--retain-from-checkpoint`; CP-03): once an event
    /// of type [`CHECKPOINT_EVENT_TYPE`] is appended, every event of its task before it is
    /// dropped, so the earliest retained event is that checkpoint. The other limits still
    /// apply on top.
    pub retain_from_checkpoint: bool,
}

/// The type of a checkpoint event (docs/interface.md, "Checkpoints"): its payload is
/// `{"coversThrough": SEQ, "state": OBJECT}`, the task's state after every event up to and
/// including `coversThrough`.
pub const CHECKPOINT_EVENT_TYPE: &str = "dev.taskstream.checkpoint";

impl RetentionPolicy {
    /// 10 000 events per task.
    pub const DEFAULT_MAX_EVENTS: u32 = 10_000;
    /// 24 hours.
    pub const DEFAULT_MAX_EVENT_AGE: Millis = Millis::from_secs(86_400);
    /// 1 hour.
    pub const DEFAULT_TERMINAL_RETENTION: Millis = Millis::from_secs(3_600);
    /// 64 KiB.
    pub const DEFAULT_MAX_PAYLOAD_BYTES: u32 = 65_536;

    /// The `taskstream serve` defaults (docs/interface.md), with no byte limit beyond the event count.
    pub const DEFAULT: RetentionPolicy = RetentionPolicy {
        max_events: Self::DEFAULT_MAX_EVENTS,
        max_bytes: u32::MAX,
        max_event_age: Self::DEFAULT_MAX_EVENT_AGE,
        terminal_retention: Self::DEFAULT_TERMINAL_RETENTION,
        max_payload_bytes: Self::DEFAULT_MAX_PAYLOAD_BYTES,
        retain_from_checkpoint: false,
    };

    /// Whether appending an event of `event_type` drops every earlier event of its task
    /// ([`retain_from_checkpoint`](Self::retain_from_checkpoint) and a checkpoint).
    #[must_use]
    pub fn drops_before(&self, event_type: &str) -> bool {
        self.retain_from_checkpoint && event_type == CHECKPOINT_EVENT_TYPE
    }

    /// Whether an event stored at `at` has outlived [`max_event_age`](Self::max_event_age) at `now`.
    #[must_use]
    pub fn is_expired(&self, at: Millis, now: Millis) -> bool {
        now.saturating_since(at) > self.max_event_age
    }

    /// Whether a task that became terminal at `terminal_at` is past its terminal retention at
    /// `now`, after which the task and all its events are removed.
    #[must_use]
    pub fn is_task_expired(&self, terminal_at: Millis, now: Millis) -> bool {
        now.saturating_since(terminal_at) > self.terminal_retention
    }
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_measured_on_the_callers_clock() {
        let p = RetentionPolicy {
            max_event_age: Millis(100),
            terminal_retention: Millis(50),
            ..RetentionPolicy::DEFAULT
        };
        assert!(!p.is_expired(Millis(1000), Millis(1100)));
        assert!(p.is_expired(Millis(1000), Millis(1101)));
        // A clock that steps backwards never expires anything.
        assert!(!p.is_expired(Millis(1000), Millis(0)));
        assert!(!p.is_task_expired(Millis(10), Millis(60)));
        assert!(p.is_task_expired(Millis(10), Millis(61)));
    }

    #[test]
    fn defaults_match_the_interface() {
        let p = RetentionPolicy::default();
        assert_eq!(p.max_events, 10_000);
        assert_eq!(p.max_event_age, Millis(86_400_000));
        assert_eq!(p.terminal_retention, Millis(3_600_000));
        assert_eq!(p.max_payload_bytes, 65_536);
        assert!(!p.retain_from_checkpoint);
    }

    #[test]
    fn only_a_checkpoint_under_the_option_drops_what_came_before() {
        let on = RetentionPolicy {
            retain_from_checkpoint: true,
            ..RetentionPolicy::DEFAULT
        };
        assert!(on.drops_before(CHECKPOINT_EVENT_TYPE));
        assert!(!on.drops_before("dev.taskstream.tick"));
        assert!(!RetentionPolicy::DEFAULT.drops_before(CHECKPOINT_EVENT_TYPE));
    }
}
