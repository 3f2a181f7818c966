//! The background threads that move published changes on: the flusher (group commit of the
//! pipelined modes) and the applier (sled off the publication path, in batches).

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    /// The flusher's loop (`group` and `none` mode): drains the pipe whenever it holds appends, so an
    /// append that did not wait becomes durable and visible at once, in batches that grow
    /// with the load; until stopped.
    pub(crate) fn run_flusher(&self) {
        loop {
            {
                let mut pipe = lock(&self.pipe);
                while pipe.items.is_empty() && !pipe.stop {
                    pipe = self
                        .pipe_cond
                        .wait(pipe)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if pipe.items.is_empty() {
                    return;
                }
            }
            // A failure is fail-stop (and the appends it took are never published); the
            // queue is still drained, so nothing waits on it.
            let _ = self.drain();
        }
    }

    /// Stops the flusher once it has drained the pipe.
    pub(crate) fn stop_flusher(&self) {
        lock(&self.pipe).stop = true;
        self.pipe_cond.notify_all();
    }

    /// Whether the unapplied set is past its bounds (appenders then apply it themselves).
    pub(super) fn unapplied_over_limit(&self) -> bool {
        let unapplied = lock(&self.unapplied);
        unapplied.items.len() >= MAX_UNAPPLIED || unapplied.bytes >= MAX_UNAPPLIED_BYTES
    }

    /// Applies every published append not yet in the index to it, in log order.
    pub(crate) fn apply_unapplied(&self) -> Result<(), StoreError> {
        let _gate = lock_read(&self.gate);
        self.apply_locked()
    }

    /// [`apply_unapplied`](Self::apply_unapplied) for a caller that holds the gate (shared,
    /// or exclusive: a checkpoint, so that its LSN covers only what the index has).
    pub(super) fn apply_locked(&self) -> Result<(), StoreError> {
        if lock(&self.unapplied).items.is_empty() {
            return Ok(());
        }
        let _one = lock(&self.applying);
        while self.apply_batch()? > 0 {}
        Ok(())
    }

    /// Applies up to [`APPLY_BATCH`] of the oldest unapplied appends to the index in one sled
    /// batch, then takes them out of the unapplied set (after: a reader that finds one in
    /// neither place would see a gap); returns how many. The caller holds the gate and
    /// `applying`. A failure is fail-stop, and leaves them in the set (they are durable and
    /// readable there).
    pub(super) fn apply_batch(&self) -> Result<usize, StoreError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Failed);
        }
        // Only the holder of `applying` takes from the front, so these stay the front.
        let batch: Vec<Arc<Pending>> = lock(&self.unapplied)
            .items
            .iter()
            .take(APPLY_BATCH)
            .cloned()
            .collect();
        if batch.is_empty() {
            return Ok(0);
        }
        let index = self.index();
        self.fail_stop(index.apply_all(batch.iter().flat_map(|p| p.records())))?;
        // One hold of a task's lock for each run of its appends.
        for run in batch.chunk_by(|a, b| Arc::ptr_eq(&a.slot, &b.slot)) {
            let Some(first) = run.first() else { continue };
            let mut st = lock(&first.slot.state);
            for p in run {
                if st.unapplied.front().is_some_and(|f| Arc::ptr_eq(f, p)) {
                    st.unapplied.pop_front();
                }
            }
        }
        let mut unapplied = lock(&self.unapplied);
        let freed: u64 = batch.iter().map(|p| p.footprint()).sum();
        unapplied.items.drain(..batch.len());
        unapplied.bytes = unapplied.bytes.saturating_sub(freed);
        Ok(batch.len())
    }

    /// The applier's loop (`group` and `none` mode): applies published appends to the index in batches
    /// while there are any, off the path that makes them visible; until stopped (what is left
    /// then is applied by the close's checkpoint).
    pub(crate) fn run_applier(&self) {
        loop {
            {
                let mut unapplied = lock(&self.unapplied);
                while (unapplied.items.is_empty() || self.failed.load(Ordering::Acquire))
                    && !unapplied.stop
                {
                    unapplied = self
                        .apply_cond
                        .wait(unapplied)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if unapplied.stop {
                    return;
                }
            }
            let _gate = lock_read(&self.gate);
            let _one = lock(&self.applying);
            // One batch per turn, so a checkpoint waiting for the gate gets it between
            // batches. A failure is fail-stop (the loop then waits for the stop).
            let _ = self.apply_batch();
        }
    }

    /// Stops the applier.
    pub(crate) fn stop_applier(&self) {
        lock(&self.unapplied).stop = true;
        self.apply_cond.notify_all();
    }
}
