//! Tasks of stepped tools ([`crate::tool::Steps`]): they wait without a thread of their own.
//!
//! A parked task is an entry in a map and a deadline in a heap; a small pool of threads (two
//! to eight, one per CPU, started with the first such task) runs the steps that are due, one
//! at a time per task. Cancellation moves a parked task to the ready queue at once, so a
//! cancelled task with a distant deadline ends promptly.
//!
//! **Invariants:** a task is in at most one of `parked`, `ready`, or a worker's hands, so its
//! steps never run concurrently and none is lost; the check "cancelled?" and the parking happen
//! under the scheduler's lock, and a cancellation's wake-up takes the same lock, so a
//! cancellation can never slip in between and leave a cancelled task parked. Lock order:
//! `state` is taken after a task's `CancelToken` callbacks have been collected (never inside
//! them) and never held across a step or store I/O.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::cancel::CancelToken;
use crate::log::log;
use crate::tool::{Outcome, Step, Steps, Tool, ToolError};
use crate::wire::era::Codec;

/// Stack of a task thread (and of a step worker): workloads are shallow.
pub(super) const TASK_STACK_BYTES: usize = 256 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the workers run tasks for (the process): it runs one step of a task, with the task's
/// sink, and ends a task. The scheduler holds it weakly: workers stop once it is gone.
pub(super) trait Host: Send + Sync + 'static {
    /// Runs one step of `task`.
    fn run_step(&self, task: &mut SteppedTask) -> Result<Step, ToolError>;
    /// Ends task `key` with `outcome`.
    fn end_task(
        &self,
        key: u128,
        task_id: &str,
        principal: &str,
        outcome: Result<Outcome, ToolError>,
        codec: Codec,
    );
}

/// A task of a stepped tool, between two steps.
pub(super) struct SteppedTask {
    pub(super) key: u128,
    pub(super) task_id: String,
    pub(super) principal: String,
    pub(super) codec: Codec,
    pub(super) token: Arc<CancelToken>,
    pub(super) tool: Arc<Tool>,
    pub(super) steps: Box<dyn Steps>,
    /// The seq its next event gets, once known.
    pub(super) next: Option<u64>,
}

#[derive(Default)]
struct State {
    /// Parked tasks by key, with the deadline they wait for.
    parked: HashMap<u128, (Instant, SteppedTask)>,
    /// Deadlines; an entry whose task is no longer parked at that deadline is stale.
    timers: BinaryHeap<Reverse<(Instant, u128)>>,
    /// Tasks whose next step is due.
    ready: VecDeque<SteppedTask>,
    stopping: bool,
}

/// The process's runner of stepped tasks.
#[derive(Default)]
pub(super) struct Scheduler {
    state: Mutex<State>,
    cond: Condvar,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Scheduler {
    /// Takes `task` in: its first step runs at once. Starts the pool on first use.
    pub(super) fn start<H: Host>(self: &Arc<Self>, process: &Arc<H>, task: SteppedTask) {
        let key = task.key;
        let token = Arc::clone(&task.token);
        {
            let mut s = lock(&self.state);
            s.ready.push_back(task);
        }
        self.cond.notify_one();
        // A cancellation wakes a parked task at once (and is a no-op for one that is not).
        let me = Arc::downgrade(self);
        token.on_cancel(Box::new(move || {
            if let Some(me) = me.upgrade() {
                me.wake(key);
            }
        }));
        self.ensure_workers(process);
    }

    /// Moves task `key` from parked to ready, if it is parked.
    fn wake(&self, key: u128) {
        let mut s = lock(&self.state);
        if let Some((_, task)) = s.parked.remove(&key) {
            s.ready.push_back(task);
            drop(s);
            self.cond.notify_one();
        }
    }

    fn ensure_workers<H: Host>(self: &Arc<Self>, process: &Arc<H>) {
        let mut workers = lock(&self.workers);
        if !workers.is_empty() || lock(&self.state).stopping {
            return;
        }
        let n = std::thread::available_parallelism()
            .map_or(2, std::num::NonZeroUsize::get)
            .clamp(2, 8);
        for i in 0..n {
            let me = Arc::clone(self);
            let process = Arc::downgrade(process);
            let spawned = std::thread::Builder::new()
                .name(format!("taskstream-steps-{i}"))
                .stack_size(TASK_STACK_BYTES)
                .spawn(move || me.work(&process));
            match spawned {
                Ok(h) => workers.push(h),
                // With at least one worker the tasks still run; with none, the next stepped
                // task tries again.
                Err(e) => log!(Error, "cannot start a worker for stepped tasks: {e}"),
            }
        }
    }

    /// The next task whose step is due, waiting for one; `None` when stopping.
    fn next_due(&self) -> Option<SteppedTask> {
        let mut s = lock(&self.state);
        loop {
            let now = Instant::now();
            while let Some(Reverse((at, key))) = s.timers.peek().copied() {
                if at > now {
                    break;
                }
                s.timers.pop();
                if s.parked.get(&key).is_some_and(|(due, _)| *due == at) {
                    if let Some((_, task)) = s.parked.remove(&key) {
                        s.ready.push_back(task);
                    }
                }
            }
            if let Some(task) = s.ready.pop_front() {
                if !s.ready.is_empty() {
                    self.cond.notify_one();
                }
                return Some(task);
            }
            if s.stopping {
                return None;
            }
            s = match s.timers.peek() {
                Some(Reverse((at, _))) => {
                    let left = at.saturating_duration_since(now);
                    self.cond
                        .wait_timeout(s, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
                None => self
                    .cond
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }

    fn work<H: Host>(&self, process: &Weak<H>) {
        while let Some(mut task) = self.next_due() {
            let Some(process) = process.upgrade() else {
                return;
            };
            let outcome = if task.token.is_cancelled() {
                Err(ToolError::Cancelled)
            } else {
                process.run_step(&mut task)
            };
            match outcome {
                Ok(Step::WakeAt(at)) => {
                    let mut s = lock(&self.state);
                    // Checked under the lock the cancellation's wake-up takes: see the module.
                    if task.token.is_cancelled() || s.stopping {
                        drop(s);
                        process.end_task(
                            task.key,
                            &task.task_id,
                            &task.principal,
                            Err(ToolError::Cancelled),
                            task.codec,
                        );
                    } else if at <= Instant::now() {
                        s.ready.push_back(task);
                    } else {
                        s.timers.push(Reverse((at, task.key)));
                        s.parked.insert(task.key, (at, task));
                        drop(s);
                        // The earliest deadline may have changed.
                        self.cond.notify_one();
                    }
                }
                Ok(Step::Done(result)) => process.end_task(
                    task.key,
                    &task.task_id,
                    &task.principal,
                    Ok(result.into()),
                    task.codec,
                ),
                Err(e) => {
                    process.end_task(task.key, &task.task_id, &task.principal, Err(e), task.codec)
                }
            }
        }
    }

    /// Stops the pool: tasks still parked are dropped (their tokens were cancelled and their
    /// ends handled by the caller's cancellation), due ones run their cancellation first.
    pub(super) fn stop(&self) {
        lock(&self.state).stopping = true;
        self.cond.notify_all();
        let workers = std::mem::take(&mut *lock(&self.workers));
        for w in workers {
            // A panicked worker has nothing left to clean up.
            let _ = w.join();
        }
        let mut s = lock(&self.state);
        s.parked.clear();
        s.timers.clear();
        s.ready.clear();
    }
}
