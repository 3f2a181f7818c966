//! The client's Streamable HTTP transport (`Client::connect_http`, 2026-07-28) against the
//! real `taskstream serve --http 127.0.0.1:0`: streaming, a cut connection and a resume on a
//! new one while the task runs, cancelling a stream by closing its response, errors.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;
use taskstream_client::{
    Client, ClientError, ClientOptions, EraChoice, Flow, FollowEnd, FollowError, GonePolicy,
    MemoryCursorStore, ResumableStream, StreamItem, StreamOptions, TaskStatus,
};

const WAIT: Duration = Duration::from_secs(20);

/// `taskstream serve --http 127.0.0.1:0`, in memory; killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_taskstream"))
            .args(["serve", "--in-memory", "--durability", "none"])
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx.recv_timeout(WAIT).expect("the listening line");
        Server { child, url }
    }

    fn connect(&self) -> Client {
        Client::connect_http(&self.url, None, ClientOptions::default()).expect("connects")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn options() -> StreamOptions {
    StreamOptions {
        idle_timeout: WAIT,
        gone_policy: GonePolicy::Fail,
        ..StreamOptions::default()
    }
}

#[test]
fn a_cut_connection_resumes_on_a_new_one_while_the_task_runs() {
    let server = Server::start();
    let first = server.connect();
    let task = first
        .start_task("emit", json!({"count": 150, "interval_ms": 10}))
        .expect("a task");
    let mut stream =
        ResumableStream::new(task.task_id.clone(), MemoryCursorStore::new(), options())
            .expect("cursor");
    let mut seqs = Vec::new();
    let end = stream.follow(&first, |e| {
        seqs.push(e.seq);
        if e.seq == 20 {
            first.sever().expect("an HTTP client can be severed");
        }
        Ok::<_, String>(Flow::Continue)
    });
    assert!(
        matches!(end, Err(FollowError::Client(ClientError::Closed { .. }))),
        "{end:?}"
    );
    // Events read before the cut may still have been processed after seq 20.
    let cut = stream.cursor().expect("a cursor");
    assert!(cut >= 20, "{cut}");
    // The severed client is closed for good.
    assert!(matches!(
        first.task_info(&task.task_id),
        Err(ClientError::Closed { .. })
    ));
    // The server and the task went on: a new connection resumes with `after`.
    let second = server.connect();
    let running = second.task_info(&task.task_id).expect("tasks/get");
    assert_eq!(
        running.status,
        TaskStatus::Working,
        "the task outlived the connection"
    );
    let end = stream
        .follow(&second, |e| {
            seqs.push(e.seq);
            Ok::<_, String>(Flow::Continue)
        })
        .expect("the resumed stream ends normally");
    assert!(matches!(end, FollowEnd::Completed(_)));
    assert_eq!(stream.stats().afters, vec![None, Some(cut)]);
    // `emit` logs a status event, then `count` ticks, then the terminal status.
    assert_eq!(
        seqs,
        (0..=151).collect::<Vec<u64>>(),
        "gap-free, nothing twice"
    );
}

#[test]
fn cancelling_a_stream_closes_its_response_and_the_task_runs_on() {
    let server = Server::start();
    let client = server.connect();
    let task = client
        .start_task("emit", json!({"count": 40, "interval_ms": 10}))
        .expect("a task");
    let mut stream = client.open_stream(&task.task_id, None).expect("open");
    for _ in 0..3 {
        assert!(matches!(stream.next(WAIT), Ok(StreamItem::Event(_))));
    }
    stream.cancel().expect("cancel");
    // The same client opens the task's stream again (the old one is gone) and reads it to
    // its end: the task was not cancelled.
    let mut again = client.open_stream(&task.task_id, Some(2)).expect("reopen");
    let mut next = 3;
    let result = loop {
        match again.next(WAIT).expect("an item") {
            StreamItem::Event(e) => {
                assert_eq!(e["seq"], next);
                next += 1;
            }
            StreamItem::End(result) => break result,
            StreamItem::Error(e) => panic!("stream error {e}"),
            other => panic!("unexpected stream item {other:?}"),
        }
    };
    assert_eq!(result, json!({"resultType": "complete"}));
    assert_eq!(next, 42);
    let done = client.task_info(&task.task_id).expect("tasks/get");
    assert_eq!(done.status, TaskStatus::Completed);
}

#[test]
fn http_errors_are_clear() {
    let server = Server::start();
    let client = server.connect();
    // A JSON-RPC error in an HTTP error response reaches the caller as that error.
    match client.task_info("no-such-task") {
        Err(ClientError::Rpc { error, .. }) => assert_eq!(error.code, -32602),
        other => panic!("{other:?}"),
    }
    // The client still works after it.
    assert!(client.list_tools().is_ok());
    let legacy = ClientOptions {
        era: EraChoice::Legacy,
        ..ClientOptions::default()
    };
    assert!(matches!(
        Client::connect_http(&server.url, None, legacy),
        Err(ClientError::Unsupported { .. })
    ));
    assert!(matches!(
        Client::connect_http("https://127.0.0.1:1/mcp", None, ClientOptions::default()),
        Err(ClientError::Unsupported { .. })
    ));
    // Nobody listens on the port any more: the request cannot be sent, and says why.
    let url = server.url.clone();
    drop(client);
    drop(server);
    match Client::connect_http(&url, None, ClientOptions::default()) {
        Err(ClientError::Io(e)) => assert!(e.to_string().contains("connecting"), "{e}"),
        other => panic!("{other:?}"),
    }
}
