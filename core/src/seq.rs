//! Sequence numbers (SEP-2694, "Task Event"): per task, the first event is seq 0 and each later
//! event is exactly one higher (EV-02, EV-03). On the wire a seq is a JSON number, so it must
//! stay an exact IEEE-754 integer: [`Seq`] is range-checked to `0 ..= 2^53 - 1` on construction,
//! and [`SeqAllocator`] refuses to go beyond it instead of wrapping.

use core::fmt;

/// A task event sequence number, always within `0 ..= 2^53 - 1`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(into = "u64", try_from = "u64")]
pub struct Seq(u64);

impl Seq {
    /// The first seq of every task (EV-02).
    pub const ZERO: Seq = Seq(0);
    /// The largest seq that survives a round trip through a JSON number: 2^53 - 1.
    pub const MAX: Seq = Seq((1 << 53) - 1);

    /// `Some(Seq)` if `value` is a valid wire sequence number.
    #[must_use]
    pub const fn new(value: u64) -> Option<Seq> {
        if value <= Self::MAX.0 {
            Some(Seq(value))
        } else {
            None
        }
    }

    /// The number.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The following seq, or `None` past [`Seq::MAX`].
    #[must_use]
    pub const fn next(self) -> Option<Seq> {
        Seq::new(self.0 + 1)
    }

    /// The preceding seq, or `None` for seq 0.
    #[must_use]
    pub const fn prev(self) -> Option<Seq> {
        match self.0.checked_sub(1) {
            Some(v) => Some(Seq(v)),
            None => None,
        }
    }

    /// The number of seqs from `earlier` up to `self` (zero if `earlier` is not earlier).
    #[must_use]
    pub const fn distance_from(self, earlier: Seq) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Seq> for u64 {
    fn from(seq: Seq) -> u64 {
        seq.0
    }
}

/// A number beyond [`Seq::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqOutOfRange;

impl fmt::Display for SeqOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sequence number beyond 2^53 - 1")
    }
}

impl core::error::Error for SeqOutOfRange {}

impl TryFrom<u64> for Seq {
    type Error = SeqOutOfRange;

    fn try_from(value: u64) -> Result<Seq, SeqOutOfRange> {
        Seq::new(value).ok_or(SeqOutOfRange)
    }
}

/// Every seq of a task has been used: the task cannot take another event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqExhausted;

impl fmt::Display for SeqExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sequence numbers exhausted (2^53 events)")
    }
}

impl core::error::Error for SeqExhausted {}

/// Hands out the sequence numbers of one task: 0, 1, 2, … with no gap and no reuse.
///
/// `next` is one past the last seq handed out, so "the next seq to be issued" is always
/// representable; after [`Seq::MAX`] has been handed out the allocator is exhausted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqAllocator {
    /// The next seq to hand out, or `None` once [`Seq::MAX`] has been used.
    next: Option<Seq>,
}

impl Default for SeqAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqAllocator {
    /// An allocator for a new task: its first seq is 0.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            next: Some(Seq::ZERO),
        }
    }

    /// An allocator that continues after recovery: the next seq it hands out is `next`.
    #[must_use]
    pub const fn resuming_at(next: Seq) -> Self {
        Self { next: Some(next) }
    }

    /// How many seqs have been handed out; equally, the seq the next event would get.
    #[must_use]
    pub const fn issued(&self) -> u64 {
        match self.next {
            Some(s) => s.get(),
            None => Seq::MAX.get() + 1,
        }
    }

    /// The seq the next call to [`allocate`](Self::allocate) returns, if any.
    #[must_use]
    pub const fn peek(&self) -> Option<Seq> {
        self.next
    }

    /// The last seq handed out, if any.
    #[must_use]
    pub const fn last(&self) -> Option<Seq> {
        match self.next {
            Some(s) => s.prev(),
            None => Some(Seq::MAX),
        }
    }

    /// Hands out the next seq.
    ///
    /// # Errors
    /// [`SeqExhausted`] once [`Seq::MAX`] has been handed out.
    pub fn allocate(&mut self) -> Result<Seq, SeqExhausted> {
        let seq = self.next.ok_or(SeqExhausted)?;
        self.next = seq.next();
        Ok(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_range_is_the_exact_json_integers() {
        assert_eq!(Seq::new(0), Some(Seq::ZERO));
        assert_eq!(Seq::new((1 << 53) - 1), Some(Seq::MAX));
        assert_eq!(Seq::new(1 << 53), None);
        assert_eq!(Seq::new(u64::MAX), None);
        assert_eq!(Seq::MAX.next(), None);
        assert_eq!(Seq::ZERO.prev(), None);
        // 2^53 - 1 is exactly representable as f64, 2^53 + 1 is not.
        assert_eq!(Seq::MAX.get() as f64 as u64, Seq::MAX.get());
    }

    #[test]
    fn allocator_starts_at_zero_and_steps_by_one() {
        // EV-02, EV-03
        let mut a = SeqAllocator::new();
        assert_eq!(a.last(), None);
        for i in 0..100u64 {
            assert_eq!(a.allocate().map(Seq::get), Ok(i));
        }
        assert_eq!(a.issued(), 100);
        assert_eq!(a.last(), Seq::new(99));
    }

    #[test]
    fn allocator_stops_at_the_wire_limit_instead_of_wrapping() {
        let mut a = SeqAllocator::resuming_at(Seq::MAX);
        assert_eq!(a.allocate(), Ok(Seq::MAX));
        assert_eq!(a.allocate(), Err(SeqExhausted));
        assert_eq!(a.allocate(), Err(SeqExhausted));
        assert_eq!(a.last(), Some(Seq::MAX));
        assert_eq!(a.peek(), None);
    }
}
