//! Checkpoints over Streamable HTTP (CP-03, CP-04, CP-05): the same answers as on stdio
//! (`server::checkpoints`) from `serve --http --retain-from-checkpoint`.

use serde_json::json;

use super::client::{wait_status, Server, Session};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_over_http_starts_at_the_latest_checkpoint() {
    let server = Server::start(&["--retain-from-checkpoint"]);
    let s = Session::open(&server.url, None).await;
    // 25 ticks, a checkpoint after every 10th: the latest checkpoint is seq 22, the task ends
    // at 28 (server::checkpoints::args).
    let r = s
        .call(
            1,
            "tools/call",
            json!({"name": "emit", "arguments": {"count": 25, "checkpoint_every": 10},
                   "task": {}}),
        )
        .await;
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    wait_status(&s, &task, "completed").await;
    let mut sse = s.stream(2, &task, None).await;
    assert_eq!(sse.status, 200);
    let (first_id, first) = sse.message().await.expect("the first event");
    assert!(first_id.is_some(), "an SSE event id");
    assert_eq!(
        first["params"]["type"], "dev.taskstream.checkpoint",
        "CP-03"
    );
    assert_eq!(first["params"]["seq"], 22, "CP-03");
    assert_eq!(
        first["params"]["payload"],
        json!({"coversThrough": 21, "state": {"ticks": 20}})
    );
    let (rest, end) = sse.rest().await;
    assert_eq!(
        rest,
        (23..=28).collect::<Vec<u64>>(),
        "CP-05: no gap after it"
    );
    assert_eq!(end["result"], json!({}));
    let gone = s
        .call(3, "tasks/stream", json!({"taskId": task, "after": 5}))
        .await;
    assert_eq!(gone["error"]["data"]["earliestSeq"], 22, "CP-04: {gone}");
    let got = s.call(4, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(
        got["result"]["_meta"]["dev.taskstream/events"]["earliestSeq"], 22,
        "CP-04"
    );
}
