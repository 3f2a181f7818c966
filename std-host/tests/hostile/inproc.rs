//! The server in process: [`Connection`] driven with in-memory input and output, as the
//! `server` fuzz target drives it (through [`super::drive`]); and the replay of that target's
//! corpus, which holds the seeds and every input a fuzzer ever found (regressions).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use taskstream_server::Connection;
use taskstream_store::{Store, StoreConfig};

use super::drive;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_server_fuzz_corpus_keeps_every_invariant() {
    let files = corpus("server");
    assert!(files.len() >= 5, "{files:?}");
    for (path, input) in files {
        if let Err(broken) = drive::run(&input) {
            panic!("{}: {broken}", path.display());
        }
    }
}

#[test]
fn the_driver_names_tasks_and_counts_answers() {
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit","arguments":{"count":2},"task":{}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"$T0"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"$T9"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
    ]
    .join("\n");
    let report = drive::run(input.as_bytes()).expect("invariants");
    assert_eq!(report.tasks.len(), 1);
    let answer = |id: i64| {
        report
            .lines
            .iter()
            .find(|l| l["id"] == json!(id))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(answer(3)["result"]["taskId"], json!(report.tasks[0]));
    assert_eq!(answer(4)["error"]["data"]["reason"], json!("unknown_task"));
    assert_eq!(answer(5)["result"], json!({}));
}

#[test]
fn close_stops_running_tasks_and_releases_the_store() {
    let config = drive::config();
    let store = Arc::new(
        Store::open(
            StoreConfig {
                data_dir: None,
                durability: config.durability,
                retention: config.retention,
                max_store_bytes: config.max_store_bytes,
                index_cache_bytes: config.index_cache_bytes,
            },
            taskstream_server::clock::now(),
        )
        .expect("store"),
    );
    let shared: Arc<Store> = Arc::clone(&store);
    let mut conn = Connection::start(config, shared, Box::new(std::io::sink())).expect("start");
    conn.handle_line(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    for id in 2..6 {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"emit","arguments":{{"count":100000,"interval_ms":1000}},"task":{{}}}}}}"#
        );
        conn.handle_line(line.as_bytes());
    }
    // Plain calls too.
    conn.handle_line(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"emit","arguments":{"count":100000,"interval_ms":1000}}}"#);
    conn.close();
    // Every task thread has ended and let go of the store (a plain call's thread may still be
    // unwinding from its cancellation; it holds the store only briefly).
    let end = std::time::Instant::now() + super::client::DEADLINE;
    while Arc::strong_count(&store) > 1 {
        assert!(std::time::Instant::now() < end, "the store is still held");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let running = store
        .tasks()
        .into_iter()
        .filter(|t| !t.record.status.is_terminal())
        .count();
    assert_eq!(
        running, 4,
        "stopped tasks stay running in the store until a restart"
    );
}
