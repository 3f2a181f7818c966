use super::*;
use std::string::String;
use std::vec::Vec;

const TICK: &str = "dev.taskstream.tick";

fn ty() -> EventType<'static> {
    EventType::new(TICK).unwrap()
}

fn payload(text: &str) -> Payload<'_> {
    Payload::new(text.as_bytes()).unwrap()
}

fn policy() -> RetentionPolicy {
    RetentionPolicy {
        max_events: u32::MAX,
        max_bytes: u32::MAX,
        max_payload_bytes: u32::MAX,
        ..RetentionPolicy::DEFAULT
    }
}

fn contents<const E: usize, const B: usize>(r: &EventRing<E, B>) -> Vec<(u64, String)> {
    r.iter_from(r.retained().earliest())
        .map(|e| {
            (
                e.seq.get(),
                String::from(core::str::from_utf8(e.payload).unwrap()),
            )
        })
        .collect()
}

#[test]
fn seqs_start_at_zero_and_step_by_one() {
    // EV-02, EV-03
    let mut r: EventRing<4, 256> = EventRing::new();
    for i in 0..10u64 {
        let p = std::format!("{{\"i\":{i}}}");
        let a = r.append(Millis(i), ty(), payload(&p), &policy()).unwrap();
        assert_eq!(a.seq.get(), i);
    }
    assert_eq!(
        r.retained(),
        Retained::new(Seq::new(6).unwrap(), Seq::new(10).unwrap()).unwrap()
    );
    let got = r.get(Seq::new(7).unwrap()).unwrap();
    assert_eq!((got.event_type, got.payload), (TICK, &b"{\"i\":7}"[..]));
    assert_eq!(got.at, Millis(7));
    assert_eq!(r.get(Seq::new(5).unwrap()), None);
    assert_eq!(r.get(Seq::new(10).unwrap()), None);
}

#[test]
fn a_full_ring_reports_what_it_evicted() {
    let mut r: EventRing<2, 256> = EventRing::new();
    let p = policy();
    assert_eq!(
        r.append(Millis(0), ty(), payload("{}"), &p)
            .unwrap()
            .evicted,
        None
    );
    assert_eq!(
        r.append(Millis(0), ty(), payload("{}"), &p)
            .unwrap()
            .evicted,
        None
    );
    let a = r.append(Millis(0), ty(), payload("{}"), &p).unwrap();
    assert_eq!(
        a.evicted,
        Some(Evicted {
            count: 1,
            earliest: Seq::new(1).unwrap()
        })
    );
    assert_eq!(r.retained().earliest().get(), 1);
}

#[test]
fn the_byte_arena_evicts_and_wraps() {
    // 19 bytes of type + 10 of payload = 29 bytes per event; 100 bytes hold 3.
    let mut r: EventRing<16, 100> = EventRing::new();
    let p = policy();
    for i in 0..50u64 {
        let text = std::format!("{{\"s\":\"{:02}\"}}", i % 100);
        assert_eq!(text.len(), 10);
        let _filled = r.append(Millis(0), ty(), payload(&text), &p).unwrap();
        let c = contents(&r);
        assert!(c.len() <= 3 && !c.is_empty());
        // What is retained is always the newest events, gap-free, in order.
        for (k, (seq, text)) in c.iter().enumerate() {
            assert_eq!(*seq, i + 1 + k as u64 - c.len() as u64);
            assert_eq!(*text, std::format!("{{\"s\":\"{:02}\"}}", seq % 100));
        }
        assert!(r.bytes_used() <= 100);
    }
}

#[test]
fn oversized_events_are_refused_and_the_ring_is_unchanged() {
    let mut r: EventRing<4, 64> = EventRing::new();
    let p = RetentionPolicy {
        max_payload_bytes: 16,
        ..policy()
    };
    let _filled = r.append(Millis(0), ty(), payload("{\"a\":1}"), &p).unwrap();
    let big = std::format!("{{\"a\":\"{}\"}}", "x".repeat(20));
    assert_eq!(
        r.append(Millis(0), ty(), payload(&big), &p),
        Err(AppendError::PayloadTooLarge {
            size: big.len(),
            limit: 16
        })
    );
    let p = policy();
    let huge = std::format!("{{\"a\":\"{}\"}}", "x".repeat(60));
    assert_eq!(
        r.append(Millis(0), ty(), payload(&huge), &p),
        Err(AppendError::TooLargeForRing {
            size: TICK.len() + huge.len(),
            capacity: 64
        })
    );
    assert_eq!(contents(&r), [(0, String::from("{\"a\":1}"))]);
    assert_eq!(r.next_seq().get(), 1);
}

#[test]
fn payloads_are_stored_compact() {
    let mut r: EventRing<4, 256> = EventRing::new();
    let _filled = r
        .append(Millis(0), ty(), payload("{ \"a\" :\n [1, 2] }"), &policy())
        .unwrap();
    assert_eq!(r.get(Seq::ZERO).unwrap().payload, b"{\"a\":[1,2]}");
}

#[test]
fn get_typed_reads_the_type_as_one_of_the_callers() {
    let tock = EventType::new("dev.taskstream.tock").unwrap();
    let tick_tock = EventType::new("dev.taskstream.tick.tock").unwrap();
    let mut r: EventRing<4, 256> = EventRing::new();
    for (i, t) in [ty(), tock, ty(), tick_tock].into_iter().enumerate() {
        let p = std::format!("{{\"i\":{i}}}");
        let _filled = r.append(Millis(0), t, payload(&p), &policy()).unwrap();
    }
    let known = [tock, ty(), tick_tock];
    for seq in 0..4 {
        let seq = Seq::new(seq).unwrap();
        assert_eq!(r.get_typed(seq, &known), r.get(seq), "{seq:?}");
    }
    // A type the caller does not name is not guessed (a prefix of one is another type).
    assert_eq!(r.get_typed(Seq::new(3).unwrap(), &[ty(), tock]), None);
    assert_eq!(r.get_typed(Seq::new(1).unwrap(), &[]), None);
    // Nor is an event that is not retained.
    assert_eq!(r.get_typed(Seq::new(4).unwrap(), &known), None);
}

#[test]
fn policy_limits_apply_below_the_capacity() {
    let mut r: EventRing<8, 256> = EventRing::new();
    let p = RetentionPolicy {
        max_events: 3,
        ..policy()
    };
    for _ in 0..5 {
        let _filled = r.append(Millis(0), ty(), payload("{}"), &p).unwrap();
    }
    assert_eq!(r.len(), 3);
    assert_eq!(r.retained().earliest().get(), 2);
    let p = RetentionPolicy {
        max_events: u32::MAX,
        max_bytes: 2 * (TICK.len() as u32 + 2),
        ..policy()
    };
    let _filled = r.append(Millis(0), ty(), payload("{}"), &p).unwrap();
    assert_eq!(r.len(), 2);
}

#[test]
fn expiry_uses_the_callers_clock() {
    let mut r: EventRing<8, 256> = EventRing::new();
    let p = RetentionPolicy {
        max_event_age: Millis(10),
        ..policy()
    };
    for t in [0u64, 5, 20] {
        let _filled = r.append(Millis(t), ty(), payload("{}"), &p).unwrap();
    }
    assert_eq!(
        r.expire(Millis(16), &p),
        Some(Evicted {
            count: 2,
            earliest: Seq::new(2).unwrap()
        })
    );
    assert_eq!(r.expire(Millis(16), &p), None);
    assert_eq!(
        r.expire(Millis(31), &p),
        Some(Evicted {
            count: 1,
            earliest: Seq::new(3).unwrap()
        })
    );
    assert!(r.retained().is_empty());
    // Seqs continue after everything expired.
    assert_eq!(
        r.append(Millis(40), ty(), payload("{}"), &p)
            .unwrap()
            .seq
            .get(),
        3
    );
}

#[test]
fn a_ring_resumes_at_a_recovered_seq() {
    let mut r: EventRing<4, 128> = EventRing::resuming_at(Seq::new(41).unwrap());
    assert_eq!(r.retained().earliest().get(), 41);
    assert_eq!(
        r.append(Millis(0), ty(), payload("{}"), &policy())
            .unwrap()
            .seq
            .get(),
        41
    );
    r.reset(Seq::new(100).unwrap());
    assert!(r.is_empty());
    assert_eq!(
        r.append(Millis(0), ty(), payload("{}"), &policy())
            .unwrap()
            .seq
            .get(),
        100
    );
    assert_eq!(
        r.evict_before(Seq::new(101).unwrap())
            .map(|e| e.earliest.get()),
        Some(101)
    );
}

#[test]
fn a_checkpoint_under_retain_from_checkpoint_becomes_the_earliest_event() {
    // CP-03: the ring answers as if every event before the checkpoint were dropped.
    let cp = EventType::new(crate::retention::CHECKPOINT_EVENT_TYPE).unwrap();
    let on = RetentionPolicy {
        retain_from_checkpoint: true,
        ..policy()
    };
    let mut r: EventRing<16, 1024> = EventRing::new();
    for i in 0..5u64 {
        let p = std::format!("{{\"i\":{i}}}");
        let _ = r.append(Millis(i), ty(), payload(&p), &on).unwrap();
    }
    let a = r
        .append(
            Millis(5),
            cp,
            payload("{\"coversThrough\":4,\"state\":{}}"),
            &on,
        )
        .unwrap();
    assert_eq!(a.seq.get(), 5);
    assert_eq!(
        a.evicted,
        Some(Evicted {
            count: 5,
            earliest: Seq::new(5).unwrap()
        })
    );
    let _ = r
        .append(Millis(6), ty(), payload("{\"i\":6}"), &on)
        .unwrap();
    assert_eq!(
        r.retained(),
        Retained::new(Seq::new(5).unwrap(), Seq::new(7).unwrap()).unwrap()
    );
    // Without the option a checkpoint is an ordinary event.
    let mut plain: EventRing<16, 1024> = EventRing::new();
    let _ = plain
        .append(Millis(0), ty(), payload("{}"), &policy())
        .unwrap();
    let a = plain
        .append(
            Millis(1),
            cp,
            payload("{\"coversThrough\":0,\"state\":{}}"),
            &policy(),
        )
        .unwrap();
    assert_eq!(a.evicted, None);
    assert_eq!(plain.retained().earliest().get(), 0);
}

/// `append_compact` is `append` for a compact payload: the same results, evictions and stored
/// events, refusals included, over payloads of varied sizes that wrap the arena; and only a
/// compact text makes a `CompactPayload`.
#[test]
fn append_compact_is_append_for_a_compact_payload() {
    let mut a: EventRing<5, 96> = EventRing::new();
    let mut b: EventRing<5, 96> = EventRing::new();
    let p = RetentionPolicy {
        max_payload_bytes: 60,
        ..policy()
    };
    for i in 0..40usize {
        let text = std::format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(i * 7 % 53));
        let full = payload(&text);
        let compact = full.compact().expect("written compact");
        assert_eq!(compact.text(), text.as_bytes());
        let at = Millis(i as u64);
        assert_eq!(
            a.append(at, ty(), full, &p),
            b.append_compact(at, ty(), compact, &p),
            "append {i}"
        );
        assert_eq!(a.retained(), b.retained());
        assert_eq!(contents(&a), contents(&b));
    }
    assert_eq!(payload("{ \"a\": 1 }").compact(), None);
    assert_eq!(
        payload("{\"a\":\" x \"}").compact().map(|c| c.text()),
        Some(&b"{\"a\":\" x \"}"[..])
    );
}
