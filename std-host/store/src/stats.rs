//! Fixed-bucket histograms of atomics, for measurements read at scrape time: recording one
//! value is a short scan of at most [`BUCKETS`] bounds and three relaxed atomic adds, no lock.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of every histogram, the last one unbounded (`+Inf`).
pub const BUCKETS: usize = 13;

/// Upper bounds (inclusive) of records per group commit: 1, 2, 4, … 2048.
pub const BATCH_BOUNDS: [u64; BUCKETS - 1] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];

/// Upper bounds (inclusive) of durations in microseconds: 100 µs … 2.5 s.
pub const MICROS_BOUNDS: [u64; BUCKETS - 1] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 500_000, 2_500_000,
];

/// What a replica sharing a database reports (the PostgreSQL store), read when scraped.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ReplicaStats {
    /// Tasks this replica holds the lease of now (it writes them: running tasks it started).
    pub leases_held: u64,
    /// Events per batch the writers committed.
    pub batch_events: Histogram,
    /// Per batch, from the writer taking it to its `COMMIT` returning (retries included), in
    /// microseconds.
    pub commit_micros: Histogram,
}

/// A shared store's connection pool (the PostgreSQL store's reads), read when scraped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Connections of the pool in use now.
    pub in_use: u64,
    /// Connections the pool may hold (`--store-pool`).
    pub size: u64,
    /// Callers waiting now for a connection to be free.
    pub waiting: u64,
    /// Callers that ever had to wait for a connection, since the store opened.
    pub waits: u64,
}

/// A histogram being recorded (see the module docs).
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [u64; BUCKETS - 1],
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    count: AtomicU64,
}

impl AtomicHistogram {
    /// An empty histogram with these bucket bounds.
    pub const fn new(bounds: &'static [u64; BUCKETS - 1]) -> AtomicHistogram {
        AtomicHistogram {
            bounds,
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn record(&self, value: u64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// What was recorded so far. (Read without a lock: a value recorded meanwhile may be in
    /// some of the fields and not yet in others.)
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            bounds: self.bounds,
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum: self.sum.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's values at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// The upper bounds of the buckets but the last (`+Inf`).
    pub bounds: &'static [u64; BUCKETS - 1],
    /// Values in each bucket (not cumulative).
    pub buckets: [u64; BUCKETS],
    /// The sum of the values.
    pub sum: u64,
    /// How many values.
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            bounds: &BATCH_BOUNDS,
            buckets: [0; BUCKETS],
            sum: 0,
            count: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_that_holds_them() {
        let h = AtomicHistogram::new(&BATCH_BOUNDS);
        for v in [1, 2, 3, 2048, 2049, 1_000_000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets[0], 1);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[2], 1);
        assert_eq!(s.buckets[11], 1);
        assert_eq!(s.buckets[12], 2);
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, 1 + 2 + 3 + 2048 + 2049 + 1_000_000);
    }
}
