//! A task of the `emit` tool and its event log, with per-task retention.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// A task's status, as both Tasks specifications name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        self != Status::Working
    }
}

/// One stored event. Its content never changes once stored.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) seq: u64,
    pub(crate) kind: String,
    pub(crate) payload: Value,
    /// When it was stored, for the maximum event age.
    pub(crate) stored_at: Instant,
}

/// What `emit` was asked to do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Emit {
    pub(crate) count: u64,
    pub(crate) interval: Duration,
    pub(crate) payload_bytes: usize,
    pub(crate) fail_at: Option<u64>,
    /// A checkpoint follows every this many ticks (taskstream's `checkpoint_every`).
    pub(crate) checkpoint_every: Option<u64>,
}

impl Emit {
    /// Reads `emit`'s arguments.
    ///
    /// # Errors
    ///
    /// What is wrong with them, for an `isError` result.
    pub(crate) fn parse(args: &Value) -> Result<Emit, String> {
        let count = args
            .get("count")
            .and_then(Value::as_u64)
            .ok_or("count must be a non-negative integer")?;
        let number = |key: &str| match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .map(Some)
                .ok_or(format!("{key} must be a non-negative integer")),
        };
        let interval_ms = number("interval_ms")?.unwrap_or(0);
        let payload_bytes = number("payload_bytes")?.unwrap_or(0);
        Ok(Emit {
            count,
            interval: Duration::from_millis(interval_ms),
            payload_bytes: usize::try_from(payload_bytes).map_err(|_| "payload_bytes too large")?,
            fail_at: number("fail_at")?,
            checkpoint_every: number("checkpoint_every")?.filter(|n| *n > 0),
        })
    }
}

/// A task and what is retained of its events.
#[derive(Debug)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) status: Status,
    pub(crate) emit: Emit,
    pub(crate) ticks: u64,
    /// When the next tick is due, while the task runs slowly.
    pub(crate) due: Option<Instant>,
    pub(crate) log: VecDeque<Record>,
    /// The seq the next event gets.
    pub(crate) next_seq: u64,
    /// The last seq assigned, if any.
    pub(crate) last_seq: Option<u64>,
    /// Whether retention has dropped any event.
    pub(crate) dropped: bool,
    /// Whether its earliest retained event is a checkpoint that events before it were dropped
    /// for (checkpoint-gap).
    pub(crate) from_checkpoint: bool,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

impl Task {
    pub(crate) fn new(id: String, emit: Emit, first_seq: u64) -> Task {
        let now = iso_now();
        Task {
            id,
            status: Status::Working,
            emit,
            ticks: 0,
            due: None,
            log: VecDeque::new(),
            next_seq: first_seq,
            last_seq: None,
            dropped: false,
            from_checkpoint: false,
            created_at: now.clone(),
            updated_at: now,
        }
    }

    /// The oldest retained seq; when nothing is retained, the next seq to be assigned
    ///
    pub(crate) fn earliest(&self) -> u64 {
        self.log.front().map_or(self.next_seq, |r| r.seq)
    }

    /// The first retained event with a seq of at least `seq`.
    pub(crate) fn first_from(&self, seq: u64) -> Option<&Record> {
        self.log.iter().find(|r| r.seq >= seq)
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&Record> {
        self.log.iter().find(|r| r.seq == seq)
    }

    /// Stores an event, dropping the oldest beyond `max_events`.
    pub(crate) fn store(&mut self, record: Record, max_events: usize) {
        self.last_seq = Some(record.seq);
        self.log.push_back(record);
        while self.log.len() > max_events {
            self.log.pop_front();
            self.dropped = true;
        }
    }

    /// Drops every event below `seq`, as retention would (gone-on-resume).
    pub(crate) fn drop_below(&mut self, seq: u64) {
        while self.log.front().is_some_and(|r| r.seq < seq) {
            self.log.pop_front();
            self.dropped = true;
        }
    }

    /// Drops the events stored before `cutoff`, oldest first.
    pub(crate) fn expire(&mut self, cutoff: Instant) {
        while self.log.front().is_some_and(|r| r.stored_at < cutoff) {
            self.log.pop_front();
            self.dropped = true;
        }
    }

    pub(crate) fn set_status(&mut self, status: Status) {
        self.status = status;
        self.updated_at = iso_now();
        if status.is_terminal() {
            self.due = None;
        }
    }
}

/// Now as ISO-8601 UTC, e.g. `2026-07-28T12:00:00Z`.
fn iso_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let days = i64::try_from(secs / 86_400).unwrap_or_default();
    let rest = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
