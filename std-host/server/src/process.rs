//! What belongs to the server process rather than to any connection: the store, the running
//! tasks and their threads, the retention sweep, the limits that span connections, and the
//! per-task wake-ups that stream deliveries wait on.
//!
//! **Architecture Invariant:** a task's thread holds an `Arc<Process>`, never a connection: a
//! task runs on when the connection (stdio pair, HTTP session or request) that created it goes
//! away, and any connection of the same principal may get, cancel and stream it. Only the end
//! of the process stops tasks (they end `failed` at the next start, as after a crash).
//!
//! Connections register here (weakly) to be told when a task ends, so that a legacy session can
//! send `notifications/tasks/status` and answer a waiting `tasks/result`; a connection that is
//! gone is simply skipped. Lock order: a connection's locks → `conns` → `runners`; `wakers` is
//! a leaf. No lock here is held across store I/O except `runners` in `cancel_task` (a map
//! lookup, then released before the store is called).
//!
//! Why one file past ~600 lines: everything here is one struct's, [`Process`], whose fields
//! are private to this file: starting, running and ending tasks (and their sink), the sweep,
//! the wake-ups and the requests asked of clients share its locks and their order (above).
//! A part moved to a file below it would have to reach back up into `Process`; the part that
//! stands alone, the scheduler of stepped tasks, is `process/steps.rs`, and it sees the
//! process only as a `Host`.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Notify;

use crate::cancel::CancelToken;
use crate::config::ServeConfig;
use crate::guard::FailedLookups;
use crate::heap::HeapTrimmer;
use crate::log::log;
use crate::tool::{
    text_result, AskError, Outcome, Registry, Sink, Step, TaskContext, ToolError, Workload,
    PROGRESS_TYPE,
};
use crate::wire::era::{Codec, Identity};
use crate::wire::task::refusal;
use crate::wire::ServerError;
use taskstream_store::clock;
use taskstream_store::{AppendError, StoreError, TaskStatus, TaskStore, STATUS_EVENT_TYPE};

mod steps;

use steps::TASK_STACK_BYTES;

/// The id prefix of the requests a server makes of its clients through [`Process::ask_client`].
pub(crate) const ASKED_PREFIX: &str = "taskstream-ask-";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A method name as an error message shows it (bounded: it may come from another server).
pub(crate) fn shown(method: &str) -> String {
    method.chars().take(64).collect()
}

/// What a request of the client that got no answer within `timeout` is told.
fn unanswered(method: &str, timeout: Duration) -> String {
    format!(
        "the client did not answer {} within {} s",
        shown(method),
        timeout.as_millis().div_ceil(1000)
    )
}

/// A running task as the process knows it.
struct Runner {
    token: Arc<CancelToken>,
    principal: String,
}

/// The process-wide half of the server: one per `taskstream serve`, shared by every
/// connection it serves.
///
/// It lives as long as the process: [`start`](Self::start) makes it (and its sweep thread),
/// every connection holds an `Arc` of it, and [`shut_down`](Self::shut_down) stops its tasks
/// and threads. What it holds lives as long as it does (the configuration, the store handle,
/// the tools, what the server says of itself, the sweep, the step workers), except the
/// entries of its tables, each of which lives as long as one thing: a running task (`runners`,
/// `threads`, `wakers`), a connection (`conns`, held weakly: a connection that is gone is
/// skipped), a principal (`failures`), a request asked of a client (`asked`), an input request
/// (`inputs`). Nothing of one connection is kept here: that is the engine's `ConnectionState`.
pub struct Process {
    pub(crate) config: ServeConfig,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) server_info: Value,
    /// The tools this server offers.
    pub(crate) tools: Registry,
    /// What `initialize` and `server/discover` say beyond tools and Tasks, and where other
    /// requests go (the gateway).
    pub(crate) extra: Extra,
    /// Cancellation and owner of each running task.
    runners: Mutex<HashMap<u128, Runner>>,
    /// Task threads not yet joined (finished ones are pruned as new ones start).
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Tasks of stepped tools, which wait without a thread of their own.
    steps: Arc<steps::Scheduler>,
    /// Connections to tell about ended tasks.
    conns: Mutex<Vec<Weak<dyn Peer>>>,
    /// Per-task wake-ups for stream deliveries that wait without a thread.
    wakers: Mutex<HashMap<u128, Weak<Notify>>>,
    /// The failed-lookup allowance of each principal, for connections that share one (HTTP).
    failures: Mutex<HashMap<String, Arc<Mutex<FailedLookups>>>>,
    shutdown: AtomicBool,
    /// SIGTERM arrived: not ready, though still serving (`--drain-secs`).
    draining: AtomicBool,
    /// Wakes the sweep thread at shutdown.
    shutdown_signal: (Mutex<bool>, Condvar),
    sweep: Mutex<Option<JoinHandle<()>>>,
    /// Requests made of a client (the gateway's relays), waiting for its answer, by id.
    asked: Mutex<HashMap<String, std::sync::mpsc::SyncSender<Result<Value, Value>>>>,
    asked_ids: std::sync::atomic::AtomicU64,
    /// Input that running tasks ask of their clients (SEP-2663 `input_required`).
    pub(crate) inputs: super::input::Inputs,
}

impl Process {
    /// Starts the process-wide state and its retention sweep (once a second).
    ///
    /// # Errors
    /// The error of starting the sweep thread.
    pub fn start(config: ServeConfig, store: Arc<dyn TaskStore>) -> std::io::Result<Arc<Process>> {
        let tools = Registry::new(crate::workloads::builtin(u64::from(
            config.retention.max_payload_bytes,
        )));
        Process::start_with(config, store, tools, Extra::builtin())
    }

    /// Starts a process offering `tools`, described by `extra`.
    ///
    /// # Errors
    /// The error of starting the sweep thread.
    pub(crate) fn start_with(
        config: ServeConfig,
        store: Arc<dyn TaskStore>,
        tools: Registry,
        extra: Extra,
    ) -> std::io::Result<Arc<Process>> {
        let store: Arc<dyn TaskStore> = Arc::new(crate::metrics::Metered(store));
        let process = Arc::new(Process {
            config,
            store,
            server_info: extra.identity.server_info.clone(),
            tools,
            extra,
            runners: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            steps: Arc::default(),
            conns: Mutex::new(Vec::new()),
            wakers: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            shutdown: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            shutdown_signal: (Mutex::new(false), Condvar::new()),
            sweep: Mutex::new(None),
            asked: Mutex::new(HashMap::new()),
            asked_ids: std::sync::atomic::AtomicU64::new(0),
            inputs: super::input::Inputs::default(),
        });
        if let Some(f) = &process.extra.forward {
            f.attach(&process);
        }
        let sweep = std::thread::Builder::new().name("sweep".into()).spawn({
            let p = Arc::clone(&process);
            move || p.run_sweep()
        })?;
        *lock(&process.sweep) = Some(sweep);
        if process.store.is_shared() {
            // Another replica's append wakes no waker here: the store's signal (rung by the
            // database) wakes every waiting stream, each of which reads what is new.
            let doorbell = std::thread::Builder::new().name("doorbell".into()).spawn({
                let p = Arc::downgrade(&process);
                move || run_doorbell(&p)
            })?;
            lock(&process.threads).push(doorbell);
        }
        Ok(process)
    }

    /// The configuration every connection starts from.
    #[must_use]
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// Marks the process as draining: `/readyz` answers 503 from now on, while everything is
    /// still served until [`begin_shut_down`](Self::begin_shut_down).
    pub(crate) fn begin_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether the process drains or shuts down (not ready for new clients).
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed) || self.is_shutting_down()
    }

    /// Whether the process is ready for traffic (`/readyz`): `Err` says why not.
    ///
    /// # Errors
    /// Shutting down, or the store cannot take writes.
    pub(crate) fn readiness(&self) -> Result<(), String> {
        if self.is_draining() {
            return Err("shutting down".into());
        }
        self.store.health()
    }

    /// Whether [`shut_down`](Self::shut_down) has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Begins shutting down: streams waiting without a thread see it when woken, and are.
    pub fn begin_shut_down(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        self.wake_all();
    }

    /// Stops the process: every running task's thread is told to stop (the task stays
    /// `working` in the store and ends `failed` at the next start, as after a crash), the sweep
    /// stops, and every thread is joined. Idempotent.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        for r in lock(&self.runners).values() {
            r.token.cancel();
        }
        {
            let (flag, cond) = &self.shutdown_signal;
            *lock(flag) = true;
            cond.notify_all();
        }
        if let Some(sweep) = lock(&self.sweep).take() {
            let _ = sweep.join();
        }
        self.steps.stop();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            // A panicked task thread has nothing left to clean up.
            let _ = t.join();
        }
        self.wake_all();
    }

    fn run_sweep(&self) {
        let (flag, cond) = &self.shutdown_signal;
        let mut stopped = lock(flag);
        let mut heap = HeapTrimmer::default();
        loop {
            stopped = cond
                .wait_timeout_while(stopped, Duration::from_secs(1), |s| !*s)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if *stopped {
                return;
            }
            drop(stopped);
            let removed = self.store.sweep(clock::now());
            if removed > 0 {
                log!(Debug, "retention removed {removed} tasks");
                // Streams of removed tasks complete; tell them.
                self.wake_all();
            }
            if let Some(tick) = heap.tick().filter(|t| t.trimmed) {
                log!(
                    Debug,
                    "gave freed heap back ({} bytes free in the arenas)",
                    tick.free
                );
            }
            stopped = lock(flag);
        }
    }

    /// Asks a client a request on behalf of the server behind the gateway (`sampling/…`,
    /// `elicitation/…`, `roots/list`): the most recent live 2025 session on stdio or the data
    /// dir's socket, of `principal` when given. Waits up to `timeout` for the answer.
    ///
    /// # Errors
    /// The JSON-RPC error object to pass back: the client's own, or one saying that no client
    /// was connected or that it did not answer in time.
    pub fn ask_client(
        &self,
        principal: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Value> {
        let conn = lock(&self.conns)
            .iter()
            .filter_map(Weak::upgrade)
            .rfind(|c| c.can_be_asked() && principal.is_none_or(|p| c.principal() == p));
        match conn {
            Some(conn) => self.ask_connection(&*conn, method, params, timeout),
            None => Err(serde_json::json!({"code": -32603, "message": format!(
                "no client is connected that could answer {}", shown(method)
            )})),
        }
    }

    /// [`ask_client`](Self::ask_client) of one connection (which can be asked).
    pub(crate) fn ask_connection(
        &self,
        conn: &dyn Peer,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Value> {
        let n = self.asked_ids.fetch_add(1, Ordering::Relaxed);
        let id = format!("{ASKED_PREFIX}{n}");
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        lock(&self.asked).insert(id.clone(), tx);
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        conn.send_line(line.to_string().as_bytes());
        let answer = rx.recv_timeout(timeout);
        lock(&self.asked).remove(&id);
        answer.unwrap_or_else(|_| {
            Err(serde_json::json!({"code": -32603, "message": unanswered(method, timeout)}))
        })
    }

    /// A client's answer to a request of [`ask_client`](Self::ask_client); whether it was one.
    pub(crate) fn client_answered(&self, id: &str, answer: Result<Value, Value>) -> bool {
        match lock(&self.asked).remove(id) {
            Some(tx) => {
                let _ = tx.try_send(answer);
                true
            }
            None => false,
        }
    }

    /// Registers a connection to be told when tasks end.
    pub(crate) fn register<P: Peer + 'static>(&self, conn: &Arc<P>) {
        let mut conns = lock(&self.conns);
        conns.retain(|c| c.strong_count() > 0);
        let weak: Weak<P> = Arc::downgrade(conn);
        conns.push(weak);
    }

    /// The failed-lookup allowance shared by `principal`'s connections (HTTP).
    pub(crate) fn failures_of(&self, principal: &str) -> Arc<Mutex<FailedLookups>> {
        let mut map = lock(&self.failures);
        Arc::clone(map.entry(principal.to_owned()).or_insert_with(|| {
            Arc::new(Mutex::new(FailedLookups::new(
                self.config.max_failed_lookups_per_minute,
            )))
        }))
    }

    /// The wake-up of task `key`: notified after each of its appends, at its end, and when
    /// retention removed tasks.
    pub(crate) fn waker(&self, key: u128) -> Arc<Notify> {
        let mut map = lock(&self.wakers);
        if let Some(n) = map.get(&key).and_then(Weak::upgrade) {
            return n;
        }
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        let n = Arc::new(Notify::new());
        map.insert(key, Arc::downgrade(&n));
        n
    }

    /// Wakes the deliveries waiting on task `key`.
    pub(crate) fn wake(&self, key: u128) {
        let n = lock(&self.wakers).get(&key).and_then(Weak::upgrade);
        if let Some(n) = n {
            n.notify_waiters();
        }
    }

    fn wake_all(&self) {
        let all: Vec<Arc<Notify>> = lock(&self.wakers)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for n in all {
            n.notify_waiters();
        }
    }

    /// How many tasks of `principal` are running, and how many in all.
    pub(crate) fn running(&self, principal: &str) -> (usize, usize) {
        let runners = lock(&self.runners);
        let mine = runners
            .values()
            .filter(|r| r.principal == principal)
            .count();
        (mine, runners.len())
    }

    /// Records task `key` as running (before its thread starts).
    pub(crate) fn add_runner(&self, key: u128, principal: &str) -> Arc<CancelToken> {
        let token = Arc::new(CancelToken::default());
        lock(&self.runners).insert(
            key,
            Runner {
                token: Arc::clone(&token),
                principal: principal.to_owned(),
            },
        );
        token
    }

    /// Stops task `key`'s thread (it was cancelled); whether it was running.
    pub(crate) fn stop_runner(&self, key: u128) -> bool {
        let token = lock(&self.runners).get(&key).map(|r| Arc::clone(&r.token));
        token.is_some_and(|t| {
            t.cancel();
            true
        })
    }

    /// Starts task `key`, which runs `workload` and stores its end: on a thread of its own, or,
    /// for a stepped tool, on the shared pool that runs due steps (no thread while it waits).
    pub(crate) fn spawn_task(
        self: &Arc<Self>,
        key: u128,
        task_id: String,
        principal: String,
        workload: Workload,
        token: Arc<CancelToken>,
        codec: Codec,
    ) {
        if let Some(start) = workload.tool.stepper() {
            let started = catch_unwind(AssertUnwindSafe(|| start(&workload.args)));
            match started {
                Ok(steps) => {
                    let task = steps::SteppedTask {
                        key,
                        task_id,
                        principal,
                        codec,
                        token,
                        tool: Arc::clone(&workload.tool),
                        steps,
                        next: None,
                    };
                    self.steps.start(self, task);
                }
                Err(panic) => {
                    let e = workload.tool.panicked(&*panic);
                    self.end_task(key, &task_id, &principal, Err(e), codec);
                }
            }
            return;
        }
        let process = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("task-{}", &task_id[..8.min(task_id.len())]))
            .stack_size(TASK_STACK_BYTES)
            .spawn({
                let task_id = task_id.clone();
                let principal = principal.clone();
                move || process.run_task(key, &task_id, &principal, &workload, &token, codec)
            });
        match spawned {
            Ok(handle) => {
                let mut threads = lock(&self.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
            }
            Err(e) => {
                log!(Error, "task {task_id}: cannot start a thread: {e}");
                self.end_task(
                    key,
                    &task_id,
                    &principal,
                    Err(ToolError::Failed(
                        "cannot start: the server could not start the task (its log says why)"
                            .into(),
                    )),
                    codec,
                );
            }
        }
    }

    fn run_task(
        &self,
        key: u128,
        task_id: &str,
        principal: &str,
        workload: &Workload,
        token: &CancelToken,
        codec: Codec,
    ) {
        let mut sink = TaskSink {
            process: self,
            key,
            task_id,
            principal,
            codec,
            token,
            next: None,
        };
        let outcome = workload.run(&mut sink);
        self.end_task(key, task_id, principal, outcome, codec);
    }

    /// Stores a task's end (unless it was cancelled) and announces it.
    ///
    /// A tool-level failure (a result with `isError: true`) ends a SEP-1686 (legacy) task as
    /// `failed`, but a SEP-2663 (modern) task as `completed` with that result: the extension
    /// reserves `failed` for protocol errors (MCP-DIGEST b.3). Each task's status, its terminal
    /// status event and `tasks/get` agree either way (RL-01).
    fn end_task(
        &self,
        key: u128,
        task_id: &str,
        principal: &str,
        outcome: Result<Outcome, ToolError>,
        codec: Codec,
    ) {
        let end = match outcome {
            Ok(Outcome::Failed { message, result }) if codec == Codec::Modern => {
                Some((TaskStatus::Completed, Some(message), Some(result), None))
            }
            Ok(Outcome::Completed(result)) => {
                Some((TaskStatus::Completed, None, Some(result), None))
            }
            Ok(Outcome::Failed { message, result }) => {
                let error = ServerError::Internal(message.clone()).to_json();
                Some((TaskStatus::Failed, Some(message), Some(result), Some(error)))
            }
            Err(ToolError::Cancelled) => None,
            Err(e) => {
                let message = e.message();
                let result = text_result(&message, true);
                let error = ServerError::Internal(message.clone()).to_json();
                Some((TaskStatus::Failed, Some(message), Some(result), Some(error)))
            }
        };
        let finished = match end {
            None => Err(AppendError::Terminal),
            Some((status, message, result, error)) => {
                self.store_end(task_id, status, message, result, error)
            }
        };
        lock(&self.runners).remove(&key);
        match finished {
            Ok(_) => {
                if let Some(v) = self.store.task(task_id) {
                    log!(Info, "task {task_id} {}", v.record.status.as_str());
                }
                self.announce(key, principal);
            }
            Err(AppendError::Terminal | AppendError::UnknownTask) => {}
            Err(e) => log!(Error, "task {task_id}: cannot store its end: {e:?}"),
        }
    }

    /// Stores a task's end. With a shared store whose database is away for a moment, tries
    /// again (with backoff, for a while, until shutdown): the replica is alive, so no other
    /// replica would end the task for it, and it must not stay `working`.
    fn store_end(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<Value>,
        error: Option<Value>,
    ) -> Result<taskstream_core::Seq, AppendError> {
        let mut backoff = Duration::from_millis(100);
        let give_up = Instant::now() + Duration::from_secs(120);
        loop {
            let r = self.store.finish(
                task_id,
                status,
                message.clone(),
                result.clone(),
                error.clone(),
                clock::now(),
            );
            let transient = matches!(r, Err(AppendError::Storage(StoreError::Database(_))));
            if !transient
                || !self.store.is_shared()
                || self.is_shutting_down()
                || Instant::now() >= give_up
            {
                return r;
            }
            log!(
                Warn,
                "task {task_id}: cannot store its end yet; trying again"
            );
            let (flag, cond) = &self.shutdown_signal;
            let g = lock(flag);
            let _ = cond
                .wait_timeout_while(g, backoff, |s| !*s)
                .unwrap_or_else(PoisonError::into_inner);
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Tells every live connection of `principal` that task `key` reached a terminal status
    /// (status notification, waiting `tasks/result` answers), and wakes its streams.
    pub(crate) fn announce(&self, key: u128, principal: &str) {
        let conns: Vec<Arc<dyn Peer>> =
            lock(&self.conns).iter().filter_map(Weak::upgrade).collect();
        for c in conns {
            c.task_finished(key, principal);
        }
        self.wake(key);
    }
}

/// Wakes every waiting stream of the process whenever a shared store's signal moves, until
/// the process shuts down (or is dropped).
fn run_doorbell(process: &Weak<Process>) {
    let mut epoch = match process.upgrade() {
        Some(p) => p.store.changes().epoch(),
        None => return,
    };
    loop {
        let Some(p) = process.upgrade() else { return };
        if p.is_shutting_down() {
            return;
        }
        let store = Arc::clone(&p.store);
        drop(p);
        let now = store.changes().wait_past(epoch, Duration::from_millis(500));
        if now != epoch {
            epoch = now;
            if let Some(p) = process.upgrade() {
                p.wake_all();
                let conns: Vec<Arc<dyn Peer>> =
                    lock(&p.conns).iter().filter_map(Weak::upgrade).collect();
                for c in conns {
                    c.check_remote_ends();
                }
            }
        }
    }
}

impl steps::Host for Process {
    /// Runs one step of `task`; a panic ends the work failed.
    fn run_step(&self, task: &mut steps::SteppedTask) -> Result<Step, ToolError> {
        let mut sink = TaskSink {
            process: self,
            key: task.key,
            task_id: &task.task_id,
            principal: &task.principal,
            codec: task.codec,
            token: &task.token,
            next: task.next,
        };
        let steps = &mut task.steps;
        let ran = catch_unwind(AssertUnwindSafe(|| {
            let mut ctx = TaskContext::new(&mut sink);
            steps.step(&mut ctx)
        }));
        task.next = sink.next;
        match ran {
            Ok(outcome) => outcome,
            Err(panic) => Err(task.tool.panicked(&*panic)),
        }
    }

    fn end_task(
        &self,
        key: u128,
        task_id: &str,
        principal: &str,
        outcome: Result<Outcome, ToolError>,
        codec: Codec,
    ) {
        Process::end_task(self, key, task_id, principal, outcome, codec);
    }
}

/// A connection as the process sees it: told when tasks end, and asked on behalf of a task
/// (SEP-2663 input, the gateway's relays). The process holds it weakly: a connection that is
/// gone is simply skipped.
pub(crate) trait Peer: Send + Sync {
    /// The principal the connection acts as.
    fn principal(&self) -> &str;
    /// Task `key` of `principal` ended: the connection queues what it owes for it.
    fn task_finished(&self, key: u128, principal: &str);
    /// The store's signal moved: with a shared store, the connection looks for tasks it
    /// waits for that ended through another replica.
    fn check_remote_ends(&self);
    /// Whether a request may be asked of this client now.
    fn can_be_asked(&self) -> bool;
    /// Writes one line to the client.
    fn send_line(&self, line: &[u8]);
}

/// A task's sink: appends each event to the store (durable before it returns), then wakes the
/// task's deliveries. Only the task's own thread appends events while it runs (a cancellation
/// ends it, after which appends are refused), so the seq the next event gets is known here.
struct TaskSink<'a> {
    process: &'a Process,
    key: u128,
    task_id: &'a str,
    principal: &'a str,
    /// The era the task was created in: how it asks its client for input.
    codec: Codec,
    token: &'a CancelToken,
    /// The seq the next event gets, once known.
    next: Option<u64>,
}

impl TaskSink<'_> {
    fn next_seq(&mut self) -> Result<u64, ToolError> {
        if let Some(n) = self.next {
            return Ok(n);
        }
        let view = self
            .process
            .store
            .task(self.task_id)
            .ok_or(ToolError::Cancelled)?;
        let n = view.retained.next().get();
        self.next = Some(n);
        Ok(n)
    }
}

impl Sink for TaskSink<'_> {
    fn emit(
        &mut self,
        expected: Option<u64>,
        event_type: &str,
        payload: &[u8],
    ) -> Result<u64, ToolError> {
        if self.token.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if let Some(expected) = expected {
            let next = self.next_seq()?;
            if next != expected {
                return Err(ToolError::SeqMismatch { expected, next });
            }
        }
        let appended = self
            .process
            .store
            .emit(self.task_id, event_type, payload, clock::now());
        self.process.wake(self.key);
        match appended {
            Ok(seq) => {
                self.next = Some(seq.get() + 1);
                Ok(seq.get())
            }
            Err(AppendError::Terminal | AppendError::UnknownTask) => Err(ToolError::Cancelled),
            Err(
                e @ (AppendError::PayloadTooLarge { .. }
                | AppendError::InvalidPayload(_)
                | AppendError::InvalidType(_)),
            ) => Err(ToolError::Failed(refusal(&e))),
            Err(e) => {
                if matches!(e, AppendError::Storage(_)) {
                    log!(
                        Error,
                        "task {}: cannot record an event: {e:?}",
                        self.task_id
                    );
                }
                Err(ToolError::Failed(format!(
                    "cannot record an event: {}",
                    refusal(&e)
                )))
            }
        }
    }

    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ToolError> {
        let payload = progress_payload(progress, total, message)?;
        self.emit(None, PROGRESS_TYPE, &payload).map(|_| ())
    }

    fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    fn wait_cancelled(&self, deadline: Instant) -> bool {
        self.token.wait_until(deadline)
    }

    fn on_cancel(&mut self, callback: Box<dyn FnOnce() + Send>) {
        self.token.on_cancel(callback);
    }

    fn task_id(&self) -> Option<&str> {
        Some(self.task_id)
    }

    fn ask(&mut self, method: &str, params: Value, deadline: Instant) -> Result<Value, AskError> {
        if self.token.is_cancelled() {
            return Err(AskError::Cancelled);
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.codec {
            Codec::Legacy => self
                .process
                .ask_client(Some(self.principal), method, params, timeout)
                .map_err(AskError::Refused),
            Codec::Modern => self.ask_input(method, params, timeout),
        }
    }
}

impl TaskSink<'_> {
    /// A SEP-2663 task asks: `input_required` until `tasks/update` answers (see `input.rs`).
    fn ask_input(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        // The request that `tasks/get` shows first, then the status event: a client that
        // sees `input_required` on the stream finds the request on `tasks/get` (and one
        // that sees `working` again finds it gone).
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let input = self
            .process
            .inputs
            .add(self.key, method, params, tx.clone());
        if let Err(e) = self.status_event(TaskStatus::InputRequired) {
            self.process.inputs.remove(self.key, &input);
            return Err(e);
        }
        self.token.on_cancel(Box::new(move || {
            let _ = tx.try_send(None);
        }));
        let got = rx.recv_timeout(timeout);
        self.process.inputs.remove(self.key, &input);
        match got {
            Ok(Some(answer)) => {
                self.status_event(TaskStatus::Working)?;
                Ok(answer)
            }
            // Cancelled: the cancellation stores the terminal status.
            Ok(None) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(AskError::Cancelled)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                self.status_event(TaskStatus::Working)?;
                Err(AskError::Unanswered(unanswered(method, timeout)))
            }
        }
    }

    /// Appends a non-terminal `dev.taskstream.task.status` event (durable before it returns).
    fn status_event(&mut self, status: TaskStatus) -> Result<(), AskError> {
        let payload = status.event_payload(None);
        let appended = self.process.store.append(
            self.task_id,
            STATUS_EVENT_TYPE,
            payload.as_bytes(),
            clock::now(),
        );
        self.process.wake(self.key);
        match appended {
            Ok(seq) => {
                self.next = Some(seq.get() + 1);
                Ok(())
            }
            Err(AppendError::Terminal | AppendError::UnknownTask) => Err(AskError::Cancelled),
            Err(e) => {
                log!(
                    Error,
                    "task {}: cannot record its status: {e:?}",
                    self.task_id
                );
                Err(AskError::Unanswered(format!(
                    "cannot record the task's status: {}",
                    refusal(&e)
                )))
            }
        }
    }
}

/// The payload of a `dev.taskstream.progress` event: `{progress, total?, message?}`.
///
/// # Errors
/// A progress or total that is not a finite number.
pub(crate) fn progress_payload(
    progress: f64,
    total: Option<f64>,
    message: Option<&str>,
) -> Result<Vec<u8>, ToolError> {
    let num = |x: f64| {
        serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| ToolError::failed("progress and total must be finite numbers"))
    };
    let mut p = serde_json::Map::new();
    p.insert("progress".into(), num(progress)?);
    if let Some(t) = total {
        p.insert("total".into(), num(t)?);
    }
    if let Some(m) = message {
        p.insert("message".into(), Value::String(m.to_owned()));
    }
    serde_json::to_vec(&p).map_err(|_| ToolError::failed("progress could not be serialised"))
}

/// What a server says of itself beyond its tools and Tasks, and where requests it does not
/// answer itself go.
#[derive(Clone)]
pub(crate) struct Extra {
    /// What `initialize` and `server/discover` say.
    pub(crate) identity: Identity,
    /// Where other requests go.
    pub(crate) forward: Option<Arc<dyn Forward>>,
}

impl Extra {
    /// `taskstream serve`'s.
    pub(crate) fn builtin() -> Extra {
        Extra {
            identity: Identity::builtin(),
            forward: None,
        }
    }
}

/// Requests a server passes on instead of answering (a gateway's: to the server behind it),
/// given to [`ServerBuilder::forward`](crate::ServerBuilder::forward). A request of a method it
/// [`handles`](Self::handles) is passed on from a thread of its own and answered with what
/// [`request`](Self::request) returns; the modern `_meta` keys of the request are this hop's
/// and are taken off first.
pub trait Forward: Send + Sync {
    /// Whether requests of `method` are passed on.
    fn handles(&self, method: &str) -> bool;
    /// Passes a request on and waits for its answer (a result, or a JSON-RPC error object).
    fn request(&self, method: &str, params: serde_json::Map<String, Value>)
        -> Result<Value, Value>;
    /// Passes a notification on.
    fn notify(&self, method: &str, params: serde_json::Map<String, Value>);
    /// Called once the process exists, so that the other side can reach its clients.
    fn attach(&self, _process: &Arc<Process>) {}
}
