//! Fixed-capacity event rings: one task's retained events, encoded, in a byte arena.
//!
//! An [`EventRing<EVENTS, BYTES>`] keeps at most `EVENTS` events whose bytes (event type plus
//! compact payload) fit in a `BYTES`-byte arena, and allocates the task's seqs (EV-02, EV-03).
//! Appending to a full ring evicts the oldest events and advances the earliest retained seq; the
//! eviction is reported in [`Appended::evicted`], so the retained range never drifts silently.
//! An event that could never fit, or whose payload exceeds the policy's limit, is refused with a
//! typed error and the ring is unchanged.
//!
//! Entries are stored contiguously; an entry that does not fit before the end of the arena wraps
//! to its start, leaving the tail unused until the entries before it are evicted.

use core::fmt;

use crate::event::{CompactPayload, EventType, Payload};
use crate::resume::Retained;
use crate::retention::RetentionPolicy;
use crate::seq::{Seq, SeqAllocator};
use crate::time::Millis;

/// Where one event lives in the arena.
#[derive(Clone, Copy, Debug)]
struct Slot {
    start: usize,
    /// Type bytes followed by payload bytes.
    len: usize,
    type_len: usize,
    at: Millis,
}

impl Slot {
    const fn end(&self) -> usize {
        self.start + self.len
    }
}

/// A retained event, borrowed from the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    /// Its seq.
    pub seq: Seq,
    /// When it was appended, on the caller's clock.
    pub at: Millis,
    /// Its vendor-prefixed type.
    pub event_type: &'a str,
    /// Its payload: one JSON object, compact.
    pub payload: &'a [u8],
}

/// Events dropped to make room or by age.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// How many events were dropped.
    pub count: u64,
    /// The earliest retained seq afterwards (the next seq if none is retained).
    pub earliest: Seq,
}

/// A successful append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "it reports which events the append evicted from the ring"]
pub struct Appended {
    /// The seq the event got.
    pub seq: Seq,
    /// Older events dropped to make room, if any.
    pub evicted: Option<Evicted>,
}

/// Why an event was refused; the ring is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppendError {
    /// The compact payload is larger than the policy's `max_payload_bytes`.
    PayloadTooLarge {
        /// The compact payload size.
        size: usize,
        /// The limit.
        limit: u32,
    },
    /// Type and payload together exceed what the ring can ever hold (its arena, or the
    /// policy's `max_bytes`).
    TooLargeForRing {
        /// The event's stored size.
        size: usize,
        /// The most the ring can hold.
        capacity: usize,
    },
    /// The task has used every seq.
    SeqExhausted,
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::PayloadTooLarge { size, limit } => {
                write!(
                    f,
                    "payload of {size} bytes exceeds the limit of {limit} bytes"
                )
            }
            AppendError::TooLargeForRing { size, capacity } => {
                write!(
                    f,
                    "event of {size} bytes cannot fit in a ring of {capacity} bytes"
                )
            }
            AppendError::SeqExhausted => f.write_str("sequence numbers exhausted"),
        }
    }
}

impl core::error::Error for AppendError {}

/// One task's retained events in fixed memory: at most `EVENTS` events in `BYTES` bytes.
pub struct EventRing<const EVENTS: usize, const BYTES: usize> {
    arena: [u8; BYTES],
    slots: heapless::Deque<Slot, EVENTS>,
    /// Seq of the front slot; equals the next seq when the ring is empty.
    earliest: Seq,
    seqs: SeqAllocator,
    /// Sum of the slots' lengths.
    used: usize,
}

impl<const EVENTS: usize, const BYTES: usize> Default for EventRing<EVENTS, BYTES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const EVENTS: usize, const BYTES: usize> fmt::Debug for EventRing<EVENTS, BYTES> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRing")
            .field("retained", &self.retained())
            .field("bytes", &self.used)
            .finish_non_exhaustive()
    }
}

impl<const EVENTS: usize, const BYTES: usize> EventRing<EVENTS, BYTES> {
    /// An empty ring for a new task: its first event gets seq 0.
    #[must_use]
    pub const fn new() -> Self {
        Self::resuming_at(Seq::ZERO)
    }

    /// An empty ring whose next event gets seq `next` (after recovery, or as a cache that
    /// starts part way through a task's log).
    #[must_use]
    pub const fn resuming_at(next: Seq) -> Self {
        const { assert!(EVENTS > 0 && BYTES > 0, "a ring needs room for one event") };
        Self {
            arena: [0; BYTES],
            slots: heapless::Deque::new(),
            earliest: next,
            seqs: SeqAllocator::resuming_at(next),
            used: 0,
        }
    }

    /// The retained range: `earliest .. next`.
    #[must_use]
    pub fn retained(&self) -> Retained {
        let next = self.next_seq();
        Retained::new(self.earliest, next).unwrap_or(Retained::EMPTY)
    }

    /// The seq the next event will get ([`Seq::MAX`] once exhausted).
    #[must_use]
    pub fn next_seq(&self) -> Seq {
        self.seqs.peek().unwrap_or(Seq::MAX)
    }

    /// How many events are retained.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no event is retained.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes of the arena in use by retained events.
    #[must_use]
    pub const fn bytes_used(&self) -> usize {
        self.used
    }

    /// Drops every retained event; the next event gets seq `next`. For a cache that must
    /// skip ahead (an event it cannot hold), or after the log was truncated elsewhere.
    pub fn reset(&mut self, next: Seq) {
        self.slots.clear();
        self.used = 0;
        self.earliest = next;
        self.seqs = SeqAllocator::resuming_at(next);
    }

    /// Appends an event at time `at`, evicting the oldest events as needed to respect both the
    /// ring's capacity and `policy` (`max_events`, `max_bytes`), and returns its seq.
    ///
    /// # Errors
    /// [`AppendError`]; the ring is then unchanged.
    pub fn append(
        &mut self,
        at: Millis,
        event_type: EventType<'_>,
        payload: Payload<'_>,
        policy: &RetentionPolicy,
    ) -> Result<Appended, AppendError> {
        self.append_with(at, event_type, payload.compact_len(), policy, |dst| {
            payload.write_compact(dst).is_ok()
        })
    }

    /// [`append`](Self::append) for a payload already in compact form, copied as it is: the
    /// same checks, evictions, seq and stored bytes, without the compaction code `append`
    /// links for a payload with white space.
    ///
    /// # Errors
    /// [`AppendError`]; the ring is then unchanged.
    pub fn append_compact(
        &mut self,
        at: Millis,
        event_type: EventType<'_>,
        payload: CompactPayload<'_>,
        policy: &RetentionPolicy,
    ) -> Result<Appended, AppendError> {
        let text = payload.text();
        self.append_with(at, event_type, text.len(), policy, |dst| {
            if dst.len() != text.len() {
                return false;
            }
            dst.copy_from_slice(text);
            true
        })
    }

    /// The body of both appends: `write` puts the compact payload of `payload_len` bytes
    /// into the slice it is given (exactly that long) and answers whether it did.
    fn append_with(
        &mut self,
        at: Millis,
        event_type: EventType<'_>,
        payload_len: usize,
        policy: &RetentionPolicy,
        write: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<Appended, AppendError> {
        if payload_len > policy.max_payload_bytes as usize {
            return Err(AppendError::PayloadTooLarge {
                size: payload_len,
                limit: policy.max_payload_bytes,
            });
        }
        let type_len = event_type.as_str().len();
        let len = type_len + payload_len;
        let byte_cap = BYTES.min(policy.max_bytes as usize);
        if len > byte_cap {
            return Err(AppendError::TooLargeForRing {
                size: len,
                capacity: byte_cap,
            });
        }
        let Some(seq) = self.seqs.peek() else {
            return Err(AppendError::SeqExhausted);
        };
        // A policy of zero events still lets the newest event in: there is no useful ring
        // that holds nothing, and the seq must be allocated either way.
        let count_cap = EVENTS.min(policy.max_events as usize).max(1);
        let mut evicted = 0u64;
        // Retention from a checkpoint (CP-03): the checkpoint becomes the earliest event.
        if policy.drops_before(event_type.as_str()) {
            while self.evict_front() {
                evicted += 1;
            }
        }
        let start = loop {
            if self.slots.len() < count_cap && self.used + len <= byte_cap {
                if let Some(start) = self.place(len) {
                    break start;
                }
            }
            if self.evict_front() {
                evicted += 1;
            } else {
                // Unreachable: an empty ring places any `len <= BYTES` at 0. Refuse rather
                // than loop or panic.
                return Err(AppendError::TooLargeForRing {
                    size: len,
                    capacity: byte_cap,
                });
            }
        };
        let Some(dst) = self.arena.get_mut(start..start + len) else {
            return Err(AppendError::TooLargeForRing {
                size: len,
                capacity: byte_cap,
            });
        };
        let (type_dst, payload_dst) = dst.split_at_mut(type_len);
        type_dst.copy_from_slice(event_type.as_str().as_bytes());
        if !write(payload_dst) {
            // Unreachable: `payload_dst` is exactly `compact_len` long.
            return Err(AppendError::TooLargeForRing {
                size: len,
                capacity: byte_cap,
            });
        }
        let slot = Slot {
            start,
            len,
            type_len,
            at,
        };
        if self.slots.push_back(slot).is_err() {
            // Unreachable: the loop above made room for one more slot.
            return Err(AppendError::TooLargeForRing {
                size: len,
                capacity: byte_cap,
            });
        }
        self.used += len;
        if self.slots.len() == 1 {
            self.earliest = seq;
        }
        // `peek` was `Some(seq)`, so `allocate` hands out exactly `seq`.
        let _ = self.seqs.allocate();
        Ok(Appended {
            seq,
            evicted: (evicted > 0).then_some(Evicted {
                count: evicted,
                earliest: self.earliest,
            }),
        })
    }

    /// Drops events older than the policy's `max_event_age` at `now`.
    #[must_use = "the report says which events left the ring"]
    pub fn expire(&mut self, now: Millis, policy: &RetentionPolicy) -> Option<Evicted> {
        let mut count = 0u64;
        while self
            .slots
            .front()
            .is_some_and(|s| policy.is_expired(s.at, now))
        {
            self.evict_front();
            count += 1;
        }
        (count > 0).then_some(Evicted {
            count,
            earliest: self.earliest,
        })
    }

    /// Drops every retained event before `seq` (when the log behind a cache was trimmed).
    #[must_use = "the report says which events left the ring"]
    pub fn evict_before(&mut self, seq: Seq) -> Option<Evicted> {
        let mut count = 0u64;
        while !self.slots.is_empty() && self.earliest < seq {
            self.evict_front();
            count += 1;
        }
        (count > 0).then_some(Evicted {
            count,
            earliest: self.earliest,
        })
    }

    /// The retained event `seq`, if any.
    #[must_use]
    pub fn get(&self, seq: Seq) -> Option<EventRef<'_>> {
        if !self.retained().contains(seq) {
            return None;
        }
        let index = usize::try_from(seq.distance_from(self.earliest)).ok()?;
        let slot = self.slots.get(index)?;
        self.event_at(seq, slot)
    }

    /// [`EventRing::get`] for a caller that knows every type it appends: the event's type is
    /// the one of `types` it was stored as, compared byte for byte, instead of being read back
    /// as text (no UTF-8 check, which is code a firmware need not carry). `None` as for `get`,
    /// or if the event's type is not among `types`.
    #[must_use]
    pub fn get_typed<'s>(&'s self, seq: Seq, types: &[EventType<'s>]) -> Option<EventRef<'s>> {
        if !self.retained().contains(seq) {
            return None;
        }
        let index = usize::try_from(seq.distance_from(self.earliest)).ok()?;
        let slot = self.slots.get(index)?;
        let (ty, payload) = self.parts(slot)?;
        let event_type = types.iter().find(|t| t.as_str().as_bytes() == ty)?;
        Some(EventRef {
            seq,
            at: slot.at,
            event_type: event_type.as_str(),
            payload,
        })
    }

    /// The retained events from `from` on, in seq order.
    pub fn iter_from(&self, from: Seq) -> impl Iterator<Item = EventRef<'_>> + '_ {
        let skip = usize::try_from(from.distance_from(self.earliest)).unwrap_or(usize::MAX);
        self.slots
            .iter()
            .enumerate()
            .skip(skip)
            .filter_map(move |(i, slot)| {
                let seq = Seq::new(self.earliest.get() + i as u64)?;
                self.event_at(seq, slot)
            })
    }

    fn event_at(&self, seq: Seq, slot: &Slot) -> Option<EventRef<'_>> {
        let (ty, payload) = self.parts(slot)?;
        Some(EventRef {
            seq,
            at: slot.at,
            event_type: core::str::from_utf8(ty).ok()?,
            payload,
        })
    }

    /// The stored type and payload of an entry.
    fn parts(&self, slot: &Slot) -> Option<(&[u8], &[u8])> {
        let bytes = self.arena.get(slot.start..slot.end())?;
        bytes.split_at_checked(slot.type_len)
    }

    /// Where `len` contiguous bytes fit after the newest entry without touching the oldest.
    fn place(&self, len: usize) -> Option<usize> {
        let (Some(front), Some(back)) = (self.slots.front(), self.slots.back()) else {
            return Some(0);
        };
        let (head, tail) = (front.start, back.end());
        if back.start >= front.start {
            // Occupied: [head, tail). Free: [tail, BYTES) and [0, head).
            if tail + len <= BYTES {
                Some(tail)
            } else if len <= head {
                Some(0)
            } else {
                None
            }
        } else if tail + len <= head {
            // Wrapped; occupied: [head, ..) and [0, tail). Free: [tail, head).
            Some(tail)
        } else {
            None
        }
    }

    fn evict_front(&mut self) -> bool {
        let Some(slot) = self.slots.pop_front() else {
            return false;
        };
        self.used -= slot.len;
        self.earliest = self.earliest.next().unwrap_or(Seq::MAX);
        true
    }
}

#[cfg(test)]
mod tests;
