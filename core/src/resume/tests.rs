use super::*;

fn seq(n: u64) -> Seq {
    Seq::new(n).unwrap()
}

fn r(earliest: u64, next: u64) -> Retained {
    Retained::new(seq(earliest), seq(next)).unwrap()
}

use Lifecycle::{Running, Terminal};

#[track_caller]
fn check(
    id: &str,
    after: Option<u64>,
    retained: Retained,
    lifecycle: Lifecycle,
    expected: Result<Resume, ResumeError>,
) {
    assert_eq!(
        decide(after.map(seq), retained, lifecycle),
        expected,
        "{id}"
    );
}

#[test]
fn the_rules_of_the_sep_one_row_each() {
    let gone = |e| Err(ResumeError::EventsGone { earliest: seq(e) });
    let ahead = |a, n| {
        Err(ResumeError::CursorAhead {
            after: seq(a),
            next: seq(n),
        })
    };
    let replay = |f| Ok(Resume::Replay { from: seq(f) });
    let live = |f| Ok(Resume::Live { from: seq(f) });
    let complete = Ok(Resume::Complete);

    // RS-05: no cursor starts at the earliest retained event.
    check("RS-05", None, r(0, 10), Running, replay(0));
    check("RS-05", None, r(4, 10), Running, replay(4));
    check("RS-05", None, r(4, 10), Terminal, replay(4));
    // RS-05: nothing retained, task exists: live only.
    check("RS-05", None, r(0, 0), Running, live(0));
    check("RS-05", None, r(7, 7), Running, live(7));
    // RS-06: nothing retained, terminal: the empty result at once.
    check("RS-06", None, r(0, 0), Terminal, complete);
    check("RS-06", None, r(7, 7), Terminal, complete);
    // RS-03a: replay strictly after the cursor.
    check("RS-03a", Some(0), r(0, 10), Running, replay(1));
    check("RS-03a", Some(5), r(0, 10), Terminal, replay(6));
    // RS-04: caught up on a terminal task: the result at once, no events.
    check("RS-04", Some(9), r(0, 10), Terminal, complete);
    // Caught up on a running task: live events from the next seq.
    check("RS-03a", Some(9), r(0, 10), Running, live(10));
    // EG-02 / RS-07: after = earliest - 1 is valid and gap-free.
    check("EG-02", Some(3), r(4, 10), Running, replay(4));
    // RS-03b, RS-07, RT-04: older than the retained range: events_gone with earliestSeq.
    check("RS-07", Some(2), r(4, 10), Running, gone(4));
    check("RT-04", Some(0), r(4, 10), Terminal, gone(4));
    // everything dropped: earliestSeq is the next seq.
    check("EG-01", Some(2), r(10, 10), Terminal, gone(10));
    check("RS-04", Some(9), r(10, 10), Terminal, complete);
    // A-01 / RS-02: beyond the last assigned seq is invalid.
    check("RS-02", Some(10), r(0, 10), Running, ahead(10, 10));
    check("RS-02", Some(0), r(0, 0), Running, ahead(0, 0));
    check(
        "RS-02",
        Some(Seq::MAX.get()),
        r(0, 10),
        Terminal,
        ahead(Seq::MAX.get(), 10),
    );
}

#[test]
fn the_cursor_limit_itself_is_handled() {
    let full = Retained::new(seq(5), Seq::MAX).unwrap();
    let last = Seq::MAX.prev().unwrap();
    assert_eq!(
        decide(Some(last), full, Lifecycle::Terminal),
        Ok(Resume::Complete)
    );
    assert_eq!(
        decide(Some(last.prev().unwrap()), full, Lifecycle::Running),
        Ok(Resume::Replay { from: last })
    );
}

/// The rules restated over explicit sets of seqs, compared with [`decide`] on every small case.
#[test]
fn exhaustive_small_scope_against_a_set_model() {
    for next in 0..=6u64 {
        for earliest in 0..=next {
            for terminal in [false, true] {
                let lifecycle = if terminal { Terminal } else { Running };
                let retained: std::vec::Vec<u64> = (earliest..next).collect();
                for after in core::iter::once(None).chain((0..=next + 2).map(Some)) {
                    let got = decide(after.map(seq), r(earliest, next), lifecycle);
                    // Model: the events the client still needs are all seqs > after.
                    let expected = match after {
                        Some(a) if a + 1 > next => "invalid",
                        Some(a) if (a + 1..next).any(|q| !retained.contains(&q)) => "gone",
                        _ => {
                            let first = after.map_or(earliest, |a| a + 1);
                            if retained.iter().any(|&q| q >= first) {
                                "replay"
                            } else if terminal {
                                "complete"
                            } else {
                                "live"
                            }
                        }
                    };
                    let kind = match got {
                        Ok(Resume::Replay { from }) => {
                            assert_eq!(from.get(), after.map_or(earliest, |a| a + 1));
                            "replay"
                        }
                        Ok(Resume::Live { from }) => {
                            assert_eq!(from.get(), next);
                            "live"
                        }
                        Ok(Resume::Complete) => "complete",
                        Err(ResumeError::EventsGone { earliest: e }) => {
                            assert_eq!(e.get(), earliest);
                            "gone"
                        }
                        Err(ResumeError::CursorAhead { .. }) => "invalid",
                    };
                    assert_eq!(
                        kind, expected,
                        "after {after:?} retained {earliest}..{next} terminal {terminal}"
                    );
                }
            }
        }
    }
}
