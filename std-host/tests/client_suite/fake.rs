//! The client against a scripted server (over `std::io::pipe`) that breaks the rules the real
//! server keeps: the client must refuse each break, never accept it silently.

use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};
use taskstream_client::{
    Client, ClientError, ClientOptions, CursorStore, Era, EraChoice, Flow, FollowError, GonePolicy,
    MemoryCursorStore, ResumableStream, StreamOptions, Violation,
};

const WAIT: Duration = Duration::from_secs(10);
const TASK: &str = "task-1";

/// What the script answers to one incoming message: lines to write, or `None` to close the
/// server's output (EOF for the client).
type Script = Box<dyn FnMut(&Value) -> Option<Vec<Value>> + Send>;

struct Fake {
    /// Every message the client sent, as it arrives.
    seen: Receiver<Value>,
    _thread: JoinHandle<()>,
}

impl Fake {
    /// Waits (bounded) for a message the client sends that satisfies `pred`.
    fn expect(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            match self.seen.recv_timeout(WAIT) {
                Ok(m) if pred(&m) => return m,
                Ok(_) => {}
                Err(e) => panic!("the client never sent {what}: {e}"),
            }
        }
    }
}

fn start(era: EraChoice, mut script: Script) -> (Client, Fake) {
    let (client_reader, mut server_writer) = std::io::pipe().expect("pipe");
    let (server_reader, client_writer) = std::io::pipe().expect("pipe");
    let (tx, seen) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        for line in BufReader::new(server_reader).lines() {
            let Ok(line) = line else { return };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let _ = tx.send(message.clone());
            let Some(out) = script(&message) else { return };
            for m in out {
                let mut bytes = serde_json::to_vec(&m).expect("serialise");
                bytes.push(b'\n');
                if server_writer.write_all(&bytes).is_err() {
                    return;
                }
            }
        }
    });
    let options = ClientOptions {
        era,
        request_timeout: Duration::from_secs(2),
        probe_timeout: Duration::from_secs(2),
        ..ClientOptions::default()
    };
    let client = Client::attach(client_reader, client_writer, options).expect("connects");
    (
        client,
        Fake {
            seen,
            _thread: thread,
        },
    )
}

fn method(m: &Value) -> &str {
    m.get("method").and_then(Value::as_str).unwrap_or("")
}

fn discover(m: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": m["id"], "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {"eventStreams": {}}}},
        "ttlMs": 0, "cacheScope": "public"}})
}

fn event(seq: u64) -> Value {
    event_with(seq, json!({"n": seq}), Some(TASK))
}

fn event_with(seq: u64, payload: Value, related: Option<&str>) -> Value {
    let mut params =
        json!({"seq": seq, "taskId": TASK, "type": "dev.test.tick", "payload": payload});
    if let Some(r) = related {
        params["_meta"] = json!({"io.modelcontextprotocol/related-task": {"taskId": r}});
    }
    json!({"jsonrpc": "2.0", "method": "notifications/tasks/event", "params": params})
}

fn end(m: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete"}})
}

fn gone(m: &Value, task: &str, earliest: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32010,
        "message": "Task events are no longer available",
        "data": {"reason": "events_gone", "taskId": task, "earliestSeq": earliest}}})
}

/// A modern server whose `tasks/stream` answers come from `streams`, one closure call per
/// stream request, given the request and its `after`.
fn modern(
    mut streams: impl FnMut(&Value, Option<u64>) -> Option<Vec<Value>> + Send + 'static,
) -> (Client, Fake) {
    start(
        EraChoice::Modern,
        Box::new(move |m| match method(m) {
            "server/discover" => Some(vec![discover(m)]),
            "tasks/stream" => streams(m, m["params"]["after"].as_u64()),
            "tasks/get" => Some(vec![json!({"jsonrpc": "2.0", "id": m["id"],
                "result": {"resultType": "complete", "taskId": TASK, "status": "working"}})]),
            _ => Some(vec![]),
        }),
    )
}

fn follow(
    client: &Client,
    store: &mut MemoryCursorStore,
    policy: GonePolicy,
) -> (Vec<u64>, Result<(), FollowError<String>>) {
    let options = StreamOptions {
        idle_timeout: Duration::from_secs(2),
        gone_policy: policy,
        ..StreamOptions::default()
    };
    let mut stream = ResumableStream::new(TASK, store, options).expect("new");
    let mut seen = Vec::new();
    let result = stream
        .follow(client, |e| {
            seen.push(e.seq);
            Ok::<_, String>(Flow::Continue)
        })
        .map(|_| ());
    (seen, result)
}

#[test]
fn a_gap_is_an_error_and_the_cursor_stays_at_the_last_processed_event() {
    let (client, _fake) = modern(|m, _| Some(vec![event(0), event(1), event(3), end(m)]));
    let mut store = MemoryCursorStore::new();
    let (seen, result) = follow(&client, &mut store, GonePolicy::ResumeFromEarliest);
    assert_eq!(seen, vec![0, 1]);
    assert!(
        matches!(
            result,
            Err(FollowError::Gap {
                expected: 2,
                got: 3,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(store.load(TASK).expect("load"), Some(1));
}

#[test]
fn related_task_meta_is_required_and_must_match() {
    let (client, _fake) =
        modern(|m, _| Some(vec![event(0), event_with(1, json!({}), None), end(m)]));
    let (seen, result) = follow(&client, &mut MemoryCursorStore::new(), GonePolicy::Fail);
    assert_eq!(seen, vec![0]);
    assert!(
        matches!(
            result,
            Err(FollowError::Violation(Violation::MissingRelatedTask {
                seq: 1
            }))
        ),
        "NT-01: {result:?}"
    );

    let (client, _fake) =
        modern(|m, _| Some(vec![event_with(0, json!({}), Some("other")), end(m)]));
    let (seen, result) = follow(&client, &mut MemoryCursorStore::new(), GonePolicy::Fail);
    assert!(seen.is_empty());
    assert!(
        matches!(
            result,
            Err(FollowError::Violation(Violation::RelatedTaskMismatch {
                seq: 0,
                ..
            }))
        ),
        "NT-02: {result:?}"
    );
}

#[test]
fn duplicates_are_dropped_but_a_changed_duplicate_is_refused() {
    // First stream: 0, 1, 2. Second (after 2): the server (wrongly) starts at 1 again; the
    // duplicate 1..=2 is dropped, then 3. Third: seq 3 again with another payload.
    let mut calls = 0;
    let (client, _fake) = modern(move |m, after| {
        calls += 1;
        Some(match (calls, after) {
            (1, None) => vec![event(0), event(1), event(2), end(m)],
            (2, Some(2)) => vec![event(1), event(2), event(3), end(m)],
            (3, Some(3)) => vec![event_with(3, json!({"n": "changed"}), Some(TASK)), end(m)],
            _ => vec![end(m)],
        })
    });
    let mut store = MemoryCursorStore::new();
    let options = StreamOptions {
        idle_timeout: Duration::from_secs(2),
        ..StreamOptions::default()
    };
    let mut stream = ResumableStream::new(TASK, &mut store, options).expect("new");
    let mut seen = Vec::new();
    let mut handler = |e: &taskstream_client::TaskEvent| {
        seen.push(e.seq);
        Ok::<_, String>(Flow::Continue)
    };
    stream.follow(&client, &mut handler).expect("first");
    stream.follow(&client, &mut handler).expect("second");
    assert_eq!(stream.stats().duplicates, 2, "RS-10, RS-11");
    let err = stream
        .follow_from(&client, taskstream_client::StartAt::After(3), &mut handler)
        .expect_err("changed");
    assert!(
        matches!(err, FollowError::Violation(Violation::BadEvent { ref detail }) if detail.contains("EV-08")),
        "{err}"
    );
    assert_eq!(seen, vec![0, 1, 2, 3]);
}

#[test]
fn events_gone_is_checked_before_it_is_trusted() {
    // events_gone naming another task.
    let (client, _fake) = modern(|m, _| Some(vec![gone(m, "other", 5)]));
    let mut store = MemoryCursorStore::new();
    store.save(TASK, 1).expect("save");
    let (_, result) = follow(&client, &mut store, GonePolicy::ResumeFromEarliest);
    assert!(
        matches!(
            result,
            Err(FollowError::Violation(Violation::BadEventsGone { .. }))
        ),
        "{result:?}"
    );
    // events_gone whose earliestSeq leaves no gap after the cursor.
    let (client, _fake) = modern(|m, _| Some(vec![gone(m, TASK, 2)]));
    let (_, result) = follow(&client, &mut store, GonePolicy::ResumeFromEarliest);
    assert!(
        matches!(
            result,
            Err(FollowError::Violation(Violation::BadEventsGone { .. }))
        ),
        "{result:?}"
    );
    // After recovering to earliestSeq 5, an event below it is out of order.
    let (client, _fake) = modern(|m, after| {
        Some(match after {
            Some(1) => vec![gone(m, TASK, 5)],
            _ => vec![event(3), end(m)],
        })
    });
    let (seen, result) = follow(&client, &mut store, GonePolicy::ResumeFromEarliest);
    assert!(seen.is_empty());
    assert!(
        matches!(
            result,
            Err(FollowError::OutOfOrder {
                expected: 5,
                got: 3,
                ..
            })
        ),
        "{result:?}"
    );
    // A server that keeps answering events_gone is given up on after max_gone_recoveries.
    let mut earliest = 5;
    let (client, _fake) = modern(move |m, _| {
        earliest += 10;
        Some(vec![gone(m, TASK, earliest)])
    });
    let (_, result) = follow(&client, &mut store, GonePolicy::ResumeFromEarliest);
    assert!(
        matches!(result, Err(FollowError::EventsGone(_))),
        "{result:?}"
    );
}

#[test]
fn a_silent_stream_times_out_and_is_cancelled() {
    let (client, fake) = modern(|_, _| Some(vec![event(0)]));
    let (seen, result) = follow(&client, &mut MemoryCursorStore::new(), GonePolicy::Fail);
    assert_eq!(seen, vec![0]);
    assert!(
        matches!(
            result,
            Err(FollowError::Client(ClientError::Timeout { .. }))
        ),
        "{result:?}"
    );
    let request = fake.expect("tasks/stream", |m| method(m) == "tasks/stream");
    let cancel = fake.expect("notifications/cancelled", |m| {
        method(m) == "notifications/cancelled"
    });
    assert_eq!(cancel["params"]["requestId"], request["id"], "TS-08");
    // Reopening the task's stream on this connection makes a barrier round trip first.
    let _stream = client.open_stream(TASK, Some(0)).expect("reopen");
    fake.expect("the tasks/get barrier", |m| method(m) == "tasks/get");
    fake.expect("the new tasks/stream", |m| method(m) == "tasks/stream");
}

#[test]
fn eof_mid_stream_is_a_closed_connection_with_the_cursor_kept() {
    let (client, _fake) = start(
        EraChoice::Modern,
        Box::new(|m| match method(m) {
            "server/discover" => Some(vec![discover(m)]),
            // Two events; then the next message the client sends closes the output.
            "tasks/stream" => Some(vec![event(0), event(1)]),
            _ => None,
        }),
    );
    let mut store = MemoryCursorStore::new();
    let options = StreamOptions {
        idle_timeout: WAIT,
        ..StreamOptions::default()
    };
    let mut stream = ResumableStream::new(TASK, &mut store, options).expect("new");
    let result = stream.follow(&client, |e| {
        if e.seq == 1 {
            // Any request makes the script close its output.
            let _ = client.notify("notifications/bye", json!({}));
        }
        Ok::<_, String>(Flow::Continue)
    });
    assert!(
        matches!(result, Err(FollowError::Client(ClientError::Closed { .. }))),
        "{result:?}"
    );
    assert_eq!(stream.cursor(), Some(1));
    assert!(!client.is_connected());
}

#[test]
fn unrouted_events_and_junk_lines_are_kept_aside() {
    // No stream is open for this task: the event must not be delivered, nor lost silently.
    let (client, _fake) = start(
        EraChoice::Modern,
        Box::new(|m| match method(m) {
            "server/discover" => Some(vec![discover(m)]),
            "tasks/get" => Some(vec![
                event(7),
                json!("not an object"),
                json!({"jsonrpc": "2.0", "id": m["id"], "result": {"taskId": TASK, "status": "working"}}),
            ]),
            _ => Some(vec![]),
        }),
    );
    let before = client.unsolicited_count();
    client.task_info(TASK).expect("tasks/get");
    assert_eq!(client.unsolicited_count() - before, 2);
    let kept = client.take_unsolicited();
    assert_eq!(kept[0]["params"]["seq"], json!(7));
}

#[test]
fn probe_falls_back_to_initialize_when_discover_is_unknown() {
    let (client, fake) = start(
        EraChoice::Probe,
        Box::new(|m| match method(m) {
            "server/discover" => Some(vec![json!({"jsonrpc": "2.0", "id": m["id"],
                "error": {"code": -32601, "message": "Method not found"}})]),
            "initialize" => Some(vec![json!({"jsonrpc": "2.0", "id": m["id"], "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tasks": {"eventStreams": {}}},
                "serverInfo": {"name": "old", "version": "1"}}})]),
            _ => Some(vec![]),
        }),
    );
    assert_eq!(client.era(), Era::Legacy);
    assert_eq!(client.server_info().name.as_deref(), Some("old"));
    assert!(client.server_info().event_streams);
    fake.expect("notifications/initialized", |m| {
        method(m) == "notifications/initialized"
    });
}

#[test]
fn a_request_without_answer_times_out() {
    let (client, _fake) = start(
        EraChoice::Modern,
        Box::new(|m| match method(m) {
            "server/discover" => Some(vec![discover(m)]),
            _ => Some(vec![]),
        }),
    );
    let err = client.task_info(TASK).expect_err("no answer");
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    // Modern requests carry the required _meta (DX-05).
    let (client, fake) = modern(|m, _| Some(vec![end(m)]));
    let _ = client.task_info(TASK);
    let get = fake.expect("tasks/get", |m| method(m) == "tasks/get");
    let meta = &get["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        json!("2026-07-28")
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"],
        json!({})
    );
}
