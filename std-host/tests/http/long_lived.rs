//! Tasks that outlive the connection that created them (docs/interface.md, "Added 2026-12-01").

use std::time::Duration;

use serde_json::json;

use super::client::{http, modern, wait_status, Server, Session, Sse};

/// Legacy era: the client drops its stream mid-task, the task runs on, and a new session (a new
/// connection) resumes with `after` while events are still produced: no gap, no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_resumes_on_a_new_one_while_the_task_runs() {
    let server = Server::start(&[]);
    let first = Session::open(&server.url, None).await;
    let task = first.emit(30, 40).await;
    let mut sse = first.stream(7, &task, None).await;
    assert_eq!(sse.status, 200);
    assert!(sse.content_type.starts_with("text/event-stream"));
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let (_, m) = sse.message().await.expect("an event");
        seen.push(m["params"]["seq"].as_u64().expect("seq"));
    }
    assert_eq!(seen, [0, 1, 2, 3]);
    // The connection goes away: the response and the whole session.
    drop(sse);
    drop(first);
    let second = Session::open(&server.url, None).await;
    // SEP-2694: the task did not die with the connection.
    assert_eq!(second.status(&task).await, "working");
    let mut sse = second.stream(8, &task, Some(3)).await;
    let (rest, end) = sse.rest().await;
    assert_eq!(end, json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    let expected: Vec<u64> = (4..=31).collect();
    assert_eq!(
        rest, expected,
        "gap-free, no duplicate, up to the terminal status event"
    );
    assert_eq!(second.status(&task).await, "completed");
}

/// Modern era: each POST is its own connection; a closed `tasks/stream` response cancels
/// that stream only, and a later one resumes with `after`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_streams_close_and_resume_while_the_task_runs() {
    let server = Server::start(&[]);
    let c = http();
    let created: serde_json::Value = modern(
        &c,
        &server.url,
        1,
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 20, "interval_ms": 40}}),
    )
    .send()
    .await
    .expect("send")
    .json()
    .await
    .expect("json");
    assert_eq!(created["result"]["resultType"], "task");
    let task = created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let r = modern(&c, &server.url, 2, "tasks/stream", json!({"taskId": task}))
        .send()
        .await
        .expect("send");
    assert_eq!(
        r.headers()
            .get("x-accel-buffering")
            .and_then(|v| v.to_str().ok()),
        Some("no")
    );
    let mut sse = Sse::new(r);
    for want in 0..3u64 {
        let (id, m) = sse.message().await.expect("event");
        assert_eq!(id, None, "the modern era has no SSE resumability");
        assert_eq!(m["params"]["seq"], want);
    }
    drop(sse);
    let get: serde_json::Value = modern(&c, &server.url, 3, "tasks/get", json!({"taskId": task}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(get["result"]["status"], "working");
    let r = modern(
        &c,
        &server.url,
        4,
        "tasks/stream",
        json!({"taskId": task, "after": 2}),
    )
    .send()
    .await
    .expect("send");
    let (rest, end) = Sse::new(r).rest().await;
    assert_eq!(rest, (3..=21).collect::<Vec<u64>>());
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(end["id"], 4);
}

/// Two clients follow one task, one fast and one slow: both get every event in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_at_different_speeds_on_one_task() {
    let server = Server::start(&[]);
    let a = Session::open(&server.url, None).await;
    let b = Session::open(&server.url, None).await;
    let task = a.emit(25, 10).await;
    let mut fast = a.stream(1, &task, None).await;
    let mut slow = b.stream(1, &task, None).await;
    let fast = tokio::spawn(async move { fast.rest().await });
    let slow = tokio::spawn(async move {
        let mut seqs = Vec::new();
        loop {
            // A slow reader: the server must neither drop nor reorder for it.
            tokio::time::sleep(Duration::from_millis(15)).await;
            let (_, m) = slow.message().await.expect("message");
            if m.get("method").is_none() {
                return (seqs, m);
            }
            seqs.push(m["params"]["seq"].as_u64().expect("seq"));
        }
    });
    let (f, fend) = fast.await.expect("fast");
    let (s, send) = slow.await.expect("slow");
    let all: Vec<u64> = (0..=26).collect();
    assert_eq!(f, all);
    assert_eq!(s, all);
    assert_eq!(fend["result"], json!({}));
    assert_eq!(send["result"], json!({}));
}

/// A client that joins after the task ended replays it from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_replays() {
    let server = Server::start(&[]);
    let a = Session::open(&server.url, None).await;
    let task = a.emit(5, 0).await;
    wait_status(&a, &task, "completed").await;
    let late = Session::open(&server.url, None).await;
    let (seqs, end) = late.stream(3, &task, None).await.rest().await;
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(end["id"], 3);
}

/// 2025-11-25: the `tasks/stream` response carries a priming event with `retry` and `id:`s;
/// a `GET` with `Last-Event-ID` resumes right after that event, as `after` would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_that_stream() {
    let server = Server::start(&[]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(12, 30).await;
    let mut sse = s.stream(42, &task, None).await;
    let priming = sse.next().await.expect("priming event");
    assert!(priming.data.is_empty());
    assert_eq!(priming.retry, Some(1000));
    let stream_no = priming
        .id
        .as_deref()
        .and_then(|i| i.strip_suffix("-p"))
        .expect("a priming id N-p")
        .to_owned();
    let mut last = None;
    for want in 0..3u64 {
        let (id, m) = sse.message().await.expect("event");
        assert_eq!(m["params"]["seq"], want);
        assert_eq!(id.as_deref(), Some(format!("{stream_no}-{want}").as_str()));
        last = id;
    }
    drop(sse);
    let mut resumed = s.resume(last.as_deref().expect("an id")).await;
    assert_eq!(resumed.status, 200);
    let (seqs, end) = resumed.rest().await;
    assert_eq!(seqs, (3..=13).collect::<Vec<u64>>());
    // The answer belongs to the original request.
    assert_eq!(end, json!({"jsonrpc": "2.0", "id": 42, "result": {}}));
}

/// EG-01 over `Last-Event-ID`: when the events after that id are gone, the resumed stream
/// carries `events_gone` for the original request — never an empty 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_behind_retention_gets_events_gone() {
    let server = Server::start(&["--max-events-per-task", "4"]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(30, 20).await;
    let mut sse = s.stream(9, &task, None).await;
    let priming = sse.next().await.expect("priming");
    let n = priming.id.expect("id").trim_end_matches("-p").to_owned();
    let (id, _) = sse.message().await.expect("event 0");
    assert_eq!(id, Some(format!("{n}-0")));
    drop(sse);
    wait_status(&s, &task, "completed").await;
    let mut resumed = s.resume(&format!("{n}-0")).await;
    assert_eq!(resumed.status, 200);
    let (seqs, end) = resumed.rest().await;
    assert!(seqs.is_empty(), "{seqs:?}");
    assert_eq!(end["id"], 9);
    assert_eq!(end["error"]["code"], -32010);
    assert_eq!(end["error"]["data"]["taskId"], task.as_str());
    assert_eq!(end["error"]["data"]["earliestSeq"], 28);
}

/// `DELETE` ends the session, not its tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_session_not_its_tasks() {
    let server = Server::start(&[]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(10, 30).await;
    let r =
        s.c.delete(&s.url)
            .header("mcp-session-id", &s.id)
            .send()
            .await
            .expect("delete");
    assert_eq!(r.status(), 200);
    let gone = s
        .post(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .send()
        .await
        .expect("send");
    assert_eq!(gone.status(), 404, "the session is over");
    let other = Session::open(&server.url, None).await;
    assert_eq!(other.status(&task).await, "working");
    wait_status(&other, &task, "completed").await;
}

/// TS-08 / DX-04 over HTTP: `notifications/cancelled` for a session's `tasks/stream` ends that
/// SSE response without a response message; the task runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_stream_ends_without_a_response_and_the_task_runs_on() {
    let server = Server::start(&[]);
    let s = Session::open(&server.url, None).await;
    let task = s.emit(40, 30).await;
    let mut sse = s.stream(11, &task, None).await;
    for want in 0..2u64 {
        let (_, m) = sse.message().await.expect("event");
        assert_eq!(m["params"]["seq"], want);
    }
    let r = s
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 11}}),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 202);
    while let Some((_, m)) = sse.message().await {
        assert_eq!(
            m["method"], "notifications/tasks/event",
            "only events already in flight, never a response: {m}"
        );
    }
    assert_eq!(s.status(&task).await, "working");
    // The same session may stream the task again at once.
    let (seqs, end) = s.stream(12, &task, Some(1)).await.rest().await;
    assert_eq!(seqs, (2..=41).collect::<Vec<u64>>());
    assert_eq!(end["id"], 12);
}

/// 2025-11-25: the session's `GET` stream carries `notifications/tasks/status` when a task of
/// the session's principal ends (SEP-1686); a second `GET` stream is refused (409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_carries_status_notifications() {
    let server = Server::start(&[]);
    let s = Session::open(&server.url, None).await;
    let r =
        s.c.get(&s.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &s.id)
            .send()
            .await
            .expect("get");
    let mut get = Sse::new(r);
    assert_eq!(get.status, 200);
    let second =
        s.c.get(&s.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &s.id)
            .send()
            .await
            .expect("get");
    assert_eq!(second.status(), 409);
    let task = s.emit(2, 0).await;
    let (_, m) = get.message().await.expect("a notification");
    assert_eq!(m["method"], "notifications/tasks/status");
    assert_eq!(m["params"]["taskId"], task.as_str());
    assert_eq!(m["params"]["status"], "completed");
}
