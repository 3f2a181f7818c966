//! A cancellation flag a worker can sleep on: [`CancelToken::wait_until`] returns early when
//! the token is cancelled, so a cancelled `emit` with a long interval stops at once.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

/// Set once, never cleared.
#[derive(Debug, Default)]
pub(crate) struct CancelToken {
    cancelled: Mutex<bool>,
    cond: Condvar,
}

impl CancelToken {
    /// Cancels and wakes every waiter.
    pub(crate) fn cancel(&self) {
        *self
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.cond.notify_all();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub(crate) fn is_cancelled(&self) -> bool {
        *self
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until `deadline` or cancellation; returns whether it was cancelled.
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        let mut cancelled = self
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if *cancelled {
                return true;
            }
            let now = Instant::now();
            let Some(left) = deadline
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            else {
                return false;
            };
            cancelled = self
                .cond
                .wait_timeout(cancelled, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn cancel_wakes_a_sleeper() {
        let t = Arc::new(CancelToken::default());
        assert!(!t.wait_until(Instant::now() + Duration::from_millis(1)));
        let t2 = Arc::clone(&t);
        let h = std::thread::spawn(move || t2.wait_until(Instant::now() + Duration::from_secs(60)));
        t.cancel();
        assert!(matches!(h.join(), Ok(true)));
        assert!(t.is_cancelled());
    }
}
