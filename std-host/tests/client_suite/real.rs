//! The client against the real server binary, in memory and without fsync.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use taskstream_client::{
    CallOutcome, Client, ClientError, ClientOptions, CursorStore, Delivery, Era, EraChoice,
    EventsGone, Flow, FollowEnd, FollowError, GonePolicy, MemoryCursorStore, ResumableStream,
    SkippedRange, StartAt, StreamItem, StreamOptions, TaskEvent, TaskStatus,
};

const WAIT: Duration = Duration::from_secs(20);

fn serve(era: EraChoice, extra: &[&str]) -> Client {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskstream"));
    cmd.args(["serve", "--in-memory", "--durability", "none"])
        .args(extra)
        .stderr(Stdio::null());
    let options = ClientOptions {
        era,
        ..ClientOptions::default()
    };
    Client::spawn(cmd, options).expect("the server starts and answers")
}

fn options(policy: GonePolicy) -> StreamOptions {
    StreamOptions {
        idle_timeout: WAIT,
        gone_policy: policy,
        ..StreamOptions::default()
    }
}

/// Reads a task's stream to its end (the task is then terminal), re-opening it without
/// `after` if retention moved past it meanwhile.
fn wait_terminal(client: &Client, task_id: &str) {
    for _ in 0..10 {
        let mut stream = client.open_stream(task_id, None).expect("open");
        loop {
            match stream.next(WAIT).expect("an item before the deadline") {
                StreamItem::Event(_) => {}
                StreamItem::End(_) => return,
                StreamItem::Error(e) if e.events_gone().is_some() => break,
                StreamItem::Error(e) => panic!("stream error {e}"),
                other => panic!("unexpected stream item {other:?}"),
            }
        }
    }
    panic!("task {task_id} did not end");
}

fn start_emit(client: &Client, args: Value) -> String {
    client
        .start_task("emit", args)
        .expect("emit as a task")
        .task_id
}

type Log = Vec<(u64, String, Value)>;

fn collect(log: &mut Log) -> impl FnMut(&TaskEvent) -> Result<Flow, String> + '_ {
    |e| {
        log.push((
            e.seq,
            e.event_type.clone(),
            Value::Object(e.payload.clone()),
        ));
        Ok(Flow::Continue)
    }
}

fn seqs(log: &Log) -> Vec<u64> {
    log.iter().map(|(s, _, _)| *s).collect()
}

#[test]
fn modern_stream_delivers_every_event_in_order_and_ends() {
    let client = serve(EraChoice::Modern, &[]);
    assert_eq!(client.era(), Era::Modern);
    assert!(client.server_info().event_streams, "TS-02 advertised");
    let names: Vec<String> = client
        .list_tools()
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"emit".to_owned()) && names.contains(&"run_trace".to_owned()));

    let task = start_emit(&client, json!({"count": 5, "interval_ms": 1}));
    let mut stream = ResumableStream::new(
        task.clone(),
        MemoryCursorStore::new(),
        options(GonePolicy::Fail),
    )
    .expect("new");
    let mut log = Log::new();
    let end = stream.follow(&client, collect(&mut log)).expect("follow");
    assert_eq!(end, FollowEnd::Completed(json!({"resultType": "complete"})));
    assert_eq!(seqs(&log), (0..=6).collect::<Vec<_>>(), "EV-02, EV-03");
    assert_eq!(log[0].1, "dev.taskstream.task.status");
    assert_eq!(log[0].2, json!({"status": "working"}));
    for (i, (_, kind, payload)) in log[1..6].iter().enumerate() {
        assert_eq!(kind, "dev.taskstream.tick");
        assert_eq!(payload["i"], json!(i));
    }
    assert_eq!(log[6].2["status"], json!("completed"));
    assert_eq!(stream.cursor(), Some(6));
    assert_eq!(stream.store().load(&task).expect("load"), Some(6));
    assert_eq!(stream.stats().related_task_checked, 7, "NT-01/NT-02");
    assert_eq!(stream.stats().duplicates, 0);

    let info = client.task_info(&task).expect("tasks/get");
    assert_eq!(info.status, TaskStatus::Completed);
    let range = info.events.expect("dev.taskstream/events range");
    assert_eq!(
        (range.earliest_seq, range.latest_seq, range.next_seq),
        (Some(0), Some(6), 7)
    );
    assert!(
        info.result.is_some(),
        "modern DetailedTask carries the result"
    );
}

#[test]
fn resume_after_a_stop_continues_at_cursor_plus_one_and_drops_redelivered_events() {
    let client = serve(EraChoice::Modern, &[]);
    let task = start_emit(&client, json!({"count": 8}));
    let mut store = MemoryCursorStore::new();
    let mut log = Log::new();
    {
        let mut stream =
            ResumableStream::new(task.clone(), &mut store, options(GonePolicy::Fail)).expect("new");
        // RS-08: stop after seq 3; the cursor is committed for 3, not beyond.
        let end = stream
            .follow(&client, |e| {
                log.push((e.seq, e.event_type.clone(), Value::Null));
                Ok::<_, String>(if e.seq == 3 {
                    Flow::Stop
                } else {
                    Flow::Continue
                })
            })
            .expect("follow");
        assert_eq!(end, FollowEnd::Stopped);
    }
    assert_eq!(store.load(&task).expect("load"), Some(3));
    // A handler error does not commit: the cursor stays at 3 and seq 4 comes again next time.
    {
        let mut stream =
            ResumableStream::new(task.clone(), &mut store, options(GonePolicy::Fail)).expect("new");
        let err = stream
            .follow(&client, |e| Err::<Flow, _>(format!("refuse {}", e.seq)))
            .expect_err("the handler refuses");
        assert!(
            matches!(err, FollowError::Handler(ref m) if m == "refuse 4"),
            "{err}"
        );
    }
    assert_eq!(store.load(&task).expect("load"), Some(3));
    // A fresh ResumableStream on the same store resumes with after = 3 (RS-09).
    let mut stream =
        ResumableStream::new(task.clone(), &mut store, options(GonePolicy::Fail)).expect("new");
    let end = stream
        .follow(&client, |e| {
            log.push((e.seq, e.event_type.clone(), Value::Null));
            Ok::<_, String>(Flow::Continue)
        })
        .expect("resume");
    assert!(matches!(end, FollowEnd::Completed(_)));
    assert_eq!(stream.stats().afters, vec![Some(3)]);
    assert_eq!(seqs(&log), (0..=9).collect::<Vec<_>>());
    // Redelivery from an older `after`: all duplicates, none processed (RS-10, RS-11).
    let mut calls = 0;
    stream
        .follow_from(&client, StartAt::After(1), |_| {
            calls += 1;
            Ok::<_, String>(Flow::Continue)
        })
        .expect("redelivery");
    assert_eq!((calls, stream.stats().duplicates), (0, 8));
    // And everything retained, from the start: all duplicates too.
    stream
        .follow_from(&client, StartAt::Retained, |_| {
            calls += 1;
            Ok::<_, String>(Flow::Continue)
        })
        .expect("replay");
    assert_eq!((calls, stream.stats().duplicates), (0, 18));
}

#[test]
fn raw_stream_rules_rs04_ts05_and_cancel_does_not_cancel_the_task() {
    let client = serve(EraChoice::Modern, &[]);
    let done = start_emit(&client, json!({"count": 2}));
    wait_terminal(&client, &done);
    // RS-04: after the last seq of a terminal task the result comes at once, no events.
    let mut stream = client.open_stream(&done, Some(3)).expect("open");
    match stream.next(WAIT).expect("answer") {
        StreamItem::End(result) => assert_eq!(result, json!({"resultType": "complete"})),
        other => panic!("expected the result, got {other:?}"),
    }
    // RS-02: an `after` beyond the last seq is -32602.
    let mut stream = client.open_stream(&done, Some(99)).expect("open");
    match stream.next(WAIT).expect("answer") {
        StreamItem::Error(e) => assert_eq!(e.code, -32602),
        other => panic!("expected -32602, got {other:?}"),
    }

    let slow = start_emit(&client, json!({"count": 1000, "interval_ms": 20}));
    let mut first = client.open_stream(&slow, None).expect("open");
    assert!(matches!(
        first.next(WAIT).expect("seq 0"),
        StreamItem::Event(_)
    ));
    // TS-05: the client refuses to open a second stream for the task on this connection.
    assert!(matches!(
        client.open_stream(&slow, None),
        Err(ClientError::StreamActive { .. })
    ));
    // TS-08: cancelling the stream leaves the task running.
    first.cancel().expect("cancel");
    assert_eq!(
        client.task_info(&slow).expect("tasks/get").status,
        TaskStatus::Working
    );
    // The task can be streamed again at once, and cancelled as a task.
    let mut again = client.open_stream(&slow, Some(0)).expect("reopen");
    match again.next(WAIT).expect("an event") {
        StreamItem::Event(params) => assert_eq!(params["seq"], json!(1)),
        other => panic!("expected seq 1, got {other:?}"),
    }
    client.cancel_task(&slow).expect("tasks/cancel");
    let last = loop {
        match again.next(WAIT).expect("to the end") {
            StreamItem::Event(params) => {
                if params["type"] == json!("dev.taskstream.task.status") {
                    break params;
                }
            }
            other => panic!("expected the terminal event first, got {other:?}"),
        }
    };
    assert_eq!(last["payload"]["status"], json!("cancelled"));
    assert!(matches!(again.next(WAIT).expect("end"), StreamItem::End(_)));
}

/// A finished task of `emit {count: 10}` (seq 0..=11) on a server retaining 3 events per
/// task, with a client cursor of 1: the events after it are gone (earliest retained is 9).
fn gone_setup(client: &Client) -> (String, MemoryCursorStore) {
    let task = start_emit(client, json!({"count": 10}));
    wait_terminal(client, &task);
    let range = client
        .task_info(&task)
        .expect("tasks/get")
        .events
        .expect("range");
    assert_eq!((range.earliest_seq, range.latest_seq), (Some(9), Some(11)));
    let mut store = MemoryCursorStore::new();
    store.save(&task, 1).expect("save");
    (task, store)
}

#[test]
fn events_gone_policies_fail_resume_from_earliest_and_replay_retained() {
    let client = serve(EraChoice::Modern, &["--max-events-per-task", "3"]);

    // EG-01 on the wire.
    let (task, store) = gone_setup(&client);
    let mut raw = client.open_stream(&task, Some(1)).expect("open");
    let error = match raw.next(WAIT).expect("answer") {
        StreamItem::Error(e) => e,
        other => panic!("expected events_gone, got {other:?}"),
    };
    assert_eq!(error.code, -32010);
    assert_eq!(error.message, "Task events are no longer available");
    assert_eq!(
        error.data,
        Some(json!({"reason": "events_gone", "taskId": task, "earliestSeq": 9}))
    );

    // Fail: the gap is fatal, nothing is processed, the cursor stays.
    let mut stream =
        ResumableStream::new(task.clone(), store, options(GonePolicy::Fail)).expect("new");
    let mut log = Log::new();
    let err = stream
        .follow(&client, collect(&mut log))
        .expect_err("fatal gap");
    match err {
        FollowError::EventsGone(EventsGone {
            task_id,
            earliest_seq,
            ..
        }) => assert_eq!((task_id, earliest_seq), (task.clone(), 9)),
        other => panic!("expected EventsGone, got {other}"),
    }
    assert!(log.is_empty());
    assert_eq!(stream.cursor(), Some(1));

    // Resume from earliest: after = 8, then 9..=11; the lost range 2..=8 is recorded.
    stream.set_options(options(GonePolicy::ResumeFromEarliest));
    let end = stream.follow(&client, collect(&mut log)).expect("recovers");
    assert!(matches!(end, FollowEnd::Completed(_)));
    assert_eq!(seqs(&log), vec![9, 10, 11]);
    assert_eq!(stream.stats().afters, vec![Some(1), Some(1), Some(8)]);
    assert_eq!(
        stream.stats().gaps,
        vec![SkippedRange { first: 2, last: 8 }]
    );

    // Replay retained: no `after`; whatever the server retains, the gap recorded.
    let (task, store) = gone_setup(&client);
    let mut stream =
        ResumableStream::new(task, store, options(GonePolicy::ReplayRetained)).expect("new");
    let mut log = Log::new();
    stream.follow(&client, collect(&mut log)).expect("replays");
    assert_eq!(seqs(&log), vec![9, 10, 11]);
    assert_eq!(stream.stats().afters, vec![Some(1), None]);
    assert_eq!(
        stream.stats().gaps,
        vec![SkippedRange { first: 2, last: 8 }]
    );

    // No cursor and a trimmed log: under Fail the missing history is an error, not skipped.
    let task = start_emit(&client, json!({"count": 10}));
    wait_terminal(&client, &task);
    let mut stream =
        ResumableStream::new(task, MemoryCursorStore::new(), options(GonePolicy::Fail))
            .expect("new");
    let err = stream
        .follow(&client, |_| Ok::<_, String>(Flow::Continue))
        .expect_err("history is missing");
    assert!(
        matches!(err, FollowError::MissingHistory { first_seq: 9, .. }),
        "{err}"
    );
}

#[test]
fn legacy_era_streams_and_returns_the_result_with_tasks_result() {
    let client = serve(EraChoice::Legacy, &[]);
    assert_eq!(client.era(), Era::Legacy);
    assert!(
        client.server_info().event_streams,
        "capabilities.tasks.eventStreams"
    );
    let task = client
        .call_tool_task("emit", json!({"count": 3}))
        .expect("emit with params.task");
    let CallOutcome::Task(task) = task else {
        panic!("expected a task, got {task:?}");
    };
    let mut stream = ResumableStream::new(
        task.task_id.clone(),
        MemoryCursorStore::new(),
        options(GonePolicy::Fail),
    )
    .expect("new");
    let mut log = Log::new();
    let end = stream.follow(&client, collect(&mut log)).expect("follow");
    assert_eq!(
        end,
        FollowEnd::Completed(json!({})),
        "legacy result is {{}}"
    );
    assert_eq!(seqs(&log), (0..=4).collect::<Vec<_>>());
    let result = client
        .task_result(&task.task_id, WAIT)
        .expect("tasks/result");
    assert_eq!(result["isError"], json!(false));
    assert!(result["content"].is_array());
    // A plain call runs the tool without a task.
    let plain = client
        .call_tool("emit", json!({"count": 1}))
        .expect("plain call");
    assert!(plain["content"].is_array());
}

#[test]
fn probe_picks_modern_for_a_dual_era_server() {
    let client = serve(EraChoice::Probe, &[]);
    assert_eq!(client.era(), Era::Modern);
    let task = client
        .start_task("emit", json!({"count": 1}))
        .expect("task");
    // Modern: the final result is inline in tasks/get.
    let result = client
        .task_result(&task.task_id, WAIT)
        .expect("result via tasks/get");
    assert!(result["content"].is_array());
}

#[test]
fn killing_the_server_fails_waits_promptly_with_closed() {
    let client = serve(EraChoice::Modern, &[]);
    let task = start_emit(&client, json!({"count": 1000, "interval_ms": 20}));
    let mut stream =
        ResumableStream::new(task, MemoryCursorStore::new(), options(GonePolicy::Fail))
            .expect("new");
    let mut last = None;
    let err = stream
        .follow(&client, |e| {
            if e.seq == 2 {
                client.kill_server(WAIT).map_err(|e| e.to_string())?;
            }
            last = Some(e.seq);
            Ok::<_, String>(Flow::Continue)
        })
        .expect_err("the connection is gone");
    assert!(
        matches!(err, FollowError::Client(ClientError::Closed { .. })),
        "{err}"
    );
    // Events the server wrote before it died are still processed; the cursor is the last.
    assert!(last >= Some(2));
    assert_eq!(stream.cursor(), last);
    assert!(!client.is_connected());
    assert!(matches!(
        client.task_info("x"),
        Err(ClientError::Closed { .. })
    ));
}

/// The host of `follow_state` in the checkpoint tests: `emit`'s state, `{"ticks": n}`, and how
/// it got there.
#[derive(Default)]
struct TickHost {
    ticks: u64,
    /// (checkpoint seq, lost range) of each start from a checkpoint.
    from_checkpoint: Vec<(u64, SkippedRange)>,
    /// Events handed after a gap no checkpoint covered.
    after_gap: u64,
}

impl TickHost {
    fn take(&mut self, d: Delivery<'_>) -> Result<Flow, String> {
        match d {
            Delivery::FromCheckpoint {
                event,
                checkpoint,
                lost,
            } => {
                assert_eq!(checkpoint.covers_through + 1, event.seq, "CP-01");
                self.ticks = checkpoint.state["ticks"].as_u64().ok_or("ticks")?;
                self.from_checkpoint.push((event.seq, lost));
            }
            Delivery::AfterGap { event, .. } => {
                self.after_gap += 1;
                self.event(event);
            }
            Delivery::Event(event) => self.event(event),
            _ => return Err("an unknown delivery".into()),
        }
        Ok(Flow::Continue)
    }

    fn event(&mut self, e: &TaskEvent) {
        if let Some(c) = e.checkpoint() {
            self.ticks = c.state["ticks"].as_u64().unwrap_or(self.ticks);
        } else if e.event_type == "dev.taskstream.tick" {
            self.ticks += 1;
        }
    }
}

#[test]
fn cp06_a_late_join_and_a_stale_cursor_rebuild_from_the_checkpoint_and_say_so() {
    // 25 ticks, a checkpoint after every 10th: seq 0 working, ticks 1..=10, checkpoint 11,
    // ticks 12..=21, checkpoint 22 (20 ticks), ticks 23..=27, 28 completed.
    let client = serve(EraChoice::Modern, &["--retain-from-checkpoint"]);
    let task = start_emit(&client, json!({"count": 25, "checkpoint_every": 10}));
    wait_terminal(&client, &task);

    // A late join (no cursor): the first event is the checkpoint; the host is told so, gets
    // its state, then the events after it, and ends with a full replay's state.
    let mut stream = ResumableStream::new(
        task.clone(),
        MemoryCursorStore::new(),
        options(GonePolicy::ResumeFromEarliest),
    )
    .expect("new");
    let mut host = TickHost::default();
    let end = stream
        .follow_state(&client, StartAt::Cursor, |d| host.take(d))
        .expect("follow");
    assert!(matches!(end, FollowEnd::Completed(_)), "{end:?}");
    assert_eq!(
        host.from_checkpoint,
        [(22, SkippedRange { first: 0, last: 21 })]
    );
    assert_eq!((host.ticks, host.after_gap), (25, 0), "CP-05");
    assert_eq!(stream.stats().checkpoint_starts, [22]);
    assert_eq!(stream.cursor(), Some(28));

    // A stale cursor: events_gone with the checkpoint's seq, then the same rebuild.
    let mut store = MemoryCursorStore::new();
    store.save(&task, 4).expect("save");
    let mut stream =
        ResumableStream::new(task.clone(), store, options(GonePolicy::ResumeFromEarliest))
            .expect("new");
    let mut host = TickHost {
        ticks: 4,
        ..TickHost::default()
    };
    stream
        .follow_state(&client, StartAt::Cursor, |d| host.take(d))
        .expect("follow");
    assert_eq!(stream.stats().gone.len(), 1);
    assert_eq!(stream.stats().gone[0].earliest_seq, 22, "CP-04");
    assert_eq!(
        host.from_checkpoint,
        [(22, SkippedRange { first: 5, last: 21 })]
    );
    assert_eq!(host.ticks, 25, "CP-05");
}

#[test]
fn cp06_a_gap_without_a_checkpoint_is_told_to_the_host_as_such() {
    // The count limit alone: the first event after the gap is no checkpoint, and the host is
    // told that its state may miss what the gap held.
    let client = serve(EraChoice::Modern, &["--max-events-per-task", "3"]);
    let task = start_emit(&client, json!({"count": 10}));
    wait_terminal(&client, &task);
    let mut stream = ResumableStream::new(
        task.clone(),
        MemoryCursorStore::new(),
        options(GonePolicy::ResumeFromEarliest),
    )
    .expect("new");
    let mut host = TickHost::default();
    stream
        .follow_state(&client, StartAt::Cursor, |d| host.take(d))
        .expect("follow");
    assert!(host.from_checkpoint.is_empty());
    assert_eq!(host.after_gap, 1);
    assert!(stream.stats().checkpoint_starts.is_empty());
    assert_eq!(stream.stats().gaps, [SkippedRange { first: 0, last: 8 }]);
}
