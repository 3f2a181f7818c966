//! What `/metrics` reports (docs/guide.md, "Operating it"), in the Prometheus text format.
//!
//! Hot paths only add to process-wide atomics ([`METRICS`]) and the store's own counters;
//! everything else (tasks by status, the store budget, the pool, the group-commit histograms)
//! is read when scraped. Label sets are bounded: a store kind, a reason, a limit, a status or
//! a status class; never a task id or a principal.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use taskstream_core::{Millis, RetentionPolicy, Seq};

use taskstream_store::stats::Histogram;
use taskstream_store::{
    AppendError, ChangeSignal, RawEvent, StoreError, StoreStats, TaskRecord, TaskStatus, TaskStore,
    TaskView,
};

/// The limits a refusal counts under (`limit` label).
#[derive(Clone, Copy)]
pub(crate) enum Limit {
    /// `--max-streams` of a connection, or `--max-principal-streams`.
    Streams,
    /// `--max-running-tasks` / `--max-total-running-tasks`.
    Tasks,
    /// Requests waiting for task results.
    Waiters,
    /// `--max-failed-lookups-per-minute`.
    FailedLookups,
}

const LIMITS: [(Limit, &str); 4] = [
    (Limit::Streams, "streams"),
    (Limit::Tasks, "running_tasks"),
    (Limit::Waiters, "waiters"),
    (Limit::FailedLookups, "failed_lookups"),
];

/// Why `events_gone` was answered (`reason` label).
#[derive(Clone, Copy)]
pub(crate) enum Gone {
    /// The `tasks/stream` cursor (or `Last-Event-ID`) was before the earliest retained event.
    Cursor,
    /// Retention dropped events an open stream had not delivered yet.
    Overtaken,
}

/// Process-wide counters, added to where things happen.
pub(crate) struct Metrics {
    streams_open: AtomicI64,
    replays: AtomicU64,
    replayed_events: AtomicU64,
    gone: [AtomicU64; 2],
    limits: [AtomicU64; 4],
    /// HTTP responses by status class, 1xx … 5xx.
    http: [AtomicU64; 5],
    events: AtomicU64,
    event_bytes: AtomicU64,
}

/// The counters of this process.
pub(crate) static METRICS: Metrics = Metrics {
    streams_open: AtomicI64::new(0),
    replays: AtomicU64::new(0),
    replayed_events: AtomicU64::new(0),
    gone: [const { AtomicU64::new(0) }; 2],
    limits: [const { AtomicU64::new(0) }; 4],
    http: [const { AtomicU64::new(0) }; 5],
    events: AtomicU64::new(0),
    event_bytes: AtomicU64::new(0),
};

impl Metrics {
    /// A stream was admitted that starts with `backlog` retained events to replay (0: live).
    pub(crate) fn stream_opened(&self, backlog: u64) {
        if backlog > 0 {
            self.replays.fetch_add(1, Ordering::Relaxed);
            self.replayed_events.fetch_add(backlog, Ordering::Relaxed);
        }
    }

    /// An `events_gone` answer.
    pub(crate) fn events_gone(&self, why: Gone) {
        self.gone[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A refusal by a limit.
    pub(crate) fn refused(&self, limit: Limit) {
        self.limits[limit as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// An HTTP response with this status code.
    pub(crate) fn http_response(&self, code: u16) {
        let class = usize::from(code / 100).clamp(1, 5) - 1;
        self.http[class].fetch_add(1, Ordering::Relaxed);
    }

    fn appended(&self, event_type: &str, payload: usize) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.event_bytes
            .fetch_add((event_type.len() + payload) as u64, Ordering::Relaxed);
    }
}

/// Held by each open stream (in its entry of the connection's table): counts it in
/// `taskstream_streams_open` and lists it among the task's followers ([`crate::follow`]) for
/// as long as it lives, however the stream ends.
#[derive(Debug)]
pub(crate) struct OpenStream(crate::follow::Follower);

impl OpenStream {
    /// Counts a stream of `task_id` that starts at seq `start` as open until this is dropped;
    /// `spans` (its trace spans) end with it.
    pub(crate) fn new(task_id: &str, start: u64, spans: crate::otel::StreamSpans) -> OpenStream {
        METRICS.streams_open.fetch_add(1, Ordering::Relaxed);
        OpenStream(crate::follow::Follower::new(task_id, start, spans))
    }

    /// The frame carrying `seq` was written to the client (for its lag).
    pub(crate) fn delivered(&self, seq: u64) {
        self.0.delivered(seq);
    }

    /// A handle that records this stream's deliveries where its frames are written.
    pub(crate) fn delivery(&self) -> crate::follow::Delivery {
        self.0.delivery()
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        METRICS.streams_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A store that counts the events appended through it.
pub(crate) struct Metered(pub(crate) Arc<dyn TaskStore>);

impl Metered {
    /// Runs one append-like call of the store (`op`) in its span, and counts the event it
    /// appended (`counted`: its type and payload bytes) once it is durable.
    fn counted(
        &self,
        op: &'static str,
        task_id: &str,
        label: &str,
        counted: (&str, usize),
        call: impl FnOnce(&dyn TaskStore) -> Result<Seq, AppendError>,
    ) -> Result<Seq, AppendError> {
        let span = crate::otel::append(op, task_id, label, self.0.kind());
        let _in_span = span.enter();
        let seq = call(&*self.0)?;
        crate::otel::appended(&span, seq.get());
        METRICS.appended(counted.0, counted.1);
        Ok(seq)
    }
}

impl TaskStore for Metered {
    fn retention(&self) -> &RetentionPolicy {
        self.0.retention()
    }
    fn changes(&self) -> &ChangeSignal {
        self.0.changes()
    }
    fn has_failed(&self) -> bool {
        self.0.has_failed()
    }
    fn is_shared(&self) -> bool {
        self.0.is_shared()
    }
    fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        let span = crate::otel::append("create", &record.task_id, "", self.0.kind());
        let _in_span = span.enter();
        self.0.create_task(record, now)?;
        // Its first event: the `working` status.
        METRICS.appended("", 0);
        Ok(())
    }
    fn lookup(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        self.0.lookup(task_id)
    }
    fn task(&self, task_id: &str) -> Option<TaskView> {
        self.0.task(task_id)
    }
    fn tasks(&self) -> Vec<TaskView> {
        self.0.tasks()
    }
    fn list(&self) -> Result<Vec<TaskView>, StoreError> {
        self.0.list()
    }
    fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.counted(
            "append",
            task_id,
            event_type,
            (event_type, payload.len()),
            |s| s.append(task_id, event_type, payload, now),
        )
    }
    fn emit(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
    ) -> Result<Seq, AppendError> {
        self.counted(
            "emit",
            task_id,
            event_type,
            (event_type, payload.len()),
            |s| s.emit(task_id, event_type, payload, now),
        )
    }
    fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        // The terminal status event: counted, its payload is the store's.
        self.counted("finish", task_id, status.as_str(), ("", 0), |s| {
            s.finish(task_id, status, message, result, error, now)
        })
    }
    fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        push: &mut dyn FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        self.0.read_raw_from(task_id, from, max, push)
    }
    fn sweep(&self, now: Millis) -> usize {
        self.0.sweep(now)
    }
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn health(&self) -> Result<(), String> {
        self.0.health()
    }
    fn stats(&self) -> Option<StoreStats> {
        self.0.stats()
    }
    fn budget(&self) -> Option<(u64, u64)> {
        self.0.budget()
    }
    fn pool(&self) -> Option<taskstream_store::stats::PoolStats> {
        self.0.pool()
    }
    fn replica(&self) -> Option<taskstream_store::stats::ReplicaStats> {
        self.0.replica()
    }
}

/// The upper bounds of `taskstream_stream_lag_events`' buckets (events).
static LAG_BOUNDS: [u64; taskstream_store::stats::BUCKETS - 1] =
    [0, 1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384, 65536];

/// The content type of [`encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every metric of the process, in the Prometheus text format: the counters of [`METRICS`],
/// what `store` reports when asked, and `ready` (whether `/readyz` answers 200).
pub(crate) fn encode(store: &Arc<dyn TaskStore>, ready: bool) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        store: Arc::clone(store),
        ready,
    }));
    let mut out = String::new();
    // Writing to a String fails only if a metric's encoding does; then what was written stands.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

/// One scrape: the store read as it is asked, readiness as it was when the scrape began.
struct Scrape {
    store: Arc<dyn TaskStore>,
    ready: bool,
}

impl fmt::Debug for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrape")
    }
}

/// A histogram read from the store, its values divided by `divisor` (1e6: µs to s).
struct Hist {
    h: Histogram,
    divisor: f64,
}

impl EncodeMetric for Hist {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        let buckets: Vec<(f64, u64)> = self
            .h
            .bounds
            .iter()
            .map(|&b| b as f64 / self.divisor)
            .chain([f64::INFINITY])
            .zip(self.h.buckets)
            .collect();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.h.sum as f64 / self.divisor,
            self.h.count,
            &buckets,
            None,
        )
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(
        &self,
        mut enc: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), fmt::Error> {
        let store = &self.store;
        let kind = [("store", store.kind())];
        let m = &METRICS;

        let counter = |enc: &mut prometheus_client::encoding::DescriptorEncoder,
                       name: &str,
                       help: &str,
                       unit: Option<&Unit>,
                       v: u64|
         -> Result<(), fmt::Error> {
            let c = ConstCounter::new(v);
            c.encode(enc.encode_descriptor(name, help, unit, c.metric_type())?)
        };
        let gauge = |enc: &mut prometheus_client::encoding::DescriptorEncoder,
                     name: &str,
                     help: &str,
                     unit: Option<&Unit>,
                     v: i64|
         -> Result<(), fmt::Error> {
            let g = ConstGauge::new(v);
            g.encode(enc.encode_descriptor(name, help, unit, g.metric_type())?)
        };

        {
            let c = ConstCounter::new(load(&m.events));
            let mut e = enc.encode_descriptor(
                "taskstream_events_appended",
                "Task events appended (durable), by store kind.",
                None,
                c.metric_type(),
            )?;
            c.encode(e.encode_family(&kind)?)?;
        }
        {
            let c = ConstCounter::new(load(&m.event_bytes));
            let mut e = enc.encode_descriptor(
                "taskstream_events_appended",
                "Bytes of task events appended (event types and compact payloads), by store kind.",
                Some(&Unit::Bytes),
                c.metric_type(),
            )?;
            c.encode(e.encode_family(&kind)?)?;
        }
        if let Some(stats) = store.stats() {
            Hist {
                h: stats.wal.batch_records,
                divisor: 1.0,
            }
            .encode(enc.encode_descriptor(
                "taskstream_commit_batch_records",
                "Records per group commit of the data dir's log.",
                None,
                MetricType::Histogram,
            )?)?;
            Hist {
                h: stats.wal.commit_wait_micros,
                divisor: 1e6,
            }
            .encode(enc.encode_descriptor(
                "taskstream_append_durable",
                "Per group commit, from its first record entering the log's buffer to the \
                 commit being durable: the longest append-to-durable wait of the commit.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?)?;
            counter(
                &mut enc,
                "taskstream_wal_syncs",
                "fdatasync calls on the data dir's log.",
                None,
                stats.wal.syncs,
            )?;
        }
        gauge(
            &mut enc,
            "taskstream_streams_open",
            "tasks/stream streams open now, every transport.",
            None,
            m.streams_open.load(Ordering::Relaxed),
        )?;
        {
            // Each open stream's lag: the events its task has that it has not delivered yet.
            let mut next_of: std::collections::HashMap<String, u64> =
                std::collections::HashMap::new();
            let lags = taskstream_store::stats::AtomicHistogram::new(&LAG_BOUNDS);
            for (task_id, stream_next) in crate::follow::snapshot() {
                let task_next = *next_of
                    .entry(task_id)
                    .or_insert_with_key(|id| store.task(id).map_or(0, |v| v.retained.next().get()));
                lags.record(crate::follow::lag(task_next, stream_next));
            }
            Hist {
                h: lags.snapshot(),
                divisor: 1.0,
            }
            .encode(enc.encode_descriptor(
                "taskstream_stream_lag_events",
                "Open tasks/stream streams by lag when scraped: events their task has (latest \
                 seq + 1) that the stream has not delivered yet.",
                None,
                MetricType::Histogram,
            )?)?;
        }
        counter(
            &mut enc,
            "taskstream_replays",
            "Streams opened with retained events to replay before live ones.",
            None,
            load(&m.replays),
        )?;
        counter(
            &mut enc,
            "taskstream_replayed_events",
            "Retained events those streams had to replay when opened.",
            None,
            load(&m.replayed_events),
        )?;
        {
            let mut e = enc.encode_descriptor(
                "taskstream_events_gone",
                "events_gone answers: reason=cursor (the cursor was before the earliest \
                 retained event) or reason=overtaken (retention dropped events a stream had not \
                 delivered).",
                None,
                MetricType::Counter,
            )?;
            for (i, reason) in ["cursor", "overtaken"].into_iter().enumerate() {
                ConstCounter::new(load(&m.gone[i]))
                    .encode(e.encode_family(&[("reason", reason)])?)?;
            }
        }
        {
            let mut e = enc.encode_descriptor(
                "taskstream_limit_refusals",
                "Requests refused by a limit.",
                None,
                MetricType::Counter,
            )?;
            for (i, (_, name)) in LIMITS.iter().enumerate() {
                ConstCounter::new(load(&m.limits[i]))
                    .encode(e.encode_family(&[("limit", *name)])?)?;
            }
        }
        {
            let mut e = enc.encode_descriptor(
                "taskstream_http_responses",
                "HTTP responses by status class (Streamable HTTP and the operations endpoints).",
                None,
                MetricType::Counter,
            )?;
            for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].into_iter().enumerate() {
                ConstCounter::new(load(&m.http[i])).encode(e.encode_family(&[("code", class)])?)?;
            }
        }
        {
            let mut counts = [0i64; 5];
            let statuses = [
                TaskStatus::Working,
                TaskStatus::InputRequired,
                TaskStatus::Completed,
                TaskStatus::Failed,
                TaskStatus::Cancelled,
            ];
            for t in store.tasks() {
                if let Some(i) = statuses.iter().position(|s| *s == t.record.status) {
                    counts[i] += 1;
                }
            }
            let mut e = enc.encode_descriptor(
                "taskstream_tasks",
                "Tasks retained now, by status.",
                None,
                MetricType::Gauge,
            )?;
            for (s, n) in statuses.iter().zip(counts) {
                ConstGauge::new(n).encode(e.encode_family(&[("status", s.as_str())])?)?;
            }
        }
        if let Some((used, limit)) = store.budget() {
            let used = i64::try_from(used).unwrap_or(i64::MAX);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            gauge(
                &mut enc,
                "taskstream_store_used",
                "Bytes counted against --max-store-bytes.",
                Some(&Unit::Bytes),
                used,
            )?;
            gauge(
                &mut enc,
                "taskstream_store_limit",
                "--max-store-bytes.",
                Some(&Unit::Bytes),
                limit,
            )?;
        }
        if let Some(pool) = store.pool() {
            let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            gauge(
                &mut enc,
                "taskstream_postgres_pool_in_use",
                "PostgreSQL connections of the pool in use.",
                None,
                n(pool.in_use),
            )?;
            gauge(
                &mut enc,
                "taskstream_postgres_pool_size",
                "PostgreSQL connections the pool may hold (--store-pool).",
                None,
                n(pool.size),
            )?;
            gauge(
                &mut enc,
                "taskstream_postgres_pool_waiting",
                "Reads waiting now for a PostgreSQL connection of the pool to be free.",
                None,
                n(pool.waiting),
            )?;
            counter(
                &mut enc,
                "taskstream_postgres_pool_waits",
                "Reads that had to wait for a PostgreSQL connection of the pool.",
                None,
                pool.waits,
            )?;
        }
        if let Some(r) = store.replica() {
            gauge(
                &mut enc,
                "taskstream_leases_held",
                "Running tasks this replica writes and holds the lease of (PostgreSQL).",
                None,
                i64::try_from(r.leases_held).unwrap_or(i64::MAX),
            )?;
            Hist {
                h: r.batch_events,
                divisor: 1.0,
            }
            .encode(enc.encode_descriptor(
                "taskstream_postgres_commit_batch_events",
                "Events per batch the PostgreSQL writers committed.",
                None,
                MetricType::Histogram,
            )?)?;
            Hist {
                h: r.commit_micros,
                divisor: 1e6,
            }
            .encode(enc.encode_descriptor(
                "taskstream_postgres_commit",
                "Per batch, from a PostgreSQL writer taking it to its COMMIT returning \
                 (retries included).",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?)?;
        }
        gauge(
            &mut enc,
            "taskstream_ready",
            "1 when /readyz answers 200: the store takes writes and the server is not \
             shutting down.",
            None,
            i64::from(self.ready),
        )
    }
}
