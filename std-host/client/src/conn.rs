//! The JSON-RPC connection: newline-delimited JSON over any `Read` + `Write` pair, request ids,
//! and one reader thread that routes what arrives.
//!
//! Routing: a response goes to the waiter of its id; a `notifications/tasks/event` goes to the
//! open stream of its `taskId`; anything else is kept (bounded) as unsolicited. A `tasks/stream`
//! request registers its response route and its event route on **one** channel, so the reader's
//! order is the caller's order: every event the server sent before the stream's result is seen
//! before the result.
//!
//! This module knows nothing of eras, tasks or cursors.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{ClientError, RpcError};

/// The method of event notifications (SEP-2694).
pub(crate) const EVENT_METHOD: &str = "notifications/tasks/event";
/// Unsolicited messages kept for [`Connection::take_unsolicited`]; older ones are dropped.
const UNSOLICITED_CAP: usize = 1024;

/// What the reader hands to a waiter.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// The response to a request: its result or its error.
    Response(Result<Value, RpcError>),
    /// The params of a `notifications/tasks/event` for the routed task.
    Event(Value),
    /// The reader stopped; no more messages will come.
    Closed(String),
}

#[derive(Default)]
struct Routes {
    pending: HashMap<u64, Sender<Inbound>>,
    streams: HashMap<String, Sender<Inbound>>,
    unsolicited: VecDeque<Value>,
    unsolicited_total: u64,
    closed: Option<String>,
    /// Tasks whose stream was cancelled on this connection: events of the old stream may
    /// still be in flight until a barrier round trip (see [`Connection::is_draining`]).
    draining: std::collections::HashSet<String>,
}

type SharedWriter = Arc<Mutex<Option<Box<dyn Write + Send>>>>;

/// One JSON-RPC connection. Cheap to share by reference across threads.
pub(crate) struct Connection {
    writer: SharedWriter,
    routes: Arc<Mutex<Routes>>,
    next_id: AtomicU64,
    reader: Mutex<Option<JoinHandle<()>>>,
    reader_done: Mutex<Receiver<()>>,
}

/// Locks a mutex, recovering the data if another thread panicked while holding it: the data
/// (routes, a writer) stays consistent because every critical section is a single map update.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Connection {
    /// Starts the reader thread on `reader`; requests go to `writer`.
    pub(crate) fn new(
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        max_line_bytes: usize,
    ) -> Result<Connection, ClientError> {
        let writer: SharedWriter = Arc::new(Mutex::new(Some(writer)));
        let routes = Arc::new(Mutex::new(Routes::default()));
        let (done_tx, done_rx) = mpsc::channel();
        let thread_routes = Arc::clone(&routes);
        let thread_writer = Arc::clone(&writer);
        let handle = std::thread::Builder::new()
            .name("taskstream-client-reader".into())
            .spawn(move || {
                let reason = read_loop(reader, max_line_bytes, &thread_routes, &thread_writer);
                close_routes(&thread_routes, reason);
                let _ = done_tx.send(());
            })?;
        Ok(Connection {
            writer,
            routes,
            next_id: AtomicU64::new(1),
            reader: Mutex::new(Some(handle)),
            reader_done: Mutex::new(done_rx),
        })
    }

    /// A fresh request id.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Writes one message as one line.
    pub(crate) fn send(&self, message: &Value) -> Result<(), ClientError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| ClientError::Io(std::io::Error::other(e)))?;
        line.push(b'\n');
        let mut guard = lock(&self.writer);
        let Some(w) = guard.as_mut() else {
            return Err(ClientError::Closed {
                reason: "the client closed its side".into(),
            });
        };
        w.write_all(&line)?;
        w.flush()?;
        Ok(())
    }

    /// Registers a waiter for `id` (and, for a stream, the event route of `task_id` on the same
    /// channel), then sends the request. The route exists before the request leaves, so no
    /// early answer can be missed.
    pub(crate) fn start_request(
        &self,
        id: u64,
        method: &str,
        params: Value,
        stream_task: Option<&str>,
    ) -> Result<Receiver<Inbound>, ClientError> {
        let (tx, rx) = mpsc::channel();
        {
            let mut routes = lock(&self.routes);
            if let Some(reason) = &routes.closed {
                return Err(ClientError::Closed {
                    reason: reason.clone(),
                });
            }
            if let Some(task_id) = stream_task {
                if routes.streams.contains_key(task_id) {
                    return Err(ClientError::StreamActive {
                        task_id: task_id.to_owned(),
                    });
                }
                routes.streams.insert(task_id.to_owned(), tx.clone());
            }
            routes.pending.insert(id, tx);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self.send(&message) {
            self.forget(id, stream_task);
            return Err(e);
        }
        Ok(rx)
    }

    /// Drops the routes of a request (after its answer, a timeout or a cancellation).
    pub(crate) fn forget(&self, id: u64, stream_task: Option<&str>) {
        let mut routes = lock(&self.routes);
        routes.pending.remove(&id);
        if let Some(task_id) = stream_task {
            routes.streams.remove(task_id);
        }
    }

    /// Sends a request and waits for its answer.
    pub(crate) fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let id = self.next_id();
        let rx = self.start_request(id, method, params, None)?;
        let answer = wait(&rx, timeout, method);
        self.forget(id, None);
        match answer? {
            Inbound::Response(Ok(result)) => Ok(result),
            Inbound::Response(Err(error)) => Err(ClientError::Rpc {
                method: method.to_owned(),
                error,
            }),
            Inbound::Closed(reason) => Err(ClientError::Closed { reason }),
            // Events are only routed to stream channels; this one has no stream route.
            Inbound::Event(_) => Err(ClientError::Closed {
                reason: "internal routing error".into(),
            }),
        }
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Marks `task_id` as cancelled on this connection: events of the cancelled stream that
    /// the server wrote before it processed the cancellation may still arrive.
    pub(crate) fn mark_draining(&self, task_id: &str) {
        lock(&self.routes).draining.insert(task_id.to_owned());
    }

    /// Whether a new stream for `task_id` needs a barrier first. The barrier is any request
    /// answered after the cancellation: the reader reads in order, so every late event of the
    /// old stream is read (and, with no route, set aside) before that answer; a server that
    /// handles messages in order sends nothing for the cancelled stream after it (DX-04).
    pub(crate) fn is_draining(&self, task_id: &str) -> bool {
        lock(&self.routes).draining.contains(task_id)
    }

    /// Ends the draining of `task_id` after the barrier.
    pub(crate) fn clear_draining(&self, task_id: &str) {
        lock(&self.routes).draining.remove(task_id);
    }

    /// Takes the unsolicited messages kept so far.
    pub(crate) fn take_unsolicited(&self) -> Vec<Value> {
        lock(&self.routes).unsolicited.drain(..).collect()
    }

    /// How many unsolicited messages arrived in total (kept or not).
    pub(crate) fn unsolicited_total(&self) -> u64 {
        lock(&self.routes).unsolicited_total
    }

    /// Why the reader stopped, if it has.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        lock(&self.routes).closed.clone()
    }

    /// Closes the writing side (for a child process: its stdin, so it sees EOF).
    pub(crate) fn close_writer(&self) {
        lock(&self.writer).take();
    }

    /// Waits up to `timeout` for the reader to stop (the server closed its output). Joins the
    /// reader thread if it did.
    pub(crate) fn wait_reader(&self, timeout: Duration) -> bool {
        let stopped = match lock(&self.reader_done).recv_timeout(timeout) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        };
        if stopped {
            if let Some(handle) = lock(&self.reader).take() {
                let _ = handle.join();
            }
        }
        stopped
    }
}

/// Waits for one message on a route.
pub(crate) fn wait(
    rx: &Receiver<Inbound>,
    timeout: Duration,
    what: &str,
) -> Result<Inbound, ClientError> {
    match rx.recv_timeout(timeout) {
        Ok(inbound) => Ok(inbound),
        Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout {
            waiting_for: what.to_owned(),
            after: timeout,
        }),
        Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed {
            reason: "the connection's reader stopped".into(),
        }),
    }
}

fn close_routes(routes: &Mutex<Routes>, reason: String) {
    let mut routes = lock(routes);
    for (_, tx) in routes.pending.drain() {
        let _ = tx.send(Inbound::Closed(reason.clone()));
    }
    for (_, tx) in routes.streams.drain() {
        let _ = tx.send(Inbound::Closed(reason.clone()));
    }
    routes.closed = Some(reason);
}

/// Reads lines until EOF or an error; returns why it stopped.
fn read_loop(
    reader: Box<dyn Read + Send>,
    max_line_bytes: usize,
    routes: &Mutex<Routes>,
    writer: &SharedWriter,
) -> String {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(max_line_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        match reader.by_ref().take(limit).read_until(b'\n', &mut line) {
            Ok(0) => return "the server closed its output (EOF)".into(),
            Ok(_) => {}
            Err(e) => return format!("read error: {e}"),
        }
        if line.last() != Some(&b'\n') && line.len() > max_line_bytes {
            // An over-long line: skip to its end and read on.
            if let Err(e) = skip_line(&mut reader) {
                return format!("read error: {e}");
            }
            keep_unsolicited(routes, json!({"overlongLine": true}));
            continue;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(text) {
            Ok(message) => route(message, routes, writer),
            Err(_) => {
                keep_unsolicited(routes, json!({"unparsable": String::from_utf8_lossy(text)}))
            }
        }
    }
}

fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            reader.consume(pos + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

fn keep_unsolicited(routes: &Mutex<Routes>, message: Value) {
    let mut routes = lock(routes);
    routes.unsolicited_total += 1;
    if routes.unsolicited.len() == UNSOLICITED_CAP {
        routes.unsolicited.pop_front();
    }
    routes.unsolicited.push_back(message);
}

fn route(message: Value, routes: &Mutex<Routes>, writer: &SharedWriter) {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id");
    match (method, id) {
        // A response.
        (None, Some(id)) => {
            let answer = if let Some(error) = message.get("error") {
                Err(RpcError::from_value(error))
            } else if let Some(result) = message.get("result") {
                Ok(result.clone())
            } else {
                keep_unsolicited(routes, message);
                return;
            };
            let sender = id.as_u64().and_then(|id| lock(routes).pending.remove(&id));
            match sender {
                Some(tx) => {
                    let _ = tx.send(Inbound::Response(answer));
                }
                None => keep_unsolicited(routes, message),
            }
        }
        // A request from the server: legacy servers may ping; answer everything else with
        // -32601 so the server is not left waiting.
        (Some(method), Some(id)) => {
            let reply = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "Method not found"}})
            };
            if let Ok(mut line) = serde_json::to_vec(&reply) {
                line.push(b'\n');
                if let Some(w) = lock(writer).as_mut() {
                    let _ = w.write_all(&line).and_then(|()| w.flush());
                }
            }
        }
        // A notification.
        (Some(method), None) => {
            if method == EVENT_METHOD {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let task = params.get("taskId").and_then(Value::as_str);
                let sender = task.and_then(|t| lock(routes).streams.get(t).cloned());
                if let Some(tx) = sender {
                    if tx.send(Inbound::Event(params)).is_ok() {
                        return;
                    }
                }
            }
            keep_unsolicited(routes, message);
        }
        (None, None) => keep_unsolicited(routes, message),
    }
}
