//! A running task's read cache, grown on demand: the core's [`EventRing`] in a small size
//! first ([`SMALL_EVENTS`] events in [`SMALL_BYTES`] bytes, about 3 KiB), moved into the full
//! size ([`CACHE_EVENTS`] in [`CACHE_BYTES`], about 20 KiB) by the first append the small one
//! could not take without dropping an event. Most live tasks are quiet and log few events; ten
//! thousand of them then cost ten thousand small rings, not ten thousand full ones (measured in
//! benches/REPORT.md, "run D").
//!
//! The contents and every answer are those of one ring of the full size: the move keeps every
//! event, in order, with its seq and time, so the cache stays a suffix of the task's log.

use taskstream_core::ring::{AppendError, Appended, EventRef};
use taskstream_core::{EventRing, EventType, Millis, Payload, Retained, RetentionPolicy, Seq};

/// Events a running task's read cache holds at most.
pub(crate) const CACHE_EVENTS: usize = 128;
/// Bytes (event types plus payloads) a running task's read cache holds at most.
pub(crate) const CACHE_BYTES: usize = 16 << 10;

/// Events the small ring holds.
pub(crate) const SMALL_EVENTS: usize = 32;
/// Bytes (types plus payloads) the small ring holds.
pub(crate) const SMALL_BYTES: usize = 2 << 10;

type Small = EventRing<SMALL_EVENTS, SMALL_BYTES>;
type Full = EventRing<CACHE_EVENTS, CACHE_BYTES>;

/// Empty rings, copied straight into their heap allocation: built at run time, a ring would be
/// a stack temporary first, and a frame that holds one (20 KiB for the full size) is touched
/// page by page (stack probes) by every call of the function it is inlined into, whether the
/// ring is built or not; on a thread per task that is 20 KiB of resident stack per task.
const EMPTY_SMALL: Small = Small::resuming_at(Seq::ZERO);
const EMPTY_FULL: Full = Full::resuming_at(Seq::ZERO);

/// The cache: small until it needs to grow, then full-size for the rest of the task.
pub(crate) enum TaskCache {
    Small(Box<Small>),
    Full(Box<Full>),
}

impl TaskCache {
    /// An empty cache whose next event gets seq `next`.
    pub(crate) fn resuming_at(next: Seq) -> TaskCache {
        let mut small = Box::new(EMPTY_SMALL);
        small.reset(next);
        TaskCache::Small(small)
    }

    /// The cached range.
    pub(crate) fn retained(&self) -> Retained {
        match self {
            TaskCache::Small(r) => r.retained(),
            TaskCache::Full(r) => r.retained(),
        }
    }

    /// The seq the next event must have.
    pub(crate) fn next_seq(&self) -> Seq {
        match self {
            TaskCache::Small(r) => r.next_seq(),
            TaskCache::Full(r) => r.next_seq(),
        }
    }

    /// Drops every cached event; the next gets seq `next`.
    pub(crate) fn reset(&mut self, next: Seq) {
        match self {
            TaskCache::Small(r) => r.reset(next),
            TaskCache::Full(r) => r.reset(next),
        }
    }

    /// Drops the events before `seq`. A read cache: the store has already truncated the index and
    /// freed the budget for them, so the ring's report of what it dropped has no one to tell.
    pub(crate) fn evict_before(&mut self, seq: Seq) {
        match self {
            TaskCache::Small(r) => {
                let _dropped = r.evict_before(seq);
            }
            TaskCache::Full(r) => {
                let _dropped = r.evict_before(seq);
            }
        }
    }

    /// The cached events from `from` on, in seq order.
    pub(crate) fn iter_from(&self, from: Seq) -> impl Iterator<Item = EventRef<'_>> + '_ {
        let (small, full) = match self {
            TaskCache::Small(r) => (Some(r.iter_from(from)), None),
            TaskCache::Full(r) => (None, Some(r.iter_from(from))),
        };
        small
            .into_iter()
            .flatten()
            .chain(full.into_iter().flatten())
    }

    /// Appends as [`EventRing::append`] does on a full-size ring: a small ring that would
    /// have to drop an event to take this one grows first.
    ///
    /// # Errors
    /// [`EventRing::append`]'s.
    pub(crate) fn append(
        &mut self,
        at: Millis,
        event_type: EventType<'_>,
        payload: Payload<'_>,
        policy: &RetentionPolicy,
    ) -> Result<Appended, AppendError> {
        if let TaskCache::Small(small) = self {
            let len = event_type.as_str().len() + payload.compact_len();
            let fits = small.len() < SMALL_EVENTS && small.bytes_used() + len <= SMALL_BYTES;
            if fits {
                // Were the arena's free space not contiguous, the small ring drops its oldest:
                // still correct (the cache stays a suffix of the log).
                return small.append(at, event_type, payload, policy);
            }
            *self = TaskCache::Full(grown(small));
        }
        match self {
            TaskCache::Full(full) => full.append(at, event_type, payload, policy),
            // Replaced just above.
            TaskCache::Small(small) => small.append(at, event_type, payload, policy),
        }
    }
}

/// A full-size ring with the small one's events (every one of them fits: the full ring is
/// larger in both events and bytes). Not inlined, so that its frame is not its callers'.
#[inline(never)]
fn grown(small: &Small) -> Box<Full> {
    let keep_all = RetentionPolicy {
        max_events: u32::MAX,
        max_bytes: u32::MAX,
        max_payload_bytes: u32::MAX,
        ..RetentionPolicy::DEFAULT
    };
    let mut full = Box::new(EMPTY_FULL);
    full.reset(small.retained().earliest());
    for e in small.iter_from(small.retained().earliest()) {
        // Both were validated when they entered the small ring.
        let copied = match (EventType::new(e.event_type), Payload::new(e.payload)) {
            (Ok(t), Ok(p)) => full
                .append(e.at, t, p, &keep_all)
                .is_ok_and(|a| a.seq == e.seq),
            _ => false,
        };
        if !copied {
            // Never expected; a cache may always start over empty (reads go to the index).
            full.reset(small.next_seq());
            break;
        }
    }
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetentionPolicy {
        RetentionPolicy {
            max_events: u32::MAX,
            max_bytes: u32::MAX,
            max_payload_bytes: u32::MAX,
            ..RetentionPolicy::DEFAULT
        }
    }

    fn seqs(c: &TaskCache) -> Vec<u64> {
        c.iter_from(c.retained().earliest())
            .map(|e| e.seq.get())
            .collect()
    }

    #[test]
    fn grows_without_losing_or_reordering_an_event_and_answers_like_one_full_ring() {
        let ty = EventType::new("dev.taskstream.tick").expect("valid");
        let start = Seq::new(7).expect("valid");
        let mut cache = TaskCache::resuming_at(start);
        let mut reference = Box::new(Full::resuming_at(start));
        for i in 0..300u64 {
            let text = format!(
                "{{\"i\":{i},\"pad\":\"{}\"}}",
                "x".repeat((i % 40) as usize)
            );
            let payload = Payload::new(text.as_bytes()).expect("valid");
            let at = Millis(i);
            let a = cache.append(at, ty, payload, &policy()).expect("appended");
            let b = reference
                .append(at, ty, payload, &policy())
                .expect("appended");
            assert_eq!(a.seq, b.seq);
            if i < 20 {
                assert!(matches!(cache, TaskCache::Small(_)), "small while it fits");
            }
            assert_eq!(cache.retained(), reference.retained(), "after {i}");
            let got: Vec<(u64, u64, String, Vec<u8>)> = cache
                .iter_from(cache.retained().earliest())
                .map(|e| {
                    (
                        e.seq.get(),
                        e.at.0,
                        e.event_type.to_owned(),
                        e.payload.to_vec(),
                    )
                })
                .collect();
            let want: Vec<(u64, u64, String, Vec<u8>)> = reference
                .iter_from(reference.retained().earliest())
                .map(|e| {
                    (
                        e.seq.get(),
                        e.at.0,
                        e.event_type.to_owned(),
                        e.payload.to_vec(),
                    )
                })
                .collect();
            assert_eq!(got, want, "after {i}");
        }
        assert!(matches!(cache, TaskCache::Full(_)));
        assert_eq!(cache.next_seq().get(), 307);
    }

    #[test]
    fn reset_and_evict_keep_working_in_both_sizes() {
        let ty = EventType::new("dev.taskstream.tick").expect("valid");
        let payload = Payload::new(b"{}").expect("valid");
        let mut cache = TaskCache::resuming_at(Seq::ZERO);
        for i in 0..5 {
            let _filled = cache.append(Millis(i), ty, payload, &policy()).expect("ok");
        }
        cache.evict_before(Seq::new(3).expect("valid"));
        assert_eq!(seqs(&cache), vec![3, 4]);
        cache.reset(Seq::new(10).expect("valid"));
        assert!(seqs(&cache).is_empty());
        for i in 0..100 {
            let _filled = cache.append(Millis(i), ty, payload, &policy()).expect("ok");
        }
        assert!(matches!(cache, TaskCache::Full(_)));
        assert_eq!(seqs(&cache), (10..110).collect::<Vec<u64>>());
        cache.evict_before(Seq::new(100).expect("valid"));
        assert_eq!(seqs(&cache), (100..110).collect::<Vec<u64>>());
    }
}
