//! How big a run is. `cargo bench` runs at full size; `cargo test --all-targets` (which runs
//! each benchmark once, in the debug profile) at a size that takes milliseconds; a smoke run
//! (`scripts/bench-smoke`) in between. `TASKSTREAM_BENCH_SCALE=test|smoke|full` overrides the
//! guess, and the `TASKSTREAM_BENCH_*` variables below override single sizes.

/// A run's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Under `cargo test`: prove the benchmark runs, nothing more.
    Test,
    /// `scripts/bench-smoke`: every benchmark briefly, figures printed.
    Smoke,
    /// `cargo bench`: the sizes the report quotes.
    Full,
}

impl Scale {
    /// `$TASKSTREAM_BENCH_SCALE`, else `Full` when cargo passed `--bench`, else `Test`.
    #[must_use]
    pub fn current() -> Scale {
        match std::env::var("TASKSTREAM_BENCH_SCALE").as_deref() {
            Ok("test") => Scale::Test,
            Ok("smoke") => Scale::Smoke,
            Ok("full") => Scale::Full,
            _ if std::env::args().any(|a| a == "--bench") => Scale::Full,
            _ => Scale::Test,
        }
    }

    /// `$name` if set (a count), else the value for this scale.
    #[must_use]
    pub fn pick(self, name: &str, test: usize, smoke: usize, full: usize) -> usize {
        if let Some(n) = std::env::var(name).ok().and_then(|v| v.parse().ok()) {
            return n;
        }
        match self {
            Scale::Test => test,
            Scale::Smoke => smoke,
            Scale::Full => full,
        }
    }

    /// A group's measurement time: `full` at full size, at most 2 s otherwise (in criterion's
    /// `--quick` mode this is the longest a benchmark runs when its timings will not settle).
    #[must_use]
    pub fn measurement_time(self, full: std::time::Duration) -> std::time::Duration {
        match self {
            Scale::Full => full,
            Scale::Test | Scale::Smoke => full.min(std::time::Duration::from_secs(2)),
        }
    }

    /// Events retained by the task that replay benchmarks read (`$TASKSTREAM_BENCH_EVENTS`).
    #[must_use]
    pub fn replay_events(self) -> usize {
        self.pick("TASKSTREAM_BENCH_EVENTS", 300, 20_000, 100_000)
    }

    /// Events in the data dir the reopen benchmark opens (`$TASKSTREAM_BENCH_REOPEN_EVENTS`).
    #[must_use]
    pub fn reopen_events(self) -> usize {
        self.pick("TASKSTREAM_BENCH_REOPEN_EVENTS", 2_000, 100_000, 1_000_000)
    }

    /// Concurrent appenders of the group-commit benchmark (`$TASKSTREAM_BENCH_APPENDERS`).
    #[must_use]
    pub fn appenders(self) -> usize {
        self.pick("TASKSTREAM_BENCH_APPENDERS", 4, 64, 64)
    }
}
