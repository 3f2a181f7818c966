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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Notify;

use super::cancel::CancelToken;
use super::guard::FailedLookups;
use super::tasks::{refusal, Codec};
use super::wire::ServerError;
use super::Shared;
use crate::clock;
use crate::config::ServeConfig;
use crate::log::log;
use crate::store::{AppendError, StoreError, TaskStatus, TaskStore};
use crate::workloads::{text_result, Outcome, Sink, Stop, Workload};

/// Stack of a task thread: workloads are shallow.
const TASK_STACK_BYTES: usize = 256 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running task as the process knows it.
struct Runner {
    token: Arc<CancelToken>,
    principal: String,
}

/// The process-wide half of the server: one per `taskstream serve`, shared by every
/// connection it serves.
pub struct Process {
    pub(crate) config: ServeConfig,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) server_info: Value,
    /// Cancellation and owner of each running task.
    runners: Mutex<HashMap<u128, Runner>>,
    /// Task threads not yet joined (finished ones are pruned as new ones start).
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Connections to tell about ended tasks.
    conns: Mutex<Vec<Weak<Shared>>>,
    /// Per-task wake-ups for stream deliveries that wait without a thread.
    wakers: Mutex<HashMap<u128, Weak<Notify>>>,
    /// The failed-lookup allowance of each principal, for connections that share one (HTTP).
    failures: Mutex<HashMap<String, Arc<Mutex<FailedLookups>>>>,
    shutdown: AtomicBool,
    /// Wakes the sweep thread at shutdown.
    shutdown_signal: (Mutex<bool>, Condvar),
    sweep: Mutex<Option<JoinHandle<()>>>,
}

impl Process {
    /// Starts the process-wide state and its retention sweep (once a second).
    ///
    /// # Errors
    /// The error of starting the sweep thread.
    pub fn start(config: ServeConfig, store: Arc<dyn TaskStore>) -> std::io::Result<Arc<Process>> {
        let process = Arc::new(Process {
            config,
            store,
            server_info: super::lifecycle::server_info(),
            runners: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            conns: Mutex::new(Vec::new()),
            wakers: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            shutdown: AtomicBool::new(false),
            shutdown_signal: (Mutex::new(false), Condvar::new()),
            sweep: Mutex::new(None),
        });
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
            stopped = lock(flag);
        }
    }

    /// Registers a connection to be told when tasks end.
    pub(crate) fn register(&self, conn: &Arc<Shared>) {
        let mut conns = lock(&self.conns);
        conns.retain(|c| c.strong_count() > 0);
        conns.push(Arc::downgrade(conn));
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

    /// Starts the thread of task `key`, which runs `workload` and stores its end.
    pub(crate) fn spawn_task(
        self: &Arc<Self>,
        key: u128,
        task_id: String,
        principal: String,
        workload: Workload,
        token: Arc<CancelToken>,
        codec: Codec,
    ) {
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
                    Err(Stop::Refused(
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
            token,
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
        outcome: Result<Outcome, Stop>,
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
            Err(Stop::Refused(message)) => {
                let result = text_result(&message, true);
                let error = ServerError::Internal(message.clone()).to_json();
                Some((TaskStatus::Failed, Some(message), Some(result), Some(error)))
            }
            Err(Stop::Cancelled) => None,
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
        let conns: Vec<Arc<Shared>> = lock(&self.conns).iter().filter_map(Weak::upgrade).collect();
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
                let conns: Vec<Arc<Shared>> =
                    lock(&p.conns).iter().filter_map(Weak::upgrade).collect();
                for c in conns {
                    c.check_remote_ends();
                }
            }
        }
    }
}

/// A task's sink: appends each event to the store (durable before it returns), then wakes the
/// task's deliveries.
struct TaskSink<'a> {
    process: &'a Process,
    key: u128,
    task_id: &'a str,
    token: &'a CancelToken,
}

impl Sink for TaskSink<'_> {
    fn emit(&mut self, event_type: &str, payload: &[u8]) -> Result<(), Stop> {
        if self.token.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        let appended = self
            .process
            .store
            .append(self.task_id, event_type, payload, clock::now());
        self.process.wake(self.key);
        match appended {
            Ok(_) => Ok(()),
            Err(AppendError::Terminal | AppendError::UnknownTask) => Err(Stop::Cancelled),
            Err(e @ AppendError::PayloadTooLarge { .. }) => Err(Stop::Refused(refusal(&e))),
            Err(e) => {
                if matches!(e, AppendError::Storage(_)) {
                    log!(
                        Error,
                        "task {}: cannot record an event: {e:?}",
                        self.task_id
                    );
                }
                Err(Stop::Refused(format!(
                    "cannot record an event: {}",
                    refusal(&e)
                )))
            }
        }
    }

    fn wait_until(&mut self, deadline: Instant) -> Result<(), Stop> {
        if self.token.wait_until(deadline) {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }
}
