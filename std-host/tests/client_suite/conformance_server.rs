//! The client against `taskstream conformance-server --fault NAME`: the client faults that a
//! client author runs their resume logic against (RS-08..RS-11, EG-02), met by this
//! repository's own client. Each test also shows that the fault happens: what the server did
//! is visible in the client's counters.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use taskstream_client::{
    Client, ClientOptions, EraChoice, Flow, FollowEnd, GonePolicy, MemoryCursorStore,
    ResumableStream, SkippedRange, StreamItem, StreamOptions, TaskEvent,
};

const WAIT: Duration = Duration::from_secs(20);

fn conformance_server(era: EraChoice, faults: &str) -> Client {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskstream"));
    cmd.args(["conformance-server", "--fault", faults])
        .stderr(Stdio::null());
    let options = ClientOptions {
        era,
        ..ClientOptions::default()
    };
    Client::spawn(cmd, options).expect("the conformance server starts and answers")
}

/// Follows `task` until the server says it is terminal, reopening after every early close as
/// a host would (the cursor persisted after processing is the `after` of the next stream).
/// Answers the seqs processed, in order, and the stream.
fn follow_to_the_end(
    client: &Client,
    task: &str,
    policy: GonePolicy,
) -> (Vec<u64>, ResumableStream<MemoryCursorStore>) {
    let options = StreamOptions {
        idle_timeout: WAIT,
        gone_policy: policy,
        ..StreamOptions::default()
    };
    let mut stream =
        ResumableStream::new(task.to_owned(), MemoryCursorStore::new(), options).expect("a stream");
    let mut seqs = Vec::new();
    for _ in 0..50 {
        let end = stream
            .follow(client, |e: &TaskEvent| {
                seqs.push(e.seq);
                Ok::<_, String>(Flow::Continue)
            })
            .expect("the follow ends normally");
        assert!(matches!(end, FollowEnd::Completed(_)), "{end:?}");
        if client
            .task_info(task)
            .expect("tasks/get")
            .status
            .is_terminal()
            && stream.cursor() == seqs.last().copied()
        {
            // One more follow from the cursor answers at once once everything was processed.
            let more = stream
                .follow(client, |e: &TaskEvent| {
                    seqs.push(e.seq);
                    Ok::<_, String>(Flow::Continue)
                })
                .expect("the last follow");
            assert!(matches!(more, FollowEnd::Completed(_)));
            return (seqs, stream);
        }
    }
    panic!("task {task} did not end within 50 follows");
}

#[test]
fn close_early_every_stream_resumes_from_the_processed_cursor() {
    for era in [EraChoice::Modern, EraChoice::Legacy] {
        let client = conformance_server(era, "close-early");
        let task = client
            .start_task("emit", json!({"count": 10, "interval_ms": 20}))
            .expect("emit as a task")
            .task_id;
        let (seqs, stream) = follow_to_the_end(&client, &task, GonePolicy::Fail);
        // emit {count: 10}: the working status, 10 ticks, the terminal status.
        assert_eq!(seqs, (0..12).collect::<Vec<u64>>(), "{era:?}");
        let afters = &stream.stats().afters;
        assert!(
            afters.len() >= 4,
            "closed early at most every 3 events: {afters:?}"
        );
        assert_eq!(afters.first(), Some(&None));
        // RS-08, RS-09: every resume names the last seq processed before it.
        for pair in afters.windows(2) {
            if let [Some(a), Some(b)] = pair {
                assert!(b > a, "{afters:?}");
            }
        }
        assert_eq!(stream.stats().duplicates, 0);
    }
}

#[test]
fn duplicate_on_resume_is_tolerated_and_dropped_by_task_and_seq() {
    let client = conformance_server(EraChoice::Modern, "close-early,duplicate-on-resume");
    let task = client
        .start_task("emit", json!({"count": 10, "interval_ms": 20}))
        .expect("emit as a task")
        .task_id;
    let (seqs, stream) = follow_to_the_end(&client, &task, GonePolicy::Fail);
    // RS-10, RS-11: every event processed once, in order, though resumes repeat two.
    assert_eq!(seqs, (0..12).collect::<Vec<u64>>());
    let resumes = stream.stats().afters.iter().filter(|a| a.is_some()).count() as u64;
    assert!(resumes >= 3, "{:?}", stream.stats().afters);
    assert!(
        stream.stats().duplicates >= 2 * (resumes - 1),
        "{} duplicates over {resumes} resumes",
        stream.stats().duplicates
    );
}

/// Reads the task's stream without `after` (no resume, so no client fault applies) until the
/// result: the task is then terminal.
fn wait_terminal(client: &Client, task: &str) {
    let mut raw = client.open_stream(task, None).expect("open");
    loop {
        match raw.next(WAIT).expect("an item before the deadline") {
            StreamItem::Event(_) => {}
            StreamItem::End(_) => return,
            StreamItem::Error(e) => panic!("stream error {e}"),
            other => panic!("unexpected stream item {other:?}"),
        }
    }
}

/// Follows `task` until the handler has processed seq 2, then stops; waits for the task to
/// end. The cursor is then 2 and seqs 3..=11 are retained.
fn stop_at_seq_2(client: &Client, stream: &mut ResumableStream<MemoryCursorStore>, task: &str) {
    let end = stream
        .follow(client, |e: &TaskEvent| {
            Ok::<_, String>(if e.seq == 2 {
                Flow::Stop
            } else {
                Flow::Continue
            })
        })
        .expect("the first follow");
    assert_eq!(end, FollowEnd::Stopped);
    assert_eq!(stream.cursor(), Some(2));
    wait_terminal(client, task);
}

#[test]
fn gone_on_resume_is_recovered_from_the_earliest_retained_event() {
    for (policy, recovers) in [
        (GonePolicy::ResumeFromEarliest, true),
        (GonePolicy::Fail, false),
    ] {
        let client = conformance_server(EraChoice::Modern, "gone-on-resume");
        let task = client
            .start_task("emit", json!({"count": 10, "interval_ms": 20}))
            .expect("emit as a task")
            .task_id;
        let options = StreamOptions {
            idle_timeout: WAIT,
            gone_policy: policy,
            ..StreamOptions::default()
        };
        let mut stream = ResumableStream::new(task.clone(), MemoryCursorStore::new(), options)
            .expect("a stream");
        stop_at_seq_2(&client, &mut stream, &task);
        let mut seqs = Vec::new();
        let resumed = stream.follow(&client, |e: &TaskEvent| {
            seqs.push(e.seq);
            Ok::<_, String>(Flow::Continue)
        });
        // EG-02: the resume with after = 2 found seq 3 gone (earliestSeq 4).
        if recovers {
            assert!(
                matches!(resumed, Ok(FollowEnd::Completed(_))),
                "{resumed:?}"
            );
            let gone = &stream.stats().gone;
            assert_eq!(gone.len(), 1, "{gone:?}");
            assert_eq!(gone[0].earliest_seq, 4);
            assert_eq!(
                stream.stats().gaps,
                vec![SkippedRange { first: 3, last: 3 }]
            );
            assert_eq!(stream.stats().afters, vec![None, Some(2), Some(3)]);
            assert_eq!(seqs, (4..12).collect::<Vec<u64>>());
        } else {
            assert!(resumed.is_err(), "a fatal gap is an error: {resumed:?}");
            assert!(seqs.is_empty(), "{seqs:?}");
        }
    }
}
