//! The model checker shared by the property test (`core/tests/model/main.rs`) and the fuzz
//! target `model`: random sequences of append / expire / terminate / resume-with-random-cursor /
//! cancel / pump (also with retention racing the host's read of a pumped event) against the core's ring, resume decision and stream table, checked against a
//! plain `Vec` model that restates the SEP's rules over explicit sets.
//!
//! Requirement IDs checked here: EV-02, EV-03, EV-04 (order), RS-03..RS-07, EG-01, TS-03,
//! TS-05/TS-06, TS-08/DX-04, DX-07.

// Scenario values are generated, not read from outside: a failed unwrap is a failed check.
#![allow(clippy::unwrap_used)]
use taskstream_core::resume::{decide, Lifecycle, Resume, ResumeError};
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

macro_rules! ensure_eq {
    ($a:expr, $b:expr $(,)?) => {
        ensure_eq!($a, $b, "values differ")
    };
    ($a:expr, $b:expr, $($msg:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{}: {:?} != {:?}", format!($($msg)+), a, b));
        }
    }};
}

use taskstream_core::streams::{OpenError, Opened, Progress, Pump};
use taskstream_core::{
    EventRing, EventType, Millis, Payload, RequestId, RetentionPolicy, Seq, StreamTable,
};

/// Tasks in a scenario.
pub(crate) const TASKS: usize = 2;
type Ring = EventRing<6, 160>;

/// One step of a scenario.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// Append an event whose payload carries `len` filler bytes (too large ones are refused).
    Append { task: usize, len: usize },
    /// Advance the clock and expire events by age.
    Advance { ms: u64 },
    /// The task reaches a terminal state.
    Terminate { task: usize },
    /// `tasks/stream` with an optional cursor.
    Open { task: usize, after: Option<u64> },
    /// `notifications/cancelled` for the task's stream.
    Cancel { task: usize },
    /// Run the pump up to `steps` times.
    Pump { steps: usize },
    /// Run the pump once, and let `ms` pass (expiring by age) before the host reads the event
    /// it was handed: a read that then misses goes back to the table (`missed`).
    RacedPump { ms: u64 },
}

/// Decodes a scenario from arbitrary bytes (for the fuzzer): the first byte picks the event
/// limit, then two bytes per operation.
pub(crate) fn ops_from_bytes(data: &[u8]) -> (Vec<Op>, u32) {
    let max_events = u32::from(data.first().copied().unwrap_or(0) % 8) + 1;
    let ops = data
        .get(1..)
        .unwrap_or_default()
        .chunks_exact(2)
        .map(|pair| {
            let (kind, arg) = (pair[0], pair[1]);
            let task = usize::from(arg) % TASKS;
            match kind % 16 {
                0..=5 => Op::Append {
                    task,
                    len: usize::from(arg / 2) % 40,
                },
                6 => Op::Advance {
                    ms: u64::from(arg % 30),
                },
                7 => Op::Terminate { task },
                8..=10 => Op::Open {
                    task,
                    after: (arg & 0x80 != 0).then_some(u64::from(arg & 0x7f) % 40),
                },
                11 => Op::Cancel { task },
                12 => Op::RacedPump {
                    ms: u64::from(arg % 80),
                },
                _ => Op::Pump {
                    steps: usize::from(arg) % 12,
                },
            }
        })
        .collect();
    (ops, max_events)
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

/// Expires every ring by age at `now`, in the core and in the model, and checks they agree.
fn advance(
    rings: &mut [Ring],
    model: &mut [ModelTask],
    now: u64,
    policy: &RetentionPolicy,
) -> Result<(), String> {
    for (ring, m) in rings.iter_mut().zip(model) {
        let report = ring.expire(Millis(now), policy);
        let before = m.earliest;
        while m.earliest < m.next() && now - m.all[m.earliest as usize].2 > 50 {
            m.earliest += 1;
        }
        ensure_eq!(
            report.map(|e| (e.count, e.earliest.get())),
            (m.earliest > before).then(|| (m.earliest - before, m.earliest)),
            "the expiry report"
        );
        ensure_eq!(
            ring.retained().earliest().get(),
            m.earliest,
            "expiry by age"
        );
    }
    Ok(())
}

/// Checks one answer of the pump against the model and moves the model's stream on; whether
/// the pump had something to say (`false`: every stream is idle).
fn check_step(
    out: Option<Pump<usize>>,
    rings: &[Ring],
    model: &[ModelTask],
    streams: &mut ModelStreams,
) -> Result<bool, String> {
    match out {
        None => {
            // Every open stream is caught up on a running task.
            for (task, s) in streams.iter().enumerate() {
                if let Some((_, next)) = s {
                    ensure_eq!(*next, model[task].next(), "idle while events wait");
                    ensure!(!model[task].terminal, "TS-03: terminal stream left open");
                }
            }
            return Ok(false);
        }
        Some(Pump::Event { task, seq }) => {
            let Some((_, next)) = streams[task].as_mut() else {
                return Err(String::from("DX-04: event for a cancelled stream"));
            };
            ensure_eq!(seq.get(), *next, "EV-04/RS-07: no skip, no reorder");
            let e = rings[task].get(seq).unwrap();
            ensure_eq!(e.payload, model[task].all[seq.get() as usize].1.as_bytes());
            *next += 1;
        }
        Some(Pump::Complete { id, task, .. }) => {
            let Some((mid, next)) = streams[task].take() else {
                return Err(String::from("completion for a closed stream"));
            };
            ensure_eq!(id, RequestId::Number(mid));
            ensure!(model[task].terminal && next == model[task].next(), "TS-03");
        }
        Some(Pump::Gone {
            id, task, earliest, ..
        }) => {
            let Some((mid, next)) = streams[task].take() else {
                return Err(String::from("events_gone for a closed stream"));
            };
            ensure_eq!(id, RequestId::Number(mid));
            ensure!(next < model[task].earliest, "RS-07: gone only when dropped");
            ensure_eq!(earliest.get(), model[task].earliest);
        }
    }
    Ok(true)
}

/// Runs `ops` against the core and the model; `Err` names the first divergence.
pub(crate) fn run(ops: &[Op], max_events: u32) -> Result<(), String> {
    let policy = RetentionPolicy {
        max_events,
        max_bytes: u32::MAX,
        max_event_age: Millis(50),
        terminal_retention: Millis::MAX,
        max_payload_bytes: 60,
        retain_from_checkpoint: false,
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
                    ensure!(result.is_err(), "oversized payload accepted");
                    ensure_eq!(
                        rings[task].next_seq().get(),
                        m.next(),
                        "ring changed by a refusal"
                    );
                    continue;
                }
                let appended = result.map_err(|e| e.to_string())?;
                ensure_eq!(
                    appended.seq.get(),
                    m.next(),
                    "EV-02/EV-03: seq is the next integer"
                );
                m.all.push((m.next(), text, now));
                let evicted = appended.evicted.map_or(0, |e| e.count);
                m.earliest += evicted;
                ensure_eq!(rings[task].retained().earliest().get(), m.earliest);
                ensure!(
                    rings[task].len() <= max_events.max(1) as usize,
                    "more events than the policy allows"
                );
                ensure!(
                    !rings[task].is_empty(),
                    "the newest event is always retained"
                );
            }
            Op::Advance { ms } => {
                now += ms;
                advance(&mut rings, &mut model, now, &policy)?;
            }
            Op::Terminate { task } => model[task].terminal = true,
            Op::Open { task, after } => {
                let m = &model[task];
                let id = RequestId::Number(next_id);
                next_id += 1;
                if streams[task].is_some() {
                    ensure_eq!(
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
                    Err(ResumeError::CursorAhead { .. }) => ensure_eq!(expected, "invalid"),
                    Err(ResumeError::EventsGone { earliest }) => {
                        ensure_eq!(expected, "gone", "EG-01 only when events are gone");
                        ensure_eq!(earliest.get(), m.earliest, "EG-01 earliestSeq");
                    }
                    Ok(start) => {
                        let kind = match start {
                            Resume::Replay { .. } => "replay",
                            Resume::Live { .. } => "live",
                            Resume::Complete => "complete",
                        };
                        ensure_eq!(kind, expected);
                        match table.open(id, task, start) {
                            Ok(Opened::Streaming) => {
                                let from = start.first_seq().unwrap().get();
                                ensure_eq!(
                                    from,
                                    after.map_or(m.earliest, |a| a + 1).max(m.earliest)
                                );
                                streams[task] = Some((next_id - 1, from));
                            }
                            Ok(Opened::Complete) => ensure_eq!(kind, "complete"),
                            Err(e) => return Err(format!("open refused: {e}")),
                        }
                    }
                }
            }
            Op::Cancel { task } => {
                let Some((id, _)) = streams[task].take() else {
                    continue;
                };
                ensure_eq!(table.cancel(&RequestId::Number(id)), Some(task), "TS-08");
            }
            Op::Pump { steps } => {
                for _ in 0..steps {
                    let out = table.poll(|t| progress(&rings, &model, t));
                    if !check_step(out, &rings, &model, &mut streams)? {
                        break;
                    }
                }
            }
            Op::RacedPump { ms } => {
                let (task, seq) = match table.poll(|t| progress(&rings, &model, t)) {
                    Some(Pump::Event { task, seq }) => (task, seq),
                    // Anything but an event is checked as any pump's answer.
                    other => {
                        check_step(other, &rings, &model, &mut streams)?;
                        continue;
                    }
                };
                let Some((mid, next)) = streams[task] else {
                    return Err(String::from("DX-04: event for a cancelled stream"));
                };
                ensure_eq!(seq.get(), next, "EV-04/RS-07: no skip, no reorder");
                now += ms;
                advance(&mut rings, &mut model, now, &policy)?;
                if let Some(e) = rings[task].get(seq) {
                    ensure_eq!(e.payload, model[task].all[seq.get() as usize].1.as_bytes());
                    if let Some(s) = streams[task].as_mut() {
                        s.1 += 1;
                    }
                    continue;
                }
                // The read missed: the table decides, against the progress read now.
                let answer = table.missed(task, seq, progress(&rings, &model, task));
                streams[task] = None;
                ensure!(
                    seq.get() < model[task].earliest,
                    "a miss of a retained event"
                );
                ensure_eq!(
                    answer,
                    Some(taskstream_core::streams::Missed::Gone {
                        id: RequestId::Number(mid),
                        task,
                        earliest: Seq::new(model[task].earliest).unwrap(),
                        meta: ()
                    }),
                    "RS-07: a missed event is events_gone at the oldest retained"
                );
                ensure!(!table.is_streaming(task), "the missed stream is removed");
            }
        }
    }
    Ok(())
}
