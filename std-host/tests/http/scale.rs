//! A thousand concurrent SSE streams in one process, every one gap-free. Only bounded waits;
//! the memory this takes is measured by `benches/src/bin/http_scale.rs`, not asserted here.

use futures_util::future::join_all;
use serde_json::json;

use super::client::{http, modern, Server, Session, Sse};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_streams_are_gap_free() {
    const TASKS: usize = 10;
    const PER_TASK: usize = 100;
    const EVENTS: u64 = 20;
    let server = Server::start(&["--max-streams", "2048"]);
    let s = Session::open(&server.url, None).await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        tasks.push(s.emit(EVENTS, 50).await);
    }
    let c = http();
    let mut streams = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        for k in 0..PER_TASK {
            let id = i64::try_from(i * PER_TASK + k).expect("id");
            let req = modern(&c, &server.url, id, "tasks/stream", json!({"taskId": task}));
            streams.push(async move {
                let r = req.send().await.expect("send");
                assert_eq!(r.status(), 200);
                Sse::new(r).rest().await
            });
        }
    }
    let results = join_all(streams).await;
    assert_eq!(results.len(), TASKS * PER_TASK);
    let all: Vec<u64> = (0..=EVENTS + 1).collect();
    for (seqs, end) in results {
        assert_eq!(seqs, all);
        assert_eq!(end["result"]["resultType"], "complete");
    }
}
