//! The public tool API (`taskstream_server::tool`, `taskstream_server::ServerBuilder`), driven in process over
//! a pipe: a handler that panics ends its task failed and the server serves on; an append with
//! an expected seq is never recorded twice; cancellation reaches a waiting handler; progress
//! becomes events in a task and notifications in a plain call.

use std::io::Write;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use taskstream_server::tool::{AskError, Step, Steps, TaskContext, Tool, ToolError, ToolResult};
use taskstream_server::ServerBuilder;

const DEADLINE: Duration = Duration::from_secs(30);

/// Collects the server's output lines.
struct Lines {
    tx: Sender<Value>,
    buf: Vec<u8>,
}

impl Write for Lines {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        while let Some(at) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=at).collect();
            let v: Value = serde_json::from_slice(&line).map_err(std::io::Error::other)?;
            let _ = self.tx.send(v);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Client {
    input: Option<std::io::PipeWriter>,
    out: Receiver<Value>,
    seen: Vec<Value>,
    server: Option<std::thread::JoinHandle<()>>,
    next: i64,
}

fn tools() -> Vec<Tool> {
    let object = json!({"type": "object"});
    vec![
        Tool::new(
            "boom",
            "Panics after one event",
            object.clone(),
            |ctx, _| {
                ctx.emit("com.example.test.before", &json!({}))?;
                panic!("deliberate panic in a tool handler");
            },
        ),
        Tool::new(
            "cas",
            "Appends with an expected seq, twice",
            object.clone(),
            |ctx, _| {
                let first = ctx.emit_expecting(1, "com.example.test.once", &json!({"n": 1}))?;
                // The retry of an append that landed: refused, nothing appended.
                let retry = ctx.emit_expecting(1, "com.example.test.once", &json!({"n": 1}));
                let next = match retry {
                    Err(ToolError::SeqMismatch { expected: 1, next }) => next,
                    other => return Err(ToolError::failed(format!("retry gave {other:?}"))),
                };
                let second = ctx.emit_expecting(next, "com.example.test.once", &json!({"n": 2}))?;
                Ok(ToolResult::text(format!("{first} {next} {second}")))
            },
        ),
        Tool::new(
            "wait",
            "Waits for cancellation",
            object.clone(),
            |ctx, _| {
                ctx.emit("com.example.test.waiting", &json!({}))?;
                while !ctx.wait_cancelled(Duration::from_millis(50)) {}
                Err(ToolError::Cancelled)
            },
        ),
        Tool::new(
            "confirm",
            "Asks its client to confirm",
            object.clone(),
            |ctx, _| {
                let answer = ctx.ask(
                    "elicitation/create",
                    json!({"message": "go?", "requestedSchema": {"type": "object"}}),
                    Duration::from_secs(30),
                );
                Ok(ToolResult::text(match answer {
                    Ok(a) => format!("answer: {}", a["action"].as_str().unwrap_or("none")),
                    Err(AskError::Cancelled) => return Err(ToolError::Cancelled),
                    Err(e) => format!("no answer: {e}"),
                }))
            },
        ),
        Tool::stepped(
            "sleeper",
            "Emits one event, then waits an hour without a thread",
            object.clone(),
            |_| {
                let mut first = true;
                Box::new(move |ctx: &mut TaskContext<'_>| {
                    if !first {
                        return Ok(Step::Done(ToolResult::text("woke")));
                    }
                    first = false;
                    ctx.emit("com.example.test.parked", &json!({}))?;
                    Ok(Step::WakeAt(Instant::now() + Duration::from_secs(3600)))
                }) as Box<dyn Steps>
            },
        ),
        Tool::stepped(
            "ticks",
            "Three events 10 ms apart, a step each",
            object.clone(),
            |_| {
                let mut n = 0;
                Box::new(move |ctx: &mut TaskContext<'_>| {
                    ctx.emit("com.example.test.tick", &json!({ "n": n }))?;
                    n += 1;
                    Ok(if n == 3 {
                        Step::Done(ToolResult::text(format!("{n} ticks")))
                    } else {
                        Step::WakeAt(Instant::now() + Duration::from_millis(10))
                    })
                }) as Box<dyn Steps>
            },
        ),
        Tool::stepped(
            "boom_step",
            "Panics in its second step",
            object.clone(),
            |_| {
                let mut first = true;
                Box::new(move |ctx: &mut TaskContext<'_>| {
                    if first {
                        first = false;
                        ctx.emit("com.example.test.before", &json!({}))?;
                        return Ok(Step::WakeAt(Instant::now()));
                    }
                    panic!("deliberate panic in a step");
                }) as Box<dyn Steps>
            },
        ),
        Tool::new(
            "checkpointer",
            "Two events, a checkpoint, then a checkpoint too big to store",
            object.clone(),
            |ctx, _| {
                ctx.emit("com.example.test.line", &json!({"n": 1}))?;
                ctx.emit("com.example.test.line", &json!({"n": 2}))?;
                ctx.checkpoint(&json!({"lines": 2}))?;
                let huge = json!({"text": "x".repeat(70_000)});
                let too_big = match ctx.checkpoint(&huge) {
                    Err(ToolError::Failed(m)) => m,
                    other => return Err(ToolError::failed(format!("too big gave {other:?}"))),
                };
                let not_object = match ctx.checkpoint(&json!([1])) {
                    Err(ToolError::Failed(m)) => m,
                    other => return Err(ToolError::failed(format!("array gave {other:?}"))),
                };
                Ok(ToolResult::text(format!("{too_big} | {not_object}")))
            },
        ),
        Tool::new("steps", "Reports progress", object, |ctx, _| {
            for i in 1..=3 {
                ctx.progress(f64::from(i), Some(3.0), Some("step"))?;
            }
            Ok(ToolResult::text("done"))
        }),
    ]
}

/// `params` of a 2026-07-28 request that declares the Tasks extension.
fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    });
    params
}

impl Client {
    fn start() -> Client {
        let mut c = Client::start_modern();
        let init = c.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "tool-api-test");
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    /// A client that sends 2026-07-28 requests (no `initialize`).
    fn start_modern() -> Client {
        let (reader, writer) = std::io::pipe().expect("pipe");
        let (tx, out) = channel();
        let builder = tools().into_iter().fold(
            ServerBuilder::new("tool-api-test", "0"),
            ServerBuilder::tool,
        );
        let mut builder = builder;
        builder.config_mut().durability = taskstream_store::Durability::None;
        let output = Box::new(Lines {
            tx,
            buf: Vec::new(),
        });
        let server = std::thread::spawn(move || {
            builder.serve_io(reader, output).expect("serve");
        });
        Client {
            input: Some(writer),
            out,
            seen: Vec::new(),
            server: Some(server),
            next: 1,
        }
    }

    fn send(&mut self, v: &Value) {
        let w = self.input.as_mut().expect("input open");
        writeln!(w, "{v}").expect("write");
    }

    fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn recv(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.seen.iter().position(&pred) {
            return self.seen.remove(at);
        }
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("no {what} within {DEADLINE:?}; seen {:?}", self.seen),
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.recv(&format!("answer {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    /// Calls `tool` as a task; its id.
    fn task(&mut self, tool: &str) -> String {
        let r = self.call(
            "tools/call",
            json!({"name": tool, "arguments": {}, "task": {}}),
        );
        r["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task in {r}"))
            .to_owned()
    }

    /// The task's whole stream (it must end), as (type, payload) pairs in seq order.
    fn stream(&mut self, task: &str) -> Vec<(String, Value)> {
        let id = self.request("tasks/stream", json!({"taskId": task}));
        let mut events = Vec::new();
        loop {
            let v = self.recv("a stream frame", |v| {
                v["id"] == id
                    || v["params"]["taskId"] == task && v["method"] == "notifications/tasks/event"
            });
            if v["id"] == id {
                assert!(v.get("result").is_some(), "stream ended with {v}");
                return events;
            }
            assert_eq!(v["params"]["seq"], events.len() as u64, "seqs are gap-free");
            events.push((
                v["params"]["type"].as_str().unwrap_or_default().to_owned(),
                v["params"]["payload"].clone(),
            ));
        }
    }

    fn status(&mut self, task: &str) -> Value {
        self.call("tasks/get", json!({"taskId": task}))["result"].clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.input = None;
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
    }
}

#[test]
fn a_panicking_handler_fails_its_task_and_the_server_serves_on() {
    let mut c = Client::start();
    let task = c.task("boom");
    let events = c.stream(&task);
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "dev.taskstream.task.status",
            "com.example.test.before",
            "dev.taskstream.task.status"
        ]
    );
    assert_eq!(events[2].1["status"], "failed");
    let got = c.status(&task);
    assert_eq!(got["status"], "failed");
    let message = got["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("failed unexpectedly"), "{message}");
    assert!(
        !message.contains("deliberate"),
        "the panic's text stays in the log: {message}"
    );
    // A plain call that panics answers a tool error, and the server still serves.
    let plain = c.call("tools/call", json!({"name": "boom", "arguments": {}}));
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert_eq!(c.call("ping", json!({}))["result"], json!({}));
    let again = c.task("cas");
    assert_eq!(c.stream(&again).len(), 4);
}

#[test]
fn an_append_with_an_expected_seq_is_never_recorded_twice() {
    let mut c = Client::start();
    let task = c.task("cas");
    let events = c.stream(&task);
    let ours = payloads(&events, "com.example.test.once");
    assert_eq!(ours, [&json!({"n": 1}), &json!({"n": 2})]);
    let result = c.call("tasks/result", json!({"taskId": task}));
    assert_eq!(result["result"]["content"][0]["text"], "1 2 2");
}

#[test]
fn cancellation_reaches_a_waiting_handler() {
    let mut c = Client::start();
    let task = c.task("wait");
    let id = c.request("tasks/stream", json!({"taskId": task}));
    c.recv("the waiting event", |v| {
        v["params"]["type"] == "com.example.test.waiting"
    });
    let cancelled = c.call("tasks/cancel", json!({"taskId": task}));
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let end = c.recv("the stream's end", |v| v["id"] == id);
    assert!(end.get("result").is_some());
    assert_eq!(c.status(&task)["status"], "cancelled");
}

#[test]
fn progress_is_an_event_in_a_task_and_a_notification_in_a_plain_call() {
    let mut c = Client::start();
    let task = c.task("steps");
    let events = c.stream(&task);
    let progress = payloads(&events, taskstream_server::tool::PROGRESS_TYPE);
    assert_eq!(progress.len(), 3);
    assert_eq!(
        progress[2],
        &json!({"progress": 3.0, "total": 3.0, "message": "step"})
    );
    let id = c.request(
        "tools/call",
        json!({"name": "steps", "arguments": {}, "_meta": {"progressToken": "p"}}),
    );
    let answer = c.recv("the plain answer", |v| v["id"] == id);
    assert_eq!(answer["result"]["content"][0]["text"], "done");
    let notes: Vec<Value> = c
        .seen
        .iter()
        .filter(|v| v["method"] == "notifications/progress")
        .cloned()
        .collect();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert_eq!(notes[0]["params"]["progressToken"], "p");
    assert_eq!(notes[2]["params"]["progress"], 3.0);
}

#[test]
fn a_handler_asks_its_client_in_each_era() {
    // 2025-11-25: the request reaches the session, and its answer the handler.
    let mut c = Client::start();
    let task = c.task("confirm");
    let ask = c.recv("the request", |v| v["method"] == "elicitation/create");
    assert_eq!(ask["params"]["message"], "go?");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}));
    let result = c.call("tasks/result", json!({"taskId": task}));
    assert_eq!(result["result"]["content"][0]["text"], "answer: accept");
    // A plain call asks its own client; the client's error is the handler's.
    let id = c.request("tools/call", json!({"name": "confirm", "arguments": {}}));
    let ask = c.recv("the request", |v| v["method"] == "elicitation/create");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "busy"}}));
    let answer = c.recv("the plain answer", |v| v["id"] == id);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "no answer: the client refused: busy"
    );

    // 2026-07-28: the task is input_required until tasks/update answers.
    let mut m = Client::start_modern();
    let created = m.call(
        "tools/call",
        modern(json!({"name": "confirm", "arguments": {}})),
    );
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task in {created}"))
        .to_owned();
    let stream = m.request("tasks/stream", modern(json!({"taskId": task})));
    m.recv("the input_required event", |v| {
        v["params"]["payload"]["status"] == "input_required"
    });
    let got = m.call("tasks/get", modern(json!({"taskId": task})))["result"].clone();
    assert_eq!(got["status"], "input_required", "{got}");
    let (key, request) = got["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .unwrap_or_else(|| panic!("no input request in {got}"));
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "go?");
    let update = json!({"taskId": task, "inputResponses": {key.clone(): {"action": "decline"}}});
    let ack = m.call("tasks/update", modern(update));
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let end = m.recv("the stream's end", |v| v["id"] == stream);
    assert!(end.get("result").is_some(), "{end}");
    let got = m.call("tasks/get", modern(json!({"taskId": task})))["result"].clone();
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["result"]["content"][0]["text"], "answer: decline");
    // A plain 2026-07-28 call cannot be asked: the handler is told why.
    let plain = m.call("tools/call", {
        let mut p = modern(json!({"name": "confirm", "arguments": {}}));
        p["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        p
    });
    let text = plain["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("no answer: the client of this call cannot be asked"),
        "{plain}"
    );
}

/// The payloads of the events of type `event_type`, in seq order.
fn payloads<'a>(events: &'a [(String, Value)], event_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(t, _)| t == event_type)
        .map(|(_, p)| p)
        .collect()
}

/// The threads of this test process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|n| n.starts_with(prefix))
        })
        .count()
}

#[test]
fn tasks_of_a_stepped_tool_wait_without_a_thread_and_cancel_at_once() {
    let mut c = Client::start();
    let tasks: Vec<String> = (0..300).map(|_| c.task("sleeper")).collect();
    // Every task has run its first step and is parked, an hour from its next one.
    for task in &tasks {
        let id = c.request("tasks/stream", json!({"taskId": task}));
        c.recv("the parked event", |v| {
            v["params"]["taskId"] == task.as_str()
                && v["params"]["type"] == "com.example.test.parked"
        });
        c.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": id}}),
        );
    }
    for task in tasks.iter().step_by(50) {
        assert_eq!(c.status(task)["status"], "working");
    }
    // A thread per task would be 300 `task-…` threads; other tests of this binary run a few.
    let task_threads = threads_named("task-");
    assert!(
        task_threads < 50,
        "{task_threads} task threads for 300 parked tasks"
    );
    let pool = threads_named("taskstream-step");
    assert!((1..=8 * 6).contains(&pool), "{pool} step workers");
    // A cancellation reaches a parked task at once, not an hour later.
    let id = c.request("tasks/stream", json!({"taskId": tasks[7]}));
    let cancelled = c.call("tasks/cancel", json!({"taskId": tasks[7]}));
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let end = c.recv("the stream's end", |v| v["id"] == id);
    assert!(end.get("result").is_some(), "{end}");
    assert_eq!(c.status(&tasks[7])["status"], "cancelled");
    assert_eq!(c.status(&tasks[8])["status"], "working");
}

#[test]
fn a_stepped_tool_serves_tasks_and_plain_calls_and_a_panicking_step_fails_its_task() {
    let mut c = Client::start();
    let task = c.task("ticks");
    let events = c.stream(&task);
    let ticks = payloads(&events, "com.example.test.tick");
    assert_eq!(
        ticks,
        [&json!({"n": 0}), &json!({"n": 1}), &json!({"n": 2})]
    );
    let result = c.call("tasks/result", json!({"taskId": task}));
    assert_eq!(result["result"]["content"][0]["text"], "3 ticks");
    let plain = c.call("tools/call", json!({"name": "ticks", "arguments": {}}));
    assert_eq!(plain["result"]["content"][0]["text"], "3 ticks", "{plain}");

    let task = c.task("boom_step");
    let events = c.stream(&task);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[2].1["status"], "failed");
    let message = c.status(&task)["statusMessage"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("failed unexpectedly"), "{message}");
    assert!(!message.contains("deliberate"), "{message}");
    assert_eq!(c.call("ping", json!({}))["result"], json!({}));
}

#[test]
fn a_checkpoint_covers_the_event_before_it_and_one_too_big_is_refused_whole() {
    // CP-01, CP-07: the checkpoint's coversThrough is the seq just before it; a checkpoint
    // above --max-payload-bytes is refused to the tool with a clear error, and nothing of it
    // is stored.
    let mut c = Client::start();
    let task = c.task("checkpointer");
    let events = c.stream(&task);
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "dev.taskstream.task.status",
            "com.example.test.line",
            "com.example.test.line",
            "dev.taskstream.checkpoint",
            "dev.taskstream.task.status"
        ]
    );
    assert_eq!(
        events[3].1,
        json!({"coversThrough": 2, "state": {"lines": 2}})
    );
    assert_eq!(events[4].1["status"], "completed");
    let result = c.call("tasks/result", json!({"taskId": task}));
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("checkpoint refused: ") && text.contains("65536"),
        "{text}"
    );
    assert!(text.contains("must be a JSON object"), "{text}");
}
