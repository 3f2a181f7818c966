//! The brake on guessing (SEP-2694 "Security Implications": limit resume attempts, SE-07):
//! [`FailedLookups`] counts the Tasks requests of a connection that missed (an unknown task,
//! another principal's task, a bad `after`, a cursor beyond the last seq, a `tasks/list` cursor
//! never handed out; see `ServerError::is_failed_lookup`) and, once a connection has missed
//! more than `--max-failed-lookups-per-minute` times within a minute, answers every further
//! miss `too_many_failures` (instead of the miss's own error) until its allowance has refilled.
//! It never refuses a request that finds one of the principal's own tasks: a client may always
//! get, stream, list, await and cancel its own tasks, however many misses came before, so it
//! never concludes that a live task is gone.
//!
//! The allowance is a token bucket written as GCRA ("theoretical arrival time"): each miss
//! costs `60 s / limit`, a burst of up to `limit` misses is free, and afterwards misses are
//! admitted at `limit` per minute. So, over any span of `t` seconds, a connection gets at most
//! `limit * (1 + t / 60)` misses: with the default of 100, about 144 000 guesses a day against
//! 2^128 task ids. A refusal says only that the request missed, not how (unknown task, bad
//! cursor), and refusals cost no allowance. A lookup that succeeds finds a task of the
//! connection's own principal (another principal's task is an unknown task), so serving it
//! while misses are refused reveals nothing the principal may not see. Successful lookups
//! never count: an honest client that follows its own tasks never meets the limit.
//!
//! Deliberately not here: `events_gone` is not a miss (an honest client that fell behind
//! retention gets it); and the limit is per connection (on stdio: per process), not global, as
//! a global one would let one client lock out another.

use std::time::{Duration, Instant};

/// The failed-lookup allowance of one connection.
#[derive(Debug)]
pub(crate) struct FailedLookups {
    /// The cost of one miss: a minute divided by the limit.
    cost: Duration,
    /// The burst: a minute.
    burst: Duration,
    /// When the allowance is full again (the GCRA theoretical arrival time); `None`: full.
    full_at: Option<Instant>,
    /// Whether the current refusal has been logged (one warning per episode).
    warned: bool,
}

impl FailedLookups {
    /// An allowance of `per_minute` misses a minute (at least 1).
    pub(crate) fn new(per_minute: u32) -> FailedLookups {
        let burst = Duration::from_secs(60);
        FailedLookups {
            cost: burst / per_minute.max(1),
            burst,
            full_at: None,
            warned: false,
        }
    }

    /// Whether a lookup may go ahead at `now`.
    ///
    /// # Errors
    /// How long until one may, when the allowance is spent.
    pub(crate) fn admit(&self, now: Instant) -> Result<(), Duration> {
        let Some(full_at) = self.full_at else {
            return Ok(());
        };
        // Room for one more miss: full_at + cost <= now + burst.
        let limit = now + self.burst;
        let after_one = full_at + self.cost;
        match after_one.checked_duration_since(limit) {
            Some(wait) if !wait.is_zero() => Err(wait),
            _ => Ok(()),
        }
    }

    /// Records a miss at `now`. Returns `true` when this miss spent the allowance and the
    /// episode was not reported yet (the caller logs a warning once).
    pub(crate) fn record(&mut self, now: Instant) -> bool {
        let base = self.full_at.map_or(now, |f| f.max(now));
        self.full_at = Some(base + self.cost);
        if self.admit(now).is_ok() {
            self.warned = false;
            return false;
        }
        !std::mem::replace(&mut self.warned, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_the_limit_then_refusal_then_refill() {
        let t0 = Instant::now();
        let mut g = FailedLookups::new(6); // one miss costs 10 s
        for i in 0..6 {
            assert_eq!(g.admit(t0), Ok(()), "miss {i}");
            assert_eq!(g.record(t0), i == 5, "miss {i}");
        }
        // Six misses at once spent the minute: the seventh lookup waits 10 s.
        assert_eq!(g.admit(t0), Err(Duration::from_secs(10)));
        assert_eq!(
            g.admit(t0 + Duration::from_secs(4)),
            Err(Duration::from_secs(6))
        );
        assert_eq!(g.admit(t0 + Duration::from_secs(10)), Ok(()));
        // One more miss spends it again, and is reported again only after a recovery.
        assert!(!g.record(t0 + Duration::from_secs(10)));
        assert_eq!(
            g.admit(t0 + Duration::from_secs(10)),
            Err(Duration::from_secs(10))
        );
        // A minute of quiet restores the full burst.
        let later = t0 + Duration::from_secs(80);
        for i in 0..6 {
            assert_eq!(g.admit(later), Ok(()), "miss {i} after the pause");
            g.record(later);
        }
        assert!(g.admit(later).is_err());
    }

    #[test]
    fn misses_spread_below_the_rate_are_never_refused() {
        let t0 = Instant::now();
        let mut g = FailedLookups::new(100);
        for i in 0..10_000u32 {
            let now = t0 + Duration::from_millis(u64::from(i) * 600);
            assert_eq!(g.admit(now), Ok(()), "miss {i}");
            assert!(!g.record(now));
        }
    }

    #[test]
    fn the_rate_bounds_misses_over_any_span() {
        // Hammering every 10 ms for 5 minutes gets at most limit * (1 + 5) misses through.
        let t0 = Instant::now();
        let mut g = FailedLookups::new(100);
        let mut admitted = 0;
        for i in 0..30_000u64 {
            let now = t0 + Duration::from_millis(i * 10);
            if g.admit(now).is_ok() {
                admitted += 1;
                g.record(now);
            }
        }
        assert!((500..=600).contains(&admitted), "{admitted}");
    }
}
