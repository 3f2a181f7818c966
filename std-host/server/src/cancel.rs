//! A cancellation flag a worker can sleep on: [`CancelToken::wait_until`] returns early when
//! the token is cancelled, so a cancelled `emit` with a long interval stops at once; and
//! callbacks run at the moment of cancellation ([`CancelToken::on_cancel`]).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// A callback run once, when the token is cancelled.
pub(crate) type OnCancel = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    cancelled: bool,
    callbacks: Vec<OnCancel>,
}

/// Set once, never cleared.
#[derive(Default)]
pub(crate) struct CancelToken {
    state: Mutex<State>,
    cond: Condvar,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels, wakes every waiter and runs the callbacks (on this thread, outside the lock).
    pub(crate) fn cancel(&self) {
        let callbacks = {
            let mut s = self.lock();
            s.cancelled = true;
            std::mem::take(&mut s.callbacks)
        };
        self.cond.notify_all();
        for c in callbacks {
            c();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// Runs `callback` when the token is cancelled (at once if it already is).
    pub(crate) fn on_cancel(&self, callback: OnCancel) {
        let mut s = self.lock();
        if s.cancelled {
            drop(s);
            callback();
        } else {
            s.callbacks.push(callback);
        }
    }

    /// Sleeps until `deadline` or cancellation; returns whether it was cancelled.
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        let mut s = self.lock();
        loop {
            if s.cancelled {
                return true;
            }
            let now = Instant::now();
            let Some(left) = deadline
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            else {
                return false;
            };
            s = self
                .cond
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
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

    #[test]
    fn callbacks_run_once_at_cancellation_or_at_once_after_it() {
        let t = CancelToken::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        t.on_cancel(Box::new(move || {
            r.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(runs.load(Ordering::Relaxed), 0);
        t.cancel();
        t.cancel();
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        let r = Arc::clone(&runs);
        t.on_cancel(Box::new(move || {
            r.fetch_add(10, Ordering::Relaxed);
        }));
        assert_eq!(runs.load(Ordering::Relaxed), 11);
    }
}
