use super::*;
use crate::resume::decide;
use std::vec::Vec;

fn seq(n: u64) -> Seq {
    Seq::new(n).unwrap()
}

fn id(n: i64) -> RequestId {
    RequestId::Number(n)
}

fn progress(earliest: u64, next: u64, terminal: bool) -> Option<Progress> {
    Some(Progress {
        retained: Retained::new(seq(earliest), seq(next)).unwrap(),
        lifecycle: if terminal {
            Lifecycle::Terminal
        } else {
            Lifecycle::Running
        },
    })
}

/// Drains the table for one task's progress, returning what the pump produced.
fn drain(t: &mut StreamTable<u8, 4>, p: Option<Progress>) -> Vec<Pump<u8>> {
    let mut out = Vec::new();
    while let Some(x) = t.poll(|_| p) {
        out.push(x);
    }
    out
}

#[test]
fn one_active_stream_per_task_and_a_limit() {
    // TS-05, TS-06, SE-07
    let mut t: StreamTable<u8, 4> = StreamTable::new(2);
    let live = Resume::Live { from: seq(0) };
    assert_eq!(t.open(id(1), 7, live), Ok(Opened::Streaming));
    assert_eq!(t.check_open(7), Err(OpenError::StreamActive));
    assert_eq!(t.open(id(2), 7, live), Err(OpenError::StreamActive));
    assert_eq!(t.open(id(1), 8, live), Err(OpenError::DuplicateId));
    assert_eq!(t.open(id(3), 8, live), Ok(Opened::Streaming));
    assert_eq!(t.open(id(4), 9, live), Err(OpenError::StreamLimit));
    // At the limit, a start with nothing to send needs no slot (RS-04, RS-06): it completes.
    assert_eq!(t.check_open(9), Ok(()));
    assert_eq!(t.open(id(6), 9, Resume::Complete), Ok(Opened::Complete));
    assert_eq!(t.len(), 2);
    // A completed open adds nothing.
    assert_eq!(t.cancel(&id(3)), Some(8));
    assert_eq!(t.open(id(5), 9, Resume::Complete), Ok(Opened::Complete));
    assert_eq!(t.len(), 1);
}

#[test]
fn replay_then_live_then_complete_in_order() {
    // TS-03, EV-04, DX-07
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    t.open(id(1), 0, Resume::Replay { from: seq(2) }).unwrap();
    let seqs = |v: Vec<Pump<u8>>| -> Vec<u64> {
        v.into_iter()
            .map(|p| match p {
                Pump::Event { seq, .. } => seq.get(),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    };
    assert_eq!(seqs(drain(&mut t, progress(0, 5, false))), [2, 3, 4]);
    // Nothing new: idle, the stream stays active.
    assert_eq!(drain(&mut t, progress(0, 5, false)), []);
    assert_eq!(seqs(drain(&mut t, progress(0, 6, false)))[..], [5]);
    assert_eq!(
        drain(&mut t, progress(0, 7, true)),
        [
            Pump::Event {
                task: 0,
                seq: seq(6)
            },
            Pump::Complete {
                id: id(1),
                task: 0,
                meta: ()
            }
        ]
    );
    // The stream stopped being active before its result was handed out.
    assert!(t.is_empty());
    assert_eq!(t.check_open(0), Ok(()));
}

#[test]
fn cancellation_stops_delivery_and_is_silent() {
    // TS-08, DX-04
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    t.open(id(1), 0, Resume::Replay { from: seq(0) }).unwrap();
    assert_eq!(
        t.poll(|_| progress(0, 3, false)),
        Some(Pump::Event {
            task: 0,
            seq: seq(0)
        })
    );
    assert_eq!(t.cancel(&id(1)), Some(0));
    assert_eq!(t.cancel(&id(1)), None);
    assert_eq!(drain(&mut t, progress(0, 3, true)), []);
}

#[test]
fn a_slow_stream_overtaken_by_retention_gets_events_gone_not_a_gap() {
    // RS-07
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    t.open(id(1), 0, Resume::Replay { from: seq(0) }).unwrap();
    assert_eq!(
        t.poll(|_| progress(0, 10, false)),
        Some(Pump::Event {
            task: 0,
            seq: seq(0)
        })
    );
    assert_eq!(
        t.poll(|_| progress(5, 10, false)),
        Some(Pump::Gone {
            id: id(1),
            task: 0,
            earliest: seq(5),
            meta: ()
        })
    );
    assert!(t.is_empty());
}

#[test]
fn a_vanished_task_completes_its_streams() {
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    t.open(id(1), 0, Resume::Live { from: seq(3) }).unwrap();
    assert_eq!(
        drain(&mut t, None),
        [Pump::Complete {
            id: id(1),
            task: 0,
            meta: ()
        }]
    );
}

#[test]
fn streams_are_served_round_robin() {
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    for task in 0..3u8 {
        t.open(id(task.into()), task, Resume::Replay { from: seq(0) })
            .unwrap();
    }
    let mut order = Vec::new();
    for _ in 0..6 {
        match t.poll(|_| progress(0, 10, false)) {
            Some(Pump::Event { task, seq }) => order.push((task, seq.get())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(order, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]);
}

#[test]
fn open_after_decide_covers_every_start() {
    // The table and the decision together: a terminal, caught-up task never becomes active.
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    let r = Retained::new(seq(0), seq(3)).unwrap();
    let start = decide(Some(seq(2)), r, Lifecycle::Terminal).unwrap();
    assert_eq!(t.open(id(1), 0, start), Ok(Opened::Complete));
    let start = decide(Some(seq(1)), r, Lifecycle::Terminal).unwrap();
    assert_eq!(t.open(id(2), 0, start), Ok(Opened::Streaming));
    assert_eq!(
        drain(&mut t, progress(0, 3, true)),
        [
            Pump::Event {
                task: 0,
                seq: seq(2)
            },
            Pump::Complete {
                id: id(2),
                task: 0,
                meta: ()
            }
        ]
    );
}

#[test]
fn removing_a_stream_keeps_the_others_in_turn() {
    // Cancelling the first, a middle and the last stream; the rest keep their round-robin
    // order, and each cursor stays with its stream.
    let mut t: StreamTable<u8, 4> = StreamTable::new(4);
    for task in 0..4u8 {
        t.open(
            id(task.into()),
            task,
            Resume::Replay {
                from: seq(task.into()),
            },
        )
        .unwrap();
    }
    assert_eq!(t.cancel(&id(1)), Some(1));
    assert_eq!(t.cancel(&id(0)), Some(0));
    let mut order = Vec::new();
    for _ in 0..4 {
        match t.poll(|_| progress(0, 10, false)) {
            Some(Pump::Event { task, seq }) => order.push((task, seq.get())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(order, [(2, 2), (3, 3), (2, 3), (3, 4)]);
    assert_eq!(t.cancel(&id(3)), Some(3));
    assert_eq!(t.cancel(&id(3)), None);
    assert_eq!(t.len(), 1);
    assert_eq!(t.cursor(&id(2)), Some(seq(4)));
}

#[test]
fn an_event_missed_after_the_pump_is_answered_by_the_table() {
    // RS-07: retention dropped seq 3 between the pump handing it out and the host's read.
    let mut t: StreamTable<u8, 4, &str> = StreamTable::new(4);
    t.open_with(id(1), 0, Resume::Replay { from: seq(3) }, "task-a")
        .unwrap();
    assert_eq!(
        t.poll(|_| progress(0, 10, false)),
        Some(Pump::Event {
            task: 0,
            seq: seq(3)
        })
    );
    assert_eq!(
        t.missed(0, seq(3), progress(6, 10, false)),
        Some(Missed::Gone {
            id: id(1),
            task: 0,
            earliest: seq(6),
            meta: "task-a"
        })
    );
    assert!(t.is_empty(), "the stream is removed, never left to skip");
    assert_eq!(t.missed(0, seq(3), progress(6, 10, false)), None);
}

#[test]
fn a_missed_event_still_retained_is_unreadable_not_gone() {
    // Storage failed to give back a retained event: not events_gone (the client would resume
    // from a seq that is not the oldest retained).
    let mut t: StreamTable<u8, 4, u32> = StreamTable::new(4);
    t.open_with(id(1), 0, Resume::Replay { from: seq(3) }, 7)
        .unwrap();
    t.open_with(id(2), 1, Resume::Replay { from: seq(0) }, 8)
        .unwrap();
    assert_eq!(
        t.missed(0, seq(3), progress(3, 10, false)),
        Some(Missed::Unreadable {
            id: id(1),
            task: 0,
            meta: 7
        })
    );
    // The other stream is untouched, and a vanished task completes.
    assert_eq!(t.meta(1), Some(&8));
    assert_eq!(
        t.missed(1, seq(0), None),
        Some(Missed::Complete {
            id: id(2),
            task: 1,
            meta: 8
        })
    );
    assert!(t.is_empty());
}

#[test]
fn host_data_travels_with_its_stream_and_comes_back_once() {
    let mut t: StreamTable<u8, 4, &str> = StreamTable::new(4);
    t.open_with(id(1), 0, Resume::Replay { from: seq(0) }, "a")
        .unwrap();
    t.open_with(id(2), 1, Resume::Replay { from: seq(0) }, "b")
        .unwrap();
    // An open that completes at once keeps nothing.
    assert_eq!(
        t.open_with(id(3), 2, Resume::Complete, "c"),
        Ok(Opened::Complete)
    );
    assert_eq!(t.meta(2), None);
    assert_eq!(t.ids().collect::<Vec<_>>(), [&id(1), &id(2)]);
    assert_eq!(t.cancel(&id(1)), Some(0));
    assert_eq!(t.meta(0), None);
    assert_eq!(t.meta(1), Some(&"b"));
    assert_eq!(
        drain_with(&mut t, progress(0, 0, true)),
        [Pump::Complete {
            id: id(2),
            task: 1,
            meta: "b"
        }]
    );
}

fn drain_with<M>(t: &mut StreamTable<u8, 4, M>, p: Option<Progress>) -> Vec<Pump<u8, M>> {
    let mut out = Vec::new();
    while let Some(x) = t.poll(|_| p) {
        out.push(x);
    }
    out
}
