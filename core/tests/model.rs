//! Model-based property test: random sequences of append / expire / terminate /
//! resume-with-random-cursor / cancel / pump against the core's ring, resume decision and stream
//! table, checked against a plain `Vec` model that restates the SEP's rules over explicit sets.
//!
//! Requirement IDs checked here: EV-02, EV-03, EV-04 (order), RS-03..RS-07, EG-01, TS-03,
//! TS-05/TS-06, TS-08/DX-04, DX-07.

use proptest::prelude::*;
use taskstream_core::resume::{decide, Lifecycle, Resume, ResumeError, Retained};
use taskstream_core::streams::{OpenError, Opened, Progress, Pump};
use taskstream_core::{
    EventRing, EventType, Millis, Payload, RequestId, RetentionPolicy, Seq, StreamTable,
};

const TASKS: usize = 2;
type Ring = EventRing<6, 160>;

#[derive(Clone, Debug)]
enum Op {
    Append { task: usize, len: usize },
    Advance { ms: u64 },
    Terminate { task: usize },
    Open { task: usize, after: Option<u64> },
    Cancel { task: usize },
    Pump { steps: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..TASKS, 0usize..40).prop_map(|(task, len)| Op::Append { task, len }),
        1 => (0u64..30).prop_map(|ms| Op::Advance { ms }),
        1 => (0..TASKS).prop_map(|task| Op::Terminate { task }),
        3 => (0..TASKS, proptest::option::of(0u64..40)).prop_map(|(task, after)| Op::Open { task, after }),
        1 => (0..TASKS).prop_map(|task| Op::Cancel { task }),
        3 => (0usize..12).prop_map(|steps| Op::Pump { steps }),
    ]
}

/// The model of one task: every event ever appended, which are retained, and whether it ended.
#[derive(Default)]
struct ModelTask {
    /// (seq, payload, at) of every event ever appended, in order.
    all: Vec<(u64, String, u64)>,
    /// The first retained seq.
    earliest: u64,
    terminal: bool,
}

impl ModelTask {
    fn next(&self) -> u64 {
        self.all.len() as u64
    }
    fn retained(&self) -> std::ops::Range<u64> {
        self.earliest..self.next()
    }
}

/// Each task's open stream in the model: (request id, next seq to deliver).
type ModelStreams = [Option<(i64, u64)>; TASKS];

fn progress(rings: &[Ring], model: &[ModelTask], task: usize) -> Option<Progress> {
    Some(Progress {
        retained: rings.get(task)?.retained(),
        lifecycle: if model.get(task)?.terminal {
            Lifecycle::Terminal
        } else {
            Lifecycle::Running
        },
    })
}

fn run(ops: &[Op], max_events: u32) -> Result<(), TestCaseError> {
    let policy = RetentionPolicy {
        max_events,
        max_bytes: u32::MAX,
        max_event_age: Millis(50),
        terminal_retention: Millis::MAX,
        max_payload_bytes: 60,
    };
    let ty = EventType::new("dev.taskstream.tick").unwrap();
    let mut rings: Vec<Ring> = (0..TASKS).map(|_| Ring::new()).collect();
    let mut model: Vec<ModelTask> = (0..TASKS).map(|_| ModelTask::default()).collect();
    let mut table: StreamTable<usize, 4> = StreamTable::new(TASKS);
    let mut streams: ModelStreams = [None; TASKS];
    let mut now = 0u64;
    let mut next_id = 0i64;

    for op in ops {
        match *op {
            Op::Append { task, len } => {
                let m = &mut model[task];
                if m.terminal {
                    continue; // the log of a terminal task is frozen
                }
                let text = format!("{{\"n\":{},\"s\":\"{}\"}}", m.next(), "x".repeat(len));
                let result = rings[task].append(
                    Millis(now),
                    ty,
                    Payload::new(text.as_bytes()).unwrap(),
                    &policy,
                );
                if text.len() > 60 {
                    prop_assert!(result.is_err(), "oversized payload accepted");
                    prop_assert_eq!(
                        rings[task].next_seq().get(),
                        m.next(),
                        "ring changed by a refusal"
                    );
                    continue;
                }
                let appended = result.map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(
                    appended.seq.get(),
                    m.next(),
                    "EV-02/EV-03: seq is the next integer"
                );
                m.all.push((m.next(), text, now));
                let evicted = appended.evicted.map_or(0, |e| e.count);
                m.earliest += evicted;
                prop_assert_eq!(rings[task].retained().earliest().get(), m.earliest);
                prop_assert!(rings[task].len() <= max_events.max(1) as usize);
                prop_assert!(
                    rings[task].len() >= 1,
                    "the newest event is always retained"
                );
            }
            Op::Advance { ms } => {
                now += ms;
                for (ring, m) in rings.iter_mut().zip(&mut model) {
                    ring.expire(Millis(now), &policy);
                    while m.earliest < m.next() && now - m.all[m.earliest as usize].2 > 50 {
                        m.earliest += 1;
                    }
                    prop_assert_eq!(
                        ring.retained().earliest().get(),
                        m.earliest,
                        "expiry by age"
                    );
                }
            }
            Op::Terminate { task } => model[task].terminal = true,
            Op::Open { task, after } => {
                let m = &model[task];
                let id = RequestId::Number(next_id);
                next_id += 1;
                if streams[task].is_some() {
                    prop_assert_eq!(
                        table.check_open(task),
                        Err(OpenError::StreamActive),
                        "TS-06"
                    );
                    continue;
                }
                let after_seq = after.map(|a| Seq::new(a).unwrap());
                let lifecycle = if m.terminal {
                    Lifecycle::Terminal
                } else {
                    Lifecycle::Running
                };
                let got = decide(after_seq, rings[task].retained(), lifecycle);
                // The model: the client needs every seq > after; all must be retained.
                let retained = m.retained();
                let expected = match after {
                    Some(a) if a >= m.next() => "invalid",
                    Some(a) if (a + 1..m.next()).any(|q| !retained.contains(&q)) => "gone",
                    _ => {
                        let first = after.map_or(retained.start, |a| a + 1);
                        if first < m.next() {
                            "replay"
                        } else if m.terminal {
                            "complete"
                        } else {
                            "live"
                        }
                    }
                };
                match got {
                    Err(ResumeError::CursorAhead { .. }) => prop_assert_eq!(expected, "invalid"),
                    Err(ResumeError::EventsGone { earliest }) => {
                        prop_assert_eq!(expected, "gone", "EG-01 only when events are gone");
                        prop_assert_eq!(earliest.get(), m.earliest, "EG-01 earliestSeq");
                    }
                    Ok(start) => {
                        let kind = match start {
                            Resume::Replay { .. } => "replay",
                            Resume::Live { .. } => "live",
                            Resume::Complete => "complete",
                        };
                        prop_assert_eq!(kind, expected);
                        match table.open(id, task, start) {
                            Ok(Opened::Streaming) => {
                                let from = start.first_seq().unwrap().get();
                                prop_assert_eq!(
                                    from,
                                    after.map_or(m.earliest, |a| a + 1).max(m.earliest)
                                );
                                streams[task] = Some((next_id - 1, from));
                            }
                            Ok(Opened::Complete) => prop_assert_eq!(kind, "complete"),
                            Err(e) => {
                                return Err(TestCaseError::fail(format!("open refused: {e}")))
                            }
                        }
                    }
                }
            }
            Op::Cancel { task } => {
                let Some((id, _)) = streams[task].take() else {
                    continue;
                };
                prop_assert_eq!(table.cancel(&RequestId::Number(id)), Some(task), "TS-08");
            }
            Op::Pump { steps } => {
                for _ in 0..steps {
                    let out = table.poll(|t| progress(&rings, &model, t));
                    match out {
                        None => {
                            // Every open stream is caught up on a running task.
                            for (task, s) in streams.iter().enumerate() {
                                if let Some((_, next)) = s {
                                    prop_assert_eq!(
                                        *next,
                                        model[task].next(),
                                        "idle while events wait"
                                    );
                                    prop_assert!(
                                        !model[task].terminal,
                                        "TS-03: terminal stream left open"
                                    );
                                }
                            }
                            break;
                        }
                        Some(Pump::Event { task, seq }) => {
                            let Some((_, next)) = streams[task].as_mut() else {
                                return Err(TestCaseError::fail(
                                    "DX-04: event for a cancelled stream",
                                ));
                            };
                            prop_assert_eq!(seq.get(), *next, "EV-04/RS-07: no skip, no reorder");
                            let e = rings[task].get(seq).unwrap();
                            prop_assert_eq!(
                                e.payload,
                                model[task].all[seq.get() as usize].1.as_bytes()
                            );
                            *next += 1;
                        }
                        Some(Pump::Complete { id, task }) => {
                            let Some((mid, next)) = streams[task].take() else {
                                return Err(TestCaseError::fail("completion for a closed stream"));
                            };
                            prop_assert_eq!(id, RequestId::Number(mid));
                            prop_assert!(
                                model[task].terminal && next == model[task].next(),
                                "TS-03"
                            );
                        }
                        Some(Pump::Gone { id, task, earliest }) => {
                            let Some((mid, next)) = streams[task].take() else {
                                return Err(TestCaseError::fail("events_gone for a closed stream"));
                            };
                            prop_assert_eq!(id, RequestId::Number(mid));
                            prop_assert!(
                                next < model[task].earliest,
                                "RS-07: gone only when dropped"
                            );
                            prop_assert_eq!(earliest.get(), model[task].earliest);
                        }
                    }
                }
            }
        }
        let _ = Retained::EMPTY;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn core_matches_the_model(ops in proptest::collection::vec(op(), 1..120), max_events in 1u32..8) {
        run(&ops, max_events)?;
    }
}
