//! The resume decision (SEP-2694, "Resume and Replay Semantics" and "events_gone error") as one
//! pure function, [`decide`]. Everything that answers a `tasks/stream` request asks it; nothing
//! else re-derives these rules.
//!
//! Inputs: the `after` cursor (already checked to be an integer in `0 ..= 2^53 - 1`, RS-01 /
//! RS-02), the task's retained range, and whether the task is terminal. Output: where the stream
//! starts, or why it cannot.

use core::fmt;

use crate::seq::Seq;

/// The seqs a receiver still holds for a task: `earliest .. next` (empty when equal).
///
/// `next` is the seq the task's next event will get, so `next - 1` is the last seq assigned.
/// When events were dropped and none is retained, `earliest == next` (MCP-DIGEST A-03: the
/// `earliestSeq` reported is then the next seq to be issued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retained {
    earliest: Seq,
    next: Seq,
}

impl Retained {
    /// A retained range; `None` if `earliest > next`.
    #[must_use]
    pub fn new(earliest: Seq, next: Seq) -> Option<Retained> {
        (earliest <= next).then_some(Retained { earliest, next })
    }

    /// Nothing ever appended.
    pub const EMPTY: Retained = Retained {
        earliest: Seq::ZERO,
        next: Seq::ZERO,
    };

    /// The oldest retained seq (or `next` if nothing is retained).
    #[must_use]
    pub const fn earliest(&self) -> Seq {
        self.earliest
    }

    /// The seq the next event will get.
    #[must_use]
    pub const fn next(&self) -> Seq {
        self.next
    }

    /// The last seq ever assigned, if any.
    #[must_use]
    pub const fn last(&self) -> Option<Seq> {
        self.next.prev()
    }

    /// Whether no event is retained.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.earliest == self.next
    }

    /// How many events are retained.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.next.distance_from(self.earliest)
    }

    /// Whether `seq` is retained.
    #[must_use]
    pub fn contains(&self, seq: Seq) -> bool {
        self.earliest <= seq && seq < self.next
    }
}

/// Whether a task can still produce events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Working (or waiting for input): live events may follow.
    Running,
    /// Completed, failed or cancelled: the log is frozen (MCP-DIGEST A-04).
    Terminal,
}

/// Where a stream starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Replay retained events from `from` (inclusive), then continue with live events; close
    /// with the empty result once a terminal task is caught up (RS-03a, RS-05, DX-07).
    Replay {
        /// The first seq to send.
        from: Seq,
    },
    /// Nothing to replay: deliver live events from `from`, the task's next seq (RS-05).
    Live {
        /// The seq of the first live event.
        from: Seq,
    },
    /// Nothing to send and nothing will come: return the empty result at once (RS-04, RS-06).
    Complete,
}

impl Resume {
    /// The first seq this stream delivers, or `None` if it completes at once.
    #[must_use]
    pub const fn first_seq(&self) -> Option<Seq> {
        match self {
            Resume::Replay { from } | Resume::Live { from } => Some(*from),
            Resume::Complete => None,
        }
    }
}

/// Why a valid `after` cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeError {
    /// Events after the cursor are no longer retained (RS-03b, RS-07, RT-04, EG-01).
    EventsGone {
        /// The oldest retained seq (the next seq if nothing is retained).
        earliest: Seq,
    },
    /// The cursor is beyond the last seq ever assigned: no such event exists (MCP-DIGEST A-01;
    /// answered as invalid params, RS-02).
    CursorAhead {
        /// The cursor given.
        after: Seq,
        /// The seq the task's next event will get.
        next: Seq,
    },
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResumeError::EventsGone { earliest } => {
                write!(
                    f,
                    "events after the cursor are gone; earliest retained seq is {earliest}"
                )
            }
            ResumeError::CursorAhead { after, next } => match next.prev() {
                Some(last) => write!(f, "after {after} is beyond the last assigned seq {last}"),
                None => write!(f, "after {after} given but the task has no events yet"),
            },
        }
    }
}

impl core::error::Error for ResumeError {}

/// Decides how a `tasks/stream` request starts.
///
/// - `after` omitted: from the earliest retained event (RS-05); if nothing is retained, live
///   events only while the task runs (RS-05), or the empty result at once if it is terminal
///   (RS-06).
/// - `after = a`: if `a` is beyond the last assigned seq, [`ResumeError::CursorAhead`]; if
///   `a + 1` is older than the earliest retained seq, [`ResumeError::EventsGone`] (RS-03b,
///   RS-07); otherwise replay from `a + 1` (RS-03a), or, when nothing is after `a`, live events
///   while the task runs and the empty result at once if it is terminal (RS-04).
///   `a = earliest - 1` is therefore valid and gap-free.
///
/// # Errors
/// [`ResumeError`] as above.
pub fn decide(
    after: Option<Seq>,
    retained: Retained,
    lifecycle: Lifecycle,
) -> Result<Resume, ResumeError> {
    let from = match after {
        None => retained.earliest,
        Some(after) => {
            if after >= retained.next {
                return Err(ResumeError::CursorAhead {
                    after,
                    next: retained.next,
                });
            }
            // `after < next <= Seq::MAX`, so `after + 1` is a valid seq.
            let from = after.next().unwrap_or(Seq::MAX);
            if from < retained.earliest {
                return Err(ResumeError::EventsGone {
                    earliest: retained.earliest,
                });
            }
            from
        }
    };
    Ok(if from < retained.next {
        Resume::Replay { from }
    } else {
        match lifecycle {
            Lifecycle::Running => Resume::Live {
                from: retained.next,
            },
            Lifecycle::Terminal => Resume::Complete,
        }
    })
}

#[cfg(test)]
mod tests;
