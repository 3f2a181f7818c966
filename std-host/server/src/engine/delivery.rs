//! The delivery thread: the one place that writes stream frames, status notifications and
//! deferred `tasks/result` answers.
//!
//! It waits on the store's change signal, then pumps the core's stream table
//! ([`StreamTable::poll`](taskstream_core::StreamTable::poll)) in bounded batches, reading
//! each event from the store, never from a per-client queue: a slow reader only slows this
//! thread (stdout blocks), never a task, and memory does not grow with the backlog. A stream
//! that falls behind retention is answered `events_gone` by the core's rule (RS-07), and so is
//! one whose event was dropped between the pump and the read: the read goes back to the table
//! ([`StreamTable::missed`](taskstream_core::StreamTable::missed)), which answers.
//!
//! Within a batch each task's progress (retained range, lifecycle) is read once and cached,
//! and each stream's next events come from one range read, without copying them out of
//! storage ([`RawEvent`]); the change epoch is read before the batch, so an append after a
//! cached read still wakes the next round.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use taskstream_core::streams::{Missed, Progress, Pump};

use super::state::ConnectionState;
use super::streams::{missed_line, progress_now};
use crate::log::log;
use crate::process::Peer;
use crate::wire::era::Codec;
use crate::wire::task::{final_answer, format_task_id, task_json};
use crate::wire::{self, ServerError, EXIT_STORAGE_FAILED, STORAGE_FAILED};
use taskstream_store::RawEvent;

/// Events written per batch before the locks are released (so requests are answered while
/// streams flow).
const BATCH: usize = 256;
/// Events read ahead for one stream at least, however many streams share a batch.
const MIN_READ_AHEAD: usize = 16;
/// The longest sleep without a change (to notice shutdown).
const IDLE: Duration = Duration::from_millis(500);
/// Write coalescing: caught up, and woken by a change that came within this long (events
/// arriving faster than one per this), the thread waits this long before it pumps, so that
/// one `write` (and one wake-up) carries the events of that time instead of one each. A
/// change after a quieter spell is sent at once: a trickle is never delayed.
const LINGER: Duration = Duration::from_micros(50);

/// Storage failed (fail-stop): ends every open stream and every waiting `tasks/result` with
/// an error saying so, flushes, and (in `taskstream serve`) exits with
/// [`EXIT_STORAGE_FAILED`], so that a supervisor restarts the server into recovery.
fn storage_failed(shared: &ConnectionState) {
    {
        let mut streams = shared.streams();
        let mut out = shared.out.batch();
        let ids: Vec<_> = streams.table.ids().cloned().collect();
        let e = ServerError::Internal(STORAGE_FAILED.into());
        for id in ids {
            streams.cancel(&id);
            out.line(&e.line(Some(&id)));
        }
        let waiters = std::mem::take(&mut shared.pending().waiters);
        for (_, id) in waiters {
            out.line(&e.line(Some(&id)));
        }
    }
    log!(
        Error,
        "storage failed; every client was told; the server stops (restart it to recover)"
    );
    if shared.exit_on_storage_failure.load(Ordering::Relaxed) {
        std::process::exit(EXIT_STORAGE_FAILED);
    }
}

/// Runs until shutdown.
pub(crate) fn run(shared: &Arc<ConnectionState>) {
    let mut buf = Vec::new();
    loop {
        // The epoch is read before the shutdown flag: shutdown sets the flag, then moves the
        // epoch, so either the flag is seen here or the wait below returns at once.
        let epoch = shared.process.store.changes().epoch();
        if shared.shutdown.load(Ordering::Relaxed) || shared.out.is_broken() {
            return;
        }
        if shared.process.store.has_failed() {
            return storage_failed(shared);
        }
        let busy = pump(shared, &mut buf);
        announce(shared);
        if !busy {
            let idle_from = Instant::now();
            shared.process.store.changes().wait_past(epoch, IDLE);
            if idle_from.elapsed() < LINGER {
                std::thread::sleep(LINGER);
            }
        }
    }
}

/// Writes up to [`BATCH`] stream frames; whether the batch was full (more may be ready).
fn pump(shared: &ConnectionState, buf: &mut Vec<u8>) -> bool {
    let mut streams = shared.streams();
    if streams.table.is_empty() {
        return false;
    }
    let streams = &mut *streams;
    let mut cache: HashMap<u128, Option<Progress>> = HashMap::new();
    // Events read ahead per stream: the pump hands out one frame at a time, round robin, but
    // a range read of the next few costs little more than reading one.
    let mut ahead: HashMap<u128, VecDeque<RawEvent>> = HashMap::new();
    let read_ahead = (BATCH / streams.table.len().max(1)).max(MIN_READ_AHEAD);
    let mut out = shared.out.batch();
    let mut written = 0;
    while written < BATCH {
        let step = streams.table.poll(|task| {
            *cache
                .entry(task)
                .or_insert_with(|| progress_now(&*shared.process.store, &format_task_id(task)))
        });
        let Some(step) = step else { break };
        written += 1;
        match step {
            Pump::Event { task, seq } => {
                let Some(meta) = streams.table.meta(task) else {
                    continue;
                };
                let queue = ahead.entry(task).or_default();
                while queue.front().is_some_and(|e| e.seq() < seq) {
                    queue.pop_front();
                }
                if queue.front().is_none_or(|e| e.seq() != seq) {
                    // One range read for the frames this stream may still get in this batch.
                    queue.clear();
                    let want = (BATCH + 1 - written).min(read_ahead);
                    let read =
                        shared
                            .process
                            .store
                            .read_raw_from(&meta.task_id, seq, want, &mut |e| queue.push_back(e));
                    if let Err(e) = read {
                        log!(Error, "reading events of task {}: {e}", meta.task_id);
                    }
                }
                if let Some(ev) = queue.pop_front().filter(|e| e.seq() == seq) {
                    out.line(wire::event_line(
                        buf,
                        &meta.task_id,
                        seq,
                        ev.event_type(),
                        ev.payload(),
                    ));
                    meta.open.delivered(seq.get());
                    continue;
                }
                // The read missed it (retention dropped it since the snapshot, or storage
                // failed): the table says how the stream ends, never with a skip (RS-07).
                let now = progress_now(&*shared.process.store, &meta.task_id);
                if let Some(end) = streams.table.missed(task, seq, now) {
                    let (Missed::Gone { meta, .. }
                    | Missed::Complete { meta, .. }
                    | Missed::Unreadable { meta, .. }) = &end;
                    out.line(&missed_line(&end, &meta.task_id, meta.era));
                }
            }
            Pump::Complete { id, meta, .. } => {
                // Already removed from the table: a client that reopens now is admitted.
                out.line(&wire::stream_result_line(&id, meta.era));
            }
            Pump::Gone {
                id, earliest, meta, ..
            } => {
                log!(
                    Debug,
                    "stream {id} of task {} fell behind retention",
                    meta.task_id
                );
                crate::metrics::METRICS.events_gone(crate::metrics::Gone::Overtaken);
                let e = ServerError::EventsGone {
                    task_id: meta.task_id,
                    earliest,
                };
                out.line(&e.line(Some(&id)));
            }
        }
    }
    written == BATCH
}

/// Sends what tasks that ended since the last round owe: `notifications/tasks/status` in a
/// legacy session, and the answers of `tasks/result` requests waiting for them.
pub(crate) fn announce(shared: &ConnectionState) {
    let (finished, ready) = {
        let mut pending = shared.pending();
        if pending.finished.is_empty() {
            return;
        }
        let finished = std::mem::take(&mut pending.finished);
        let mut ready = Vec::new();
        pending.waiters.retain(|(task, id)| {
            let done = finished.contains(task);
            if done {
                ready.push((*task, id.clone()));
            }
            !done
        });
        (finished, ready)
    };
    let legacy = shared.legacy.load(Ordering::Relaxed);
    for task in finished {
        let Some(view) = shared.process.store.task(&format_task_id(task)) else {
            continue;
        };
        if legacy {
            let params = task_json(&view, Codec::Legacy);
            shared
                .out
                .send(&wire::notification("notifications/tasks/status", &params));
        }
        for (_, id) in ready.iter().filter(|(t, _)| *t == task) {
            shared.out.send(&final_answer(id, &view));
        }
    }
}

/// What the process tells a connection: tasks that ended, and what may be asked of it.
impl ConnectionState {
    /// Task `key` of `principal` ended: queue what this connection owes for it.
    pub(crate) fn task_finished(&self, key: u128, principal: &str) {
        if principal != self.principal || self.shutdown.load(Ordering::Relaxed) {
            return;
        }
        self.pending().finished.push(key);
        if self.threaded {
            self.process.store.changes().notify();
        } else {
            announce(self);
        }
    }

    /// With a shared store: the tasks this connection's `tasks/result` requests wait for that
    /// ended through another replica (no task thread here announces them) are announced now.
    /// Called whenever the store's signal moves.
    pub(crate) fn check_remote_ends(&self) {
        if !self.process.store.is_shared() || self.shutdown.load(Ordering::Relaxed) {
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
                .process
                .store
                .task(&format_task_id(key))
                .is_none_or(|v| v.record.status.is_terminal());
            if ended {
                let principal = self.principal.clone();
                self.task_finished(key, &principal);
            }
        }
    }
}

impl Peer for ConnectionState {
    fn principal(&self) -> &str {
        &self.principal
    }

    fn task_finished(&self, key: u128, principal: &str) {
        ConnectionState::task_finished(self, key, principal);
    }

    fn check_remote_ends(&self) {
        ConnectionState::check_remote_ends(self);
    }

    fn can_be_asked(&self) -> bool {
        ConnectionState::can_be_asked(self)
    }

    fn send_line(&self, line: &[u8]) {
        ConnectionState::send_line(self, line);
    }
}
