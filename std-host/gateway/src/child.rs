//! The stdio MCP server behind the gateway (`CMD`): one child process, its stdin shared by
//! every caller, and a reader thread that routes what it writes: answers to the request that
//! asked, `notifications/progress` to the call that owns the `progressToken`, log messages and
//! task events to the one call in flight (the only way to tie them on stdio), and everything
//! else to the log. Nothing `CMD` writes can stop the reader: a line that is not JSON-RPC, an
//! answer to no request (or a second one), a notification for a call that does not exist are
//! logged and dropped.
//!
//! Requests `CMD` makes of its client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) go to the one call in flight, which asks its own client
//! ([`CallMessage::Ask`]); with no call or several in flight they are relayed to a client of
//! the gateway (see [`Relay`]). `ping` is answered `{}`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::log::log;

/// The protocol version the gateway speaks to `CMD`.
pub(crate) const INNER_VERSION: &str = "2025-11-25";
/// How many messages for one call may wait before the reader waits for the call to take
/// them (a flood from `CMD` slows `CMD` down, never the gateway's memory).
const CALL_QUEUE: usize = 4096;
/// The longest line read from `CMD`.
const MAX_LINE: usize = 16 * 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What `CMD` sent about one call.
#[derive(Debug)]
pub(crate) enum CallMessage {
    /// `notifications/progress` for the call's token.
    Progress {
        /// `progress`.
        progress: f64,
        /// `total`.
        total: Option<f64>,
        /// `message`.
        message: Option<String>,
    },
    /// `notifications/message` while the call was the only one in flight: its params.
    Log(Map<String, Value>),
    /// `notifications/tasks/event` while the call was the only one in flight.
    Event {
        /// Its type.
        event_type: String,
        /// Its payload.
        payload: Value,
    },
    /// A request `CMD` made of its client while the call was the only one in flight: the
    /// call asks its own client ([`TaskContext::ask`](taskstream_server::tool::TaskContext::ask)) and
    /// answers it with [`ChildServer::reply`].
    Ask {
        /// The request's id towards `CMD`.
        id: Value,
        /// Its method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// The answer: a result, or the JSON-RPC error object.
    Answer(Result<Value, Value>),
    /// `CMD` exited (or its output ended) before answering.
    Died(String),
}

/// One in-flight request's routing.
struct Waiter {
    tx: SyncSender<CallMessage>,
    /// The call's progress token, for tool calls.
    token: Option<String>,
}

/// Where `CMD`'s answers and progress go: the waiting calls.
#[derive(Default)]
struct CallRoutes {
    /// By request id.
    waiters: HashMap<i64, Waiter>,
    /// Progress token → request id.
    tokens: HashMap<String, i64>,
}

/// Where requests `CMD` makes of its client go: the gateway's clients.
pub(crate) type Relay = Arc<dyn Fn(&str, Value) -> Result<Value, Value> + Send + Sync>;

/// A running `CMD`.
pub(crate) struct ChildServer {
    relay: Relay,
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    routes: Arc<Mutex<CallRoutes>>,
    alive: Arc<AtomicBool>,
    /// Whether the gateway is stopping it (its end is then no surprise).
    stopping: AtomicBool,
    next_id: AtomicI64,
}

/// A request sent to `CMD`: its id and where its messages arrive.
pub(crate) struct SentRequest {
    /// The request id used towards `CMD`.
    pub(crate) id: i64,
    /// Its messages.
    pub(crate) rx: Receiver<CallMessage>,
}

impl ChildServer {
    /// Starts `cmd` with `args` (stderr passes through to the gateway's).
    ///
    /// # Errors
    /// Why it could not be started.
    pub(crate) fn spawn(
        cmd: &str,
        args: &[String],
        relay: Relay,
    ) -> Result<Arc<ChildServer>, String> {
        let mut child = Command::new(cmd)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| format!("{cmd:?} has no stdout"))?;
        let stdin = child.stdin.take();
        let inner = Arc::new(ChildServer {
            relay,
            stdin: Mutex::new(stdin),
            child: Mutex::new(child),
            routes: Arc::new(Mutex::new(CallRoutes::default())),
            alive: Arc::new(AtomicBool::new(true)),
            stopping: AtomicBool::new(false),
            next_id: AtomicI64::new(1),
        });
        let reader = Arc::clone(&inner);
        std::thread::Builder::new()
            .name("inner-reader".into())
            .spawn(move || reader.read(stdout))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(inner)
    }

    /// Whether `CMD` is still running (its output has not ended).
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Answers a request `CMD` made: its result, or a JSON-RPC error object.
    pub(crate) fn reply(&self, id: &Value, answer: Result<Value, Value>) {
        let msg = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        self.write(&msg);
    }

    /// Writes one message to `CMD`; false if it is gone.
    fn write(&self, msg: &Value) -> bool {
        let mut line = msg.to_string();
        line.push('\n');
        let mut stdin = lock(&self.stdin);
        match stdin.as_mut() {
            Some(w) => {
                if w.write_all(line.as_bytes())
                    .and_then(|()| w.flush())
                    .is_ok()
                {
                    true
                } else {
                    *stdin = None;
                    false
                }
            }
            None => false,
        }
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request; `token` routes its progress (and makes it the call that log messages
    /// are tied to while it is alone).
    pub(crate) fn send(
        &self,
        method: &str,
        mut params: Map<String, Value>,
        token: Option<String>,
    ) -> SentRequest {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(CALL_QUEUE);
        if let Some(t) = &token {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("progressToken".into(), Value::String(t.clone()));
            }
        }
        {
            let mut routes = lock(&self.routes);
            if let Some(t) = &token {
                routes.tokens.insert(t.clone(), id);
            }
            routes.waiters.insert(
                id,
                Waiter {
                    tx: tx.clone(),
                    token,
                },
            );
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !self.is_alive() || !self.write(&msg) {
            self.forget(id);
            let _ = tx.try_send(CallMessage::Died("it is not running".into()));
        }
        SentRequest { id, rx }
    }

    /// Stops routing request `id` (answered, cancelled or given up).
    pub(crate) fn forget(&self, id: i64) {
        let mut routes = lock(&self.routes);
        if let Some(w) = routes.waiters.remove(&id) {
            if let Some(t) = w.token {
                routes.tokens.remove(&t);
            }
        }
    }

    /// Sends a request and waits up to `timeout` for its answer.
    ///
    /// # Errors
    /// The JSON-RPC error object to answer with: `CMD`'s own, or one saying it died or did
    /// not answer in time.
    pub(crate) fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, Value> {
        let p = self.send(method, params, None);
        let answer = loop {
            match p.rx.recv_timeout(timeout) {
                Ok(CallMessage::Answer(a)) => break a,
                Ok(CallMessage::Died(why)) => {
                    break Err(error(format!(
                        "the server behind the gateway exited before answering {method} ({why})"
                    )))
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    self.notify(
                        "notifications/cancelled",
                        json!({"requestId": p.id, "reason": "no answer in time"}),
                    );
                    break Err(error(format!(
                        "the server behind the gateway did not answer {method} within {} s",
                        timeout.as_secs()
                    )));
                }
            }
        };
        self.forget(p.id);
        answer
    }

    /// Stops `CMD` as a host would: closes its stdin, gives it two seconds to exit, then kills
    /// it.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        *lock(&self.stdin) = None;
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while self.is_alive() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.is_alive() {
            self.kill();
        }
    }

    /// Kills `CMD` (its output ends and every waiting call is told).
    pub(crate) fn kill(&self) {
        *lock(&self.stdin) = None;
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The reader: routes each line `CMD` writes until its output ends.
    fn read(self: &Arc<Self>, stdout: std::process::ChildStdout) {
        let mut r = BufReader::with_capacity(64 * 1024, stdout);
        let mut line = Vec::new();
        let mut garbage = 0u64;
        loop {
            line.clear();
            match r
                .by_ref()
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_LINE {
                log!(
                    Warn,
                    "the inner server wrote a line over {MAX_LINE} bytes; dropped"
                );
                // Skip the rest of that line.
                let mut rest = Vec::new();
                if r.read_until(b'\n', &mut rest).is_err() {
                    break;
                }
                continue;
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(text) {
                Ok(Value::Object(msg)) => self.route(msg),
                _ => {
                    garbage += 1;
                    if garbage.is_power_of_two() {
                        log!(
                            Warn,
                            "the inner server wrote {garbage} line(s) that are not JSON-RPC \
                             messages on stdout; they are dropped"
                        );
                    }
                }
            }
        }
        *lock(&self.stdin) = None;
        let status = self.reap();
        self.alive.store(false, Ordering::Relaxed);
        if self.stopping.load(Ordering::Relaxed) {
            log!(Info, "the inner server stopped ({status})");
        } else {
            log!(Warn, "the inner server's output ended ({status})");
        }
        let waiters: Vec<Waiter> = {
            let mut routes = lock(&self.routes);
            routes.tokens.clear();
            routes.waiters.drain().map(|(_, w)| w).collect()
        };
        for w in waiters {
            let _ = w.tx.send(CallMessage::Died(status.clone()));
        }
    }

    /// Waits for a child whose output ended to exit (killing it after a second); its status.
    fn reap(&self) -> String {
        let mut child = lock(&self.child);
        let end = std::time::Instant::now() + Duration::from_secs(1);
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return s.to_string(),
                Ok(None) if std::time::Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    return child
                        .wait()
                        .map(|s| format!("{s}, after its output ended"))
                        .unwrap_or_else(|_| "unknown status".into());
                }
                Err(_) => return "unknown status".into(),
            }
        }
    }

    fn route(self: &Arc<Self>, msg: Map<String, Value>) {
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|i| !i.is_null());
        match (method, id) {
            (Some(m), Some(id)) => self.answer_request(m, id, msg.get("params")),
            (Some(m), None) => self.notification(m, msg.get("params")),
            (None, Some(id)) => {
                let waiter = id.as_i64().and_then(|i| {
                    let mut routes = lock(&self.routes);
                    let w = routes.waiters.remove(&i)?;
                    if let Some(t) = &w.token {
                        routes.tokens.remove(t);
                    }
                    Some(w)
                });
                let Some(w) = waiter else {
                    log!(Warn, "the inner server answered request {id}, which is not waiting (an unknown id or a second answer); dropped");
                    return;
                };
                let answer = match (msg.get("result"), msg.get("error")) {
                    (Some(r), None) => Ok(r.clone()),
                    (None, Some(e)) if e.is_object() => Err(e.clone()),
                    _ => Err(error(
                        "the server behind the gateway sent an answer that is neither a result nor an error"
                            .into(),
                    )),
                };
                let _ = w.tx.send(CallMessage::Answer(answer));
            }
            (None, None) => log!(Warn, "the inner server wrote a message that is neither a request, a notification nor an answer; dropped"),
        }
    }

    /// A request `CMD` makes of its client: `ping` is answered here; the others are relayed
    /// to a client of the gateway on a thread of their own (the reader never waits for a
    /// client), and the answer, or an error saying why there is none, goes back to `CMD`.
    fn answer_request(self: &Arc<Self>, method: &str, id: &Value, params: Option<&Value>) {
        if method == "ping" {
            self.write(&json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            return;
        }
        let method = method.to_owned();
        let id = id.clone();
        let params = params.cloned().unwrap_or_else(|| json!({}));
        // Tied to the one call in flight, the call asks its own client (a task: its era's
        // way, `input_required` in 2026-07-28).
        let call = self
            .only_call()
            .and_then(|call| lock(&self.routes).waiters.get(&call).map(|w| w.tx.clone()));
        let (id, method, params) = match call {
            Some(tx) => match tx.send(CallMessage::Ask { id, method, params }) {
                Ok(()) => return,
                Err(std::sync::mpsc::SendError(CallMessage::Ask { id, method, params })) => {
                    (id, method, params)
                }
                Err(_) => return,
            },
            None => (id, method, params),
        };
        let inner = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("inner-ask".into())
            .stack_size(256 * 1024)
            .spawn(move || inner.reply(&id, (inner.relay)(&method, params)));
        if let Err(e) = spawned {
            log!(
                Error,
                "relaying a request of the inner server: cannot start a thread: {e}"
            );
        }
    }

    fn notification(&self, method: &str, params: Option<&Value>) {
        let empty = Map::new();
        let params = params.and_then(Value::as_object).unwrap_or(&empty);
        let (target, msg) = match method {
            "notifications/progress" => {
                let token = match params.get("progressToken") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => return,
                };
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                    return;
                };
                let routes = lock(&self.routes);
                let Some(id) = routes.tokens.get(&token).copied() else {
                    log!(Debug, "progress for no call in flight; dropped");
                    return;
                };
                drop(routes);
                (
                    Some(id),
                    CallMessage::Progress {
                        progress,
                        total: params.get("total").and_then(Value::as_f64),
                        message: params
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    },
                )
            }
            "notifications/message" => (self.only_call(), CallMessage::Log(params.clone())),
            "notifications/tasks/event" => {
                let (Some(t), Some(p)) = (
                    params.get("type").and_then(Value::as_str),
                    params.get("payload").filter(|p| p.is_object()),
                ) else {
                    return;
                };
                (
                    self.only_call(),
                    CallMessage::Event {
                        event_type: t.to_owned(),
                        payload: p.clone(),
                    },
                )
            }
            _ => {
                log!(Debug, "the inner server sent {method}; not relayed");
                return;
            }
        };
        let Some(id) = target else {
            log!(
                Debug,
                "{method} from the inner server tied to no call; dropped"
            );
            return;
        };
        let tx = lock(&self.routes).waiters.get(&id).map(|w| w.tx.clone());
        if let Some(tx) = tx {
            // Blocks while the call's queue is full: back-pressure on CMD.
            let _ = tx.send(msg);
        }
    }

    /// The one tool call in flight, if exactly one is.
    fn only_call(&self) -> Option<i64> {
        let routes = lock(&self.routes);
        let mut calls = routes.tokens.values();
        match (calls.next(), calls.next()) {
            (Some(id), None) => Some(*id),
            _ => None,
        }
    }
}

/// A JSON-RPC internal error object saying `message`.
pub(crate) fn error(message: String) -> Value {
    json!({"code": -32603, "message": message})
}
