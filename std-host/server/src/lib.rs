//! `taskstream-server`: an MCP server with Tasks and SEP-2694 resumable task event streams, on
//! stdio, a Unix socket or Streamable HTTP, in both protocol eras, with its tasks kept by
//! [`taskstream_store`] (re-exported as [`store`]). The client side is the crate
//! `taskstream-client`; the `taskstream` binary (CLI, demo) is built on this crate.
//!
//! ## A server of your own tools
//!
//! A Rust MCP server with a durable, resumable tool is one short file: define the tool
//! ([`tool::Tool`]: name, description, JSON input schema, handler), hand it to a
//! [`ServerBuilder`], serve. The handler emits events through its [`tool::TaskContext`]; when
//! the client calls the tool as a task, each event is durable before any client sees it and the
//! client follows it with `tasks/stream`, resuming with `after`. The builder takes every option
//! of `taskstream serve`. (`std-host/server/examples/walk.rs` is a complete one.)
//!
//! ```no_run
//! use serde_json::json;
//! use taskstream_server::tool::{Tool, ToolResult};
//! use taskstream_server::ServerBuilder;
//!
//! fn main() -> std::process::ExitCode {
//!     let build = Tool::new(
//!         "build",
//!         "Builds, step by step",
//!         json!({"type": "object", "properties": {"steps": {"type": "integer", "minimum": 1}}}),
//!         |ctx, args| {
//!             let steps = args.get("steps").and_then(|s| s.as_u64()).unwrap_or(3);
//!             for step in 1..=steps {
//!                 // Logged now, sent to no client before it is durable; its seq.
//!                 let _seq = ctx.emit("com.example.build.step", &json!({ "step": step }))?;
//!                 ctx.sleep(std::time::Duration::from_millis(200))?; // wakes on tasks/cancel
//!             }
//!             Ok(ToolResult::text("built"))
//!         },
//!     );
//!     ServerBuilder::new("builder", "1.0.0").tool(build).main()
//! }
//! ```
//!
//! | module | owns |
//! | --- | --- |
//! | [`tool`] | the public tool API: [`tool::Tool`], [`tool::TaskContext`], served by [`ServerBuilder`] |
//! | [`config`] | the options of `taskstream serve` ([`config::ServeConfig`]) |
//! | [`gateway`] | `taskstream gateway`: taskstream in front of any stdio MCP server |
//! | [`connect`] | `taskstream connect`: the stdio relay to a data dir's long-lived server |
//! | [`log`] | the stderr subscriber of the binaries (text or JSON) |
//! | [`store`] | the crate [`taskstream_store`], re-exported: tasks and their event logs |
//! | `workloads` | `taskstream serve`'s own tools (`emit`, `run_trace`), on [`tool`]; its [`trace`]s are public |
//!
//! The server itself (this crate's root and the private modules below it):
//!
//! Threads (see `ARCHITECTURE.md`, "Concurrency"):
//! - the **reader** (the caller of [`serve`]) reads stdin line by line, classifies each line with
//!   the core's parser, and answers every request that can be answered at once; it never waits
//!   for a task;
//! - a task of a blocking tool ([`tool::Tool::new`]) runs on a thread of its own, a task of a
//!   stepped tool ([`tool::Tool::stepped`]) on the process's few step workers
//!   (`process/steps.rs`), which hold no thread while it waits; either appends to the store and
//!   never writes to stdout;
//! - the **delivery** thread waits on the store's change signal and writes stream frames, status
//!   notifications and deferred `tasks/result` answers;
//! - the **sweep** thread applies retention once a second and gives freed heap back to the
//!   system when a burst left much of it (`heap`).
//!
//! All output goes through one `io::Output` (a lock and a buffer, flushed per batch).
//!
//! [`serve`] is the stdio loop; it only frames lines and hands each to a [`Connection`], which
//! is the whole server minus the framing. Tests and the `server` fuzz target drive a
//! [`Connection`] in process with any writer.
//!
//! | module | owns |
//! | --- | --- |
//! | `io` | stdin framing loop (on the core's `LineReader`), the stdout writer |
//! | `wire` | the error type and writers (on the core's `rpc`) |
//! | `era` | the two protocol eras in one place: which era a request is in, the Tasks codec each speaks (`Codec`), `initialize`, `server/discover`, result dressing |
//! | `tools` | tool definitions and argument validation |
//! | `tasks` | task creation, the Tasks methods in both codecs, task threads |
//! | `plain` | plain tool calls, progress |
//! | `stream` | `tasks/stream` admission and cancellation |
//! | `delivery` | the delivery thread |
//! | `cancel` | a sleep-interruptible cancellation flag |
//! | `guard` | the failed-lookup limit (SE-07, resume attempts) |
//! | `socket` | `serve --socket`: the data dir's Unix socket, one connection per peer |

pub mod config;
pub mod connect;
pub mod gateway;
pub mod log;
pub mod tool;
mod workloads;

pub use taskstream_store as store;
/// The host's wall clock, as the core's `Millis`: [`taskstream_store::clock`], re-exported.
pub use taskstream_store::clock;
/// The bundled traces `run_trace` replays, and their format (`data/README.md`).
pub use workloads::trace;

mod builder;
mod cancel;
mod delivery;
mod era;
mod guard;
mod heap;
mod http;
mod input;
mod io;
mod metrics;
mod plain;
pub(crate) mod process;
pub mod socket;
mod stream;
mod tasks;
mod tools;
mod wire;

use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use serde_json::{json, Map, Value};
use taskstream_core::rpc::{self, Message, Reason};
use taskstream_core::RequestId;

use crate::config::ServeConfig;
use crate::log::log;
use crate::store::TaskStore;
use era::{Codec, Era, Session};
use wire::ServerError;

pub use builder::{open_store, ArgsError, ServerBuilder};
pub use http::serve_http;
pub use process::Process;
pub use socket::serve_socket;

/// Why the server stopped other than at the end of its input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Reading stdin failed.
    #[error("reading stdin: {0}")]
    Input(#[source] std::io::Error),
    /// A helper thread could not be started.
    #[error("starting a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// `serve --http` could not start (address, token file, runtime).
    #[error("{0}")]
    Http(String),
    /// The server could not start (the store could not be opened, a thread not started).
    #[error("{0}")]
    Start(String),
}

/// One connection's state, shared by its reader, its delivery (a thread on stdio; the HTTP
/// adapter's tasks otherwise) and its plain calls. Everything process-wide (the store, tasks,
/// the sweep) is behind [`Process`].
pub(crate) struct ConnectionState {
    process: Arc<Process>,
    /// The process's configuration with this connection's principal.
    config: ServeConfig,
    store: Arc<dyn TaskStore>,
    out: io::Output,
    server_info: Value,
    streams: Mutex<stream::Streams>,
    plain: plain::InFlight,
    /// Transitions not yet announced, and `tasks/result` requests waiting.
    pending: Mutex<tasks::OwedAnswers>,
    /// Whether `initialize` selected the legacy era (read by the delivery thread).
    legacy: AtomicBool,
    /// The failed-lookup allowance (SE-07): this connection's, or its principal's on HTTP.
    failures: Arc<Mutex<guard::FailedLookups>>,
    shutdown: AtomicBool,
    /// Whether a delivery thread serves this connection (else ended tasks are announced at
    /// once, from the thread that ended them).
    threaded: bool,
    /// Whether the process exits once storage failed and the clients were told (`serve`).
    exit_on_storage_failure: AtomicBool,
}

impl ConnectionState {
    /// A connection of `process` acting as `principal`, writing to `output`.
    pub(crate) fn new(
        process: &Arc<Process>,
        principal: &str,
        output: io::Output,
        failures: Option<Arc<Mutex<guard::FailedLookups>>>,
        threaded: bool,
        max_streams: usize,
    ) -> ConnectionState {
        let mut config = process.config.clone();
        config.principal = principal.to_owned();
        ConnectionState {
            process: Arc::clone(process),
            streams: Mutex::new(stream::Streams::new(max_streams)),
            failures: failures.unwrap_or_else(|| {
                Arc::new(Mutex::new(guard::FailedLookups::new(
                    config.max_failed_lookups_per_minute,
                )))
            }),
            store: Arc::clone(&process.store),
            server_info: process.server_info.clone(),
            config,
            out: output,
            plain: plain::InFlight::default(),
            pending: Mutex::new(tasks::OwedAnswers::default()),
            legacy: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            threaded,
            exit_on_storage_failure: AtomicBool::new(false),
        }
    }

    fn streams(&self) -> MutexGuard<'_, stream::Streams> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn pending(&self) -> MutexGuard<'_, tasks::OwedAnswers> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the answer to request `id`, dressed for `era`.
    fn reply(&self, id: &RequestId, era: Era, result: Result<Value, ServerError>) {
        let line = match result {
            Ok(v) => wire::response(id, &era::dress(era, v, &self.server_info)),
            Err(e) => e.line(Some(id)),
        };
        self.out.send(&line);
    }

    /// Task `key` of `principal` ended: queue what this connection owes for it.
    pub(crate) fn task_finished(&self, key: u128, principal: &str) {
        if principal != self.config.principal || self.shutdown.load(Ordering::Relaxed) {
            return;
        }
        self.pending().finished.push(key);
        if self.threaded {
            self.store.changes().notify();
        } else {
            delivery::announce(self);
        }
    }

    /// With a shared store: the tasks this connection's `tasks/result` requests wait for that
    /// ended through another replica (no task thread here announces them) are announced now.
    /// Called whenever the store's signal moves.
    pub(crate) fn check_remote_ends(&self) {
        if !self.store.is_shared() || self.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let waiting: Vec<u128> = {
            let pending = self.pending();
            let mut keys: Vec<u128> = pending
                .waiters
                .iter()
                .map(|(k, _)| *k)
                .filter(|k| !pending.finished.contains(k))
                .collect();
            keys.dedup();
            keys
        };
        for key in waiting {
            let ended = self
                .store
                .task(&tasks::format_task_id(key))
                .is_none_or(|v| v.record.status.is_terminal());
            if ended {
                let principal = self.config.principal.clone();
                self.task_finished(key, &principal);
            }
        }
    }

    /// Ends the connection's own work: its plain calls stop, waiting answers are dropped.
    /// Tasks are the process's and run on.
    pub(crate) fn close(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        self.plain.stop_all();
        self.pending().waiters.clear();
        self.store.changes().notify();
    }
}

/// Serves one connection: reads `input` until its end, writes to `output`, with tasks and
/// their events in `store`. Returns at the end of the input (after flushing), or when the
/// output is gone.
///
/// This is the stdio loop of `taskstream serve` (with stdin and stdout); it frames lines with
/// the core's `LineReader` (at most `--max-message-bytes` each) and hands each to a
/// [`Connection`]. The process serves only this connection, so the end of the input ends the
/// process's tasks too (they end `failed` at the next start).
///
/// # Errors
/// [`ServeError`] if stdin fails or a helper thread cannot start.
pub fn serve(
    config: ServeConfig,
    store: Arc<dyn TaskStore>,
    input: impl Read,
    output: Box<dyn Write + Send>,
) -> Result<(), ServeError> {
    let process = Process::start(config, store).map_err(ServeError::Thread)?;
    serve_process(process, input, output)
}

/// [`serve`] with a process of the caller's (its tools): the process serves only this
/// connection and stops at the end of the input.
///
/// # Errors
/// [`ServeError`] if stdin fails or a helper thread cannot start.
pub(crate) fn serve_process(
    process: Arc<Process>,
    input: impl Read,
    output: Box<dyn Write + Send>,
) -> Result<(), ServeError> {
    let max_line = process.config.max_message_bytes;
    let principal = process.config.principal.clone();
    let mut conn = Connection::attach(&process, &principal, output)?;
    conn.owned = Some(process);
    conn.shared
        .exit_on_storage_failure
        .store(true, Ordering::Relaxed);
    log!(
        Info,
        "serving on stdio (principal {:?}, {})",
        conn.shared.config.principal,
        match (
            &conn.shared.config.data_dir,
            conn.shared.config.store_url.is_some()
        ) {
            (_, true) => "PostgreSQL store".to_owned(),
            (Some(d), false) => format!("data dir {}", d.display()),
            (None, false) => "in memory".to_owned(),
        }
    );
    let read = io::read_lines(input, max_line, |line| {
        match line {
            io::Line::Message(bytes) => conn.handle_line(bytes),
            io::Line::TooLong => conn.handle_overlong_line(),
        }
        if conn.is_output_broken() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    log!(Info, "end of input; shutting down");
    conn.close();
    read.map_err(ServeError::Input)
}

/// One client connection of the server, without the framing: hand it one incoming line at a
/// time with [`handle_line`](Self::handle_line); everything it answers or streams is written to
/// the output given to [`start`](Self::start), one JSON-RPC message per line, from this thread
/// (immediate answers) and from the server's own threads (stream frames, deferred answers, the
/// results of tool calls).
///
/// Requests are answered exactly once, except a request cancelled with
/// `notifications/cancelled` (no answer, DX-04) and those still open when the connection is
/// closed (streams, plain calls, `tasks/result` waiting for a running task).
///
/// [`start`](Self::start) gives the connection a [`Process`] of its own (stdio: one process,
/// one connection); [`attach`](Self::attach) joins an existing one.
///
/// ```no_run
/// use std::sync::Arc;
/// use taskstream_server::config::ServeConfig;
/// use taskstream_server::Connection;
/// use taskstream_store::{Store, StoreConfig};
///
/// let config = ServeConfig::in_memory();
/// let store = Store::open(
///     StoreConfig {
///         data_dir: None,
///         durability: config.durability,
///         retention: config.retention,
///         max_store_bytes: config.max_store_bytes,
///         index_cache_bytes: config.index_cache_bytes,
///     },
///     taskstream_store::clock::now(),
/// )?;
/// let mut conn = Connection::start(config, Arc::new(store), Box::new(std::io::sink()))?;
/// conn.handle_line(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// conn.close();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Connection {
    shared: Arc<ConnectionState>,
    session: Session,
    delivery: Option<JoinHandle<()>>,
    /// The process, when this connection owns it (and so stops it when closed).
    owned: Option<Arc<Process>>,
}

impl Connection {
    /// Starts a connection with a process of its own: its delivery thread and the process's
    /// retention sweep run until [`close`](Self::close) (or drop), which also stops the
    /// process's tasks.
    ///
    /// # Errors
    /// [`ServeError::Thread`] if a helper thread cannot start.
    pub fn start(
        config: ServeConfig,
        store: Arc<dyn TaskStore>,
        output: Box<dyn Write + Send>,
    ) -> Result<Connection, ServeError> {
        let process = Process::start(config, store).map_err(ServeError::Thread)?;
        let principal = process.config.principal.clone();
        let mut conn = Connection::attach(&process, &principal, output)?;
        conn.owned = Some(process);
        Ok(conn)
    }

    /// Starts a connection of `process` acting as `principal`, with its own delivery thread.
    /// Closing it ends only its own streams and calls; the tasks are the process's.
    ///
    /// # Errors
    /// [`ServeError::Thread`] if the delivery thread cannot start.
    pub fn attach(
        process: &Arc<Process>,
        principal: &str,
        output: Box<dyn Write + Send>,
    ) -> Result<Connection, ServeError> {
        let shared = Arc::new(ConnectionState::new(
            process,
            principal,
            io::Output::new(output),
            None,
            true,
            process.config.max_streams,
        ));
        process.register(&shared);
        let delivery = std::thread::Builder::new()
            .name("delivery".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || delivery::run(&shared)
            })
            .map_err(ServeError::Thread)?;
        Ok(Connection {
            shared,
            session: Session::default(),
            delivery: Some(delivery),
            owned: None,
        })
    }

    /// Handles one incoming message: `line` is one line of input without its newline. A line
    /// longer than `--max-message-bytes` is answered as
    /// [`handle_overlong_line`](Self::handle_overlong_line) would.
    pub fn handle_line(&mut self, line: &[u8]) {
        if line.len() > self.shared.config.max_message_bytes {
            return self.handle_overlong_line();
        }
        self.shared.handle_line(&mut self.session, line);
    }

    /// Answers a line that was longer than `--max-message-bytes` (and was skipped): -32600 with
    /// `data.reason` `message_too_long` and `id: null`.
    pub fn handle_overlong_line(&mut self) {
        let e = ServerError::Core(rpc::RpcError::MESSAGE_TOO_LONG);
        self.shared.out.send(&e.line(None));
    }

    /// Whether writing the output failed (the client is gone); the caller stops reading.
    pub fn is_output_broken(&self) -> bool {
        self.shared.out.is_broken()
    }

    /// Ends the connection (the input ended): stops its plain calls, lets the delivery thread
    /// finish its batch, flushes the output and waits for it. When the connection owns its
    /// process, the process's running tasks stop too (they end as they would at a crash:
    /// failed after a restart). Open streams and waiting `tasks/result` requests are not
    /// answered: nobody is left to read them.
    pub fn close(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let shared = &self.shared;
        shared.close();
        if let Some(process) = &self.owned {
            // Stop the tasks' threads first, so the delivery thread has nothing left to wait for.
            process.shut_down();
        }
        shared.store.changes().notify();
        // The delivery thread finishes its batch and stops; a batch stuck on a reader that no
        // longer reads is not waited for.
        if let Some(delivery) = self.delivery.take() {
            if !shared.out.is_broken() {
                let _ = delivery.join();
            }
        }
        shared.out.batch();
        self.owned = None;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.delivery.is_some() || self.owned.is_some() {
            self.shut_down();
        }
    }
}

impl ConnectionState {
    /// Handles one incoming line.
    fn handle_line(self: &Arc<Self>, session: &mut Session, line: &[u8]) {
        let mut scratch = [0u8; rpc::MAX_METHOD_BYTES];
        match rpc::parse(line, &mut scratch) {
            Err(e) => {
                if e.is_answered() {
                    let err = ServerError::Core(rpc::RpcError::from(&e));
                    self.out.send(&err.line(e.id()));
                }
            }
            Ok(Message::Response(_)) => self.response(line),
            Ok(Message::Notification(n)) => {
                self.notification(session, n.method, n.params.unwrap_or(b"{}"));
            }
            Ok(Message::Request(r)) => {
                self.request(session, &r.id, r.method, r.params.unwrap_or(b"{}"));
            }
        }
    }

    fn notification(&self, session: &mut Session, method: &str, raw: &[u8]) {
        match method {
            "notifications/initialized" if session.mark_initialized() => {
                log!(Debug, "client initialized");
            }
            rpc::method::CANCELLED => match rpc::parse_cancelled_params(raw) {
                Ok(id) => self.cancel_request(&id),
                Err(e) => log!(Debug, "ignored notifications/cancelled: {e}"),
            },
            other => {
                if let Some(f) = &self.process.extra.forward {
                    if f.handles(other) {
                        let params = serde_json::from_slice(raw).unwrap_or_default();
                        f.notify(other, params);
                    }
                }
                // Other notifications are dropped silently (JSON-RPC).
            }
        }
    }

    /// `notifications/cancelled`: a stream stops with no response and no further frame
    /// (TS-08, DX-04) and its task goes on; a plain call stops; a waiting `tasks/result` is
    /// dropped. Unknown ids are ignored (MCP-DIGEST a.6).
    fn cancel_request(&self, id: &RequestId) {
        if let Some(task) = self.streams().cancel(id) {
            log!(Debug, "stream {id} cancelled");
            // A stream delivered without the delivery thread (HTTP) sees it when woken.
            self.process.wake(task);
            return;
        }
        if !self.plain.cancel(id) {
            self.pending().cancel_waiter(id);
        }
    }

    fn request(self: &Arc<Self>, session: &mut Session, id: &RequestId, method: &str, raw: &[u8]) {
        let params = match wire::object_params(raw) {
            Ok(p) => p,
            Err(e) => return self.out.send(&e.line(Some(id))),
        };
        if method == "initialize" {
            let r = session.initialize(&params, &self.process.extra);
            if r.is_ok() {
                self.legacy.store(true, Ordering::Relaxed);
                log!(Info, "legacy session initialized");
            }
            return self.reply(id, Era::Legacy, r);
        }
        let era = match session.era_of(method, &params) {
            Ok(era) => era,
            Err(e) => return self.out.send(&e.line(Some(id))),
        };
        if self.store.has_failed() && method != "ping" {
            // Fail-stop: no new work, and no answer from a store that can no longer record.
            let e = ServerError::Internal(delivery::STORAGE_FAILED.into());
            return self.reply(id, era, Err(e));
        }
        // A 2025-06-18 session has no Tasks: no Tasks method, and `params.task` is an unknown
        // member of `tools/call` (the call runs plainly).
        let mut params = params;
        if !session.offers_tasks() {
            if is_task_lookup(method) {
                return self.reply(id, era, Err(ServerError::MethodNotFound(method.to_owned())));
            }
            params.remove("task");
        }
        // Ok(Some): answer now; Ok(None): answered (or to be answered) elsewhere.
        let answer = if is_task_lookup(method) {
            self.lookup(id, era, method, raw, &params)
        } else {
            match method {
                "ping" => Ok(Some(json!({}))),
                "server/discover" if era != Era::Legacy => {
                    Ok(Some(era::discover(&self.process.extra)))
                }
                "tools/list" => Ok(Some(tools::list(era, &self.process.tools)))
                    .map(|list| list.map(|l| tools::for_session(l, session.offers_tasks()))),
                "tools/call" => self.tools_call(id, era, &params).map(|()| None),
                other => match &self.process.extra.forward {
                    Some(f) if f.handles(other) => {
                        self.forward(f, id, era, other, params);
                        Ok(None)
                    }
                    _ => Err(ServerError::MethodNotFound(other.to_owned())),
                },
            }
        };
        match answer {
            Ok(Some(v)) => self.reply(id, era, Ok(v)),
            Ok(None) => {}
            Err(e) => self.reply(id, era, Err(e)),
        }
    }

    /// A Tasks method or `tasks/stream`. A miss spends the failed-lookup allowance (SE-07); while
    /// it is spent, a miss is answered `too_many_failures` instead of its own error and costs
    /// nothing, and a request that finds one of the principal's own tasks is served as ever.
    fn lookup(
        self: &Arc<Self>,
        id: &RequestId,
        era: Era,
        method: &str,
        raw: &[u8],
        params: &Map<String, Value>,
    ) -> Result<Option<Value>, ServerError> {
        let codec = || Codec::for_method(era, method);
        self.guarded(|| match method {
            "tasks/get" => codec().and_then(|c| self.tasks_get(c, params)).map(Some),
            "tasks/cancel" => codec().and_then(|c| self.tasks_cancel(c, params)).map(Some),
            "tasks/update" if era != Era::Legacy => {
                codec().and_then(|_| self.tasks_update(params)).map(Some)
            }
            "tasks/list" => codec().and_then(|_| self.tasks_list(params)).map(Some),
            "tasks/result" => codec()
                .and_then(|_| self.refuse_id_in_use(id))
                .and_then(|()| self.tasks_result(id, params))
                .map(|()| None),
            rpc::method::TASKS_STREAM => self
                .refuse_id_in_use(id)
                .and_then(|()| self.open_stream(id, era, raw))
                .map(|()| None),
            other => Err(ServerError::MethodNotFound(other.to_owned())),
        })
    }

    /// Runs a task lookup under the failed-lookup allowance (SE-07): a miss spends it; while
    /// it is spent, a miss is answered `too_many_failures` instead of its own error and costs
    /// nothing, and a request that finds one of the principal's own tasks is served as ever.
    fn guarded<T>(&self, look: impl FnOnce() -> Result<T, ServerError>) -> Result<T, ServerError> {
        match look() {
            Err(e) if e.is_failed_lookup() => {
                let now = Instant::now();
                let mut failures = self.failures();
                if let Err(wait) = failures.admit(now) {
                    metrics::METRICS.refused(metrics::Limit::FailedLookups);
                    return Err(ServerError::TooManyFailures {
                        retry_after_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1),
                    });
                }
                if failures.record(now) {
                    log!(
                        Warn,
                        "more than {} failed task lookups in a minute (unknown tasks or bad \
                         cursors): refusing failed lookups for a while",
                        self.config.max_failed_lookups_per_minute
                    );
                }
                Err(e)
            }
            answer => answer,
        }
    }

    fn failures(&self) -> MutexGuard<'_, guard::FailedLookups> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuses a request that would stay open under an id another open request of this
    /// connection already uses (a plain call, a stream, a waiting `tasks/result`): a later
    /// answer or cancellation could not tell them apart. (JSON-RPC forbids reusing ids; this
    /// keeps "answered exactly once" true for clients that do anyway.)
    fn refuse_id_in_use(&self, id: &RequestId) -> Result<(), ServerError> {
        let in_use = self.plain.contains(id)
            || self.streams().uses_id(id)
            || self.pending().waiters.iter().any(|(_, w)| w == id);
        if in_use {
            Err(ServerError::InvalidRequest(
                "an active request already uses this id",
            ))
        } else {
            Ok(())
        }
    }

    /// Refuses new work when this principal runs `--max-running-tasks` tasks and this
    /// connection's plain calls, or the process runs `--max-total-running-tasks`.
    fn refuse_over_running_limit(&self) -> Result<(), ServerError> {
        let (mine, all) = self.process.running(&self.config.principal);
        let plain = self.plain.len();
        let refused = mine + plain >= self.config.max_running_tasks
            || all + plain >= self.config.max_total_running_tasks;
        if refused {
            metrics::METRICS.refused(metrics::Limit::Tasks);
        }
        if mine + plain >= self.config.max_running_tasks {
            Err(ServerError::Limit {
                reason: Reason::TaskLimit,
                what: "too many tasks running for this principal, with this connection's \
                       plain tool calls (--max-running-tasks); retry when one has ended",
            })
        } else if all + plain >= self.config.max_total_running_tasks {
            Err(ServerError::Limit {
                reason: Reason::TaskLimit,
                what: "too many tasks running in this server (--max-total-running-tasks); \
                       retry when one has ended",
            })
        } else {
            Ok(())
        }
    }

    /// `tools/call`: validates, then runs as a task (legacy `params.task`; modern: declared
    /// extension) or plainly. Answers itself (at once, or when the plain call ends), except for
    /// the errors it returns.
    fn tools_call(
        self: &Arc<Self>,
        id: &RequestId,
        era: Era,
        params: &Map<String, Value>,
    ) -> Result<(), ServerError> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(ServerError::InvalidParams("name must be a string".into()));
        };
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(a)) => a,
            Some(_) => {
                return Err(ServerError::InvalidParams(
                    "arguments must be an object".into(),
                ));
            }
        };
        let workload = match tools::plan(name, args, &self.process.tools) {
            Ok(w) => w,
            Err(tools::CallError::UnknownTool(t)) => {
                let shown: String = t.chars().take(64).collect();
                return Err(ServerError::InvalidParams(format!(
                    "unknown tool {shown:?}"
                )));
            }
            Err(tools::CallError::BadArguments(m)) => {
                self.reply(id, era, Ok(crate::tool::text_result(&m, true)));
                return Ok(());
            }
        };
        let as_task = match (era, params.get("task")) {
            (Era::Legacy, None | Some(Value::Null)) => None,
            (Era::Legacy, Some(Value::Object(t))) => Some(t.get("ttl").and_then(Value::as_u64)),
            (Era::Legacy, Some(_)) => {
                return Err(ServerError::InvalidParams("task must be an object".into()));
            }
            // SEP-2663: the server decides; params.task is ignored.
            (Era::Modern { tasks }, _) => tasks.then_some(None),
        };
        self.refuse_over_running_limit()?;
        match as_task {
            Some(ttl) => self.create_task(id, era, name, workload, ttl),
            None => {
                self.refuse_id_in_use(id)?;
                let token = params
                    .get("_meta")
                    .and_then(|m| m.get("progressToken"))
                    .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                    .cloned();
                self.spawn_plain(id.clone(), era, workload, token);
            }
        }
        Ok(())
    }
}

impl ConnectionState {
    /// A response from the client: the answer to a request the server asked it on behalf of
    /// the server behind the gateway, or dropped.
    fn response(&self, line: &[u8]) {
        let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(id) = msg.get("id").and_then(Value::as_str) else {
            return;
        };
        if !id.starts_with(process::ASKED_PREFIX) {
            return;
        }
        let answer = match (msg.get("result"), msg.get("error")) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => return,
        };
        if !self.process.client_answered(id, answer) {
            log!(
                Debug,
                "an answer to request {id}, which no longer waits; dropped"
            );
        }
    }

    /// Whether a request may be asked of this client: a live 2025 session on stdio or the
    /// data dir's socket.
    pub(crate) fn can_be_asked(&self) -> bool {
        self.threaded
            && self.legacy.load(Ordering::Relaxed)
            && !self.shutdown.load(Ordering::Relaxed)
            && !self.out.is_broken()
    }

    /// Writes one line to the client.
    pub(crate) fn send_line(&self, line: &[u8]) {
        self.out.send(line);
    }

    /// Passes a request on (the gateway) on a thread of its own, and answers it when the
    /// answer comes back.
    fn forward(
        self: &Arc<Self>,
        forward: &Arc<dyn process::Forward>,
        id: &RequestId,
        era: Era,
        method: &str,
        mut params: Map<String, Value>,
    ) {
        // The modern `_meta` keys are this hop's; the inner server speaks the legacy era.
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
        let shared = Arc::clone(self);
        let forward = Arc::clone(forward);
        let request_id = id.clone();
        let method = method.to_owned();
        let spawned = std::thread::Builder::new()
            .name("forward".into())
            .stack_size(256 * 1024)
            .spawn(move || match forward.request(&method, params) {
                Ok(v) => shared.reply(&request_id, era, Ok(v)),
                Err(error) => shared
                    .out
                    .send(&wire::error_object_response(&request_id, &error)),
            });
        if let Err(e) = spawned {
            log!(Error, "forwarding a request: cannot start a thread: {e}");
            self.reply(
                id,
                era,
                Err(ServerError::Internal(
                    "the server could not pass the request on (its log says why)".into(),
                )),
            );
        }
    }
}

/// Whether `method` looks a task up: the Tasks methods and `tasks/stream`.
fn is_task_lookup(method: &str) -> bool {
    matches!(
        method,
        "tasks/get" | "tasks/cancel" | "tasks/update" | "tasks/list" | "tasks/result"
    ) || method == rpc::method::TASKS_STREAM
}
