//! One connection's state ([`ConnectionState`]), by lifetime: what it holds of the process,
//! what lives as long as the connection, and the table of its streams. The protocol's
//! decisions on it are in the files beside this one (`dispatch`, `tasks`, `stream`, `plain`,
//! `delivery`), each an `impl` block of its own idea.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::Value;
use taskstream_core::RequestId;

use super::streams::Streams;
use crate::cancel::CancelToken;
use crate::guard::FailedLookups;
use crate::io::Output;
use crate::log::log;
use crate::metrics;
use crate::process::Process;
use crate::wire::era::{dress, Era};
use crate::wire::{self, ServerError};

/// One connection's state, shared by its reader, its delivery (a thread on stdio; the HTTP
/// adapter's tasks otherwise) and its plain calls. What it holds lives as long as one of three
/// things:
///
/// | lives as long as | fields |
/// | --- | --- |
/// | the process | `process`: the store, the configuration, the tools, the tasks, the sweep (read through it, never copied) |
/// | the connection | `principal`, `out`, `plain`, `pending`, `legacy`, `failures` (or the principal's, on HTTP), `shutdown`, `threaded`, `exit_on_storage_failure` |
/// | each stream | its entry in `streams` ([`Streams`]: the core's table, one entry per open stream) |
///
/// Nothing here reaches for anything outside it: the process is handed in at
/// [`new`](Self::new), and the process sees the connection only as a
/// [`Peer`](crate::process::Peer).
pub(crate) struct ConnectionState {
    // Lives as long as the process.
    /// The process this connection serves: its store, configuration, tools, tasks and sweep.
    pub(crate) process: Arc<Process>,

    // Lives as long as the connection.
    /// The principal this connection acts as (the process's, or the HTTP request's).
    pub(crate) principal: String,
    /// Where every line to the client goes.
    pub(crate) out: Output,
    /// Plain `tools/call`s in flight.
    pub(crate) plain: InFlight,
    /// Transitions not yet announced, and `tasks/result` requests waiting.
    pub(crate) pending: Mutex<OwedAnswers>,
    /// Whether `initialize` selected the legacy era (read by the delivery thread).
    pub(crate) legacy: AtomicBool,
    /// The failed-lookup allowance (SE-07): this connection's, or its principal's on HTTP.
    pub(crate) failures: Arc<Mutex<FailedLookups>>,
    /// The connection is closing: nothing more is owed to it.
    pub(crate) shutdown: AtomicBool,
    /// Whether a delivery thread serves this connection (else ended tasks are announced at
    /// once, from the thread that ended them).
    pub(crate) threaded: bool,
    /// Whether the process exits once storage failed and the clients were told (`serve`).
    pub(crate) exit_on_storage_failure: AtomicBool,

    // Lives as long as each stream (an entry each).
    /// The connection's open streams.
    pub(crate) streams: Mutex<Streams>,
}

impl ConnectionState {
    /// A connection of `process` acting as `principal`, writing to `output`.
    pub(crate) fn new(
        process: &Arc<Process>,
        principal: &str,
        output: Output,
        failures: Option<Arc<Mutex<FailedLookups>>>,
        threaded: bool,
        max_streams: usize,
    ) -> ConnectionState {
        ConnectionState {
            process: Arc::clone(process),
            streams: Mutex::new(Streams::new(max_streams)),
            failures: failures.unwrap_or_else(|| {
                Arc::new(Mutex::new(FailedLookups::new(
                    process.config.max_failed_lookups_per_minute,
                )))
            }),
            principal: principal.to_owned(),
            out: output,
            plain: InFlight::default(),
            pending: Mutex::new(OwedAnswers::default()),
            legacy: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            threaded,
            exit_on_storage_failure: AtomicBool::new(false),
        }
    }

    /// The transport, as trace spans name it: `lines` (stdio or the data dir's socket, which
    /// have a delivery thread) or `http`.
    pub(crate) fn transport(&self) -> &'static str {
        if self.threaded {
            "lines"
        } else {
            "http"
        }
    }

    pub(crate) fn streams(&self) -> MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn pending(&self) -> MutexGuard<'_, OwedAnswers> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the answer to request `id`, dressed for `era`.
    pub(crate) fn reply(&self, id: &RequestId, era: Era, result: Result<Value, ServerError>) {
        let line = match result {
            Ok(v) => wire::response(id, &dress(era, v, &self.process.server_info)),
            Err(e) => e.line(Some(id)),
        };
        self.out.send(&line);
    }

    /// Runs a task lookup under the failed-lookup allowance (SE-07): a miss spends it; while
    /// it is spent, a miss is answered `too_many_failures` instead of its own error and costs
    /// nothing, and a request that finds one of the principal's own tasks is served as ever.
    pub(crate) fn guarded<T>(
        &self,
        look: impl FnOnce() -> Result<T, ServerError>,
    ) -> Result<T, ServerError> {
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
                        self.process.config.max_failed_lookups_per_minute
                    );
                }
                Err(e)
            }
            answer => answer,
        }
    }

    pub(crate) fn failures(&self) -> MutexGuard<'_, FailedLookups> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the connection's own work: its plain calls stop, waiting answers are dropped.
    /// Tasks are the process's and run on.
    pub(crate) fn close(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        self.plain.stop_all();
        self.pending().waiters.clear();
        self.process.store.changes().notify();
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
}

/// What a connection has to answer once tasks end.
#[derive(Default)]
pub(crate) struct OwedAnswers {
    /// Tasks of this connection's principal that reached a terminal status since the
    /// connection last looked.
    pub(crate) finished: Vec<u128>,
    /// `tasks/result` requests (legacy) waiting for their task.
    pub(crate) waiters: Vec<(u128, RequestId)>,
}

impl OwedAnswers {
    /// Drops a waiting `tasks/result` (its request was cancelled); whether one was found.
    pub(crate) fn cancel_waiter(&mut self, id: &RequestId) -> bool {
        let before = self.waiters.len();
        self.waiters.retain(|(_, w)| w != id);
        self.waiters.len() != before
    }
}

/// The plain calls in flight, by request id.
#[derive(Default)]
pub(crate) struct InFlight {
    calls: Mutex<HashMap<RequestId, Arc<CancelToken>>>,
}

impl InFlight {
    /// The table, locked: a response or progress written under it is never written after
    /// the call's cancellation was read.
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Arc<CancelToken>>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call with request id `id` is in flight.
    pub(crate) fn contains(&self, id: &RequestId) -> bool {
        self.lock().contains_key(id)
    }

    /// How many calls are in flight.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Stops every call in flight without an answer (at shutdown).
    pub(crate) fn stop_all(&self) {
        for token in self.lock().drain().map(|(_, t)| t) {
            token.cancel();
        }
    }

    /// Cancels the call `id`; whether there was one.
    pub(crate) fn cancel(&self, id: &RequestId) -> bool {
        match self.lock().remove(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}
