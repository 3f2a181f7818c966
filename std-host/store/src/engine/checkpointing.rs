//! Checkpoints and index rebuilds: rotate the log, flush sled, write `CHECKPOINT`, delete
//! the old segments; when retention removed enough, copy the index into a fresh directory and
//! switch to it atomically.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    /// What the checkpoint record lists: every task the index holds (visible, not removed)
    /// and its next seq. The caller holds the gate exclusively, so every logged change is in
    /// the index; a task's published `next` may lag its index by the one append under way
    /// (never more: appends of a task hold its lock), which only makes the check at open
    /// more lenient by one.
    pub(super) fn checkpoint_table(&self) -> Vec<(String, u64)> {
        let tasks = lock_read(&self.tasks);
        let mut table: Vec<(String, u64)> = tasks
            .iter()
            .filter_map(|(id, slot)| {
                let st = lock(&slot.state);
                (st.visible && !st.removed).then(|| (id.clone(), st.next.get()))
            })
            .collect();
        table.sort();
        table
    }

    /// Rotates the log, flushes sled to the device, then deletes the log before the rotation;
    /// then rebuilds the index if tasks were removed (or enough events dropped) and the rate
    /// limit allows.
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::IfDue)
    }

    /// The last checkpoint, on close: rebuilds the index whenever one is due but for the rate
    /// limit, so that a clean stop leaves no removed task's payload on disk.
    pub(crate) fn close(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::IfGarbage)
    }

    /// A checkpoint followed by an index rebuild, whatever the rate limit says.
    pub(crate) fn rebuild_index(&self) -> Result<(), StoreError> {
        self.checkpoint_then(Rebuild::Now)
    }

    pub(super) fn checkpoint_then(&self, rebuild: Rebuild) -> Result<(), StoreError> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let _one = lock(&self.checkpointing);
        let (lsn, table) = {
            let _flushing = lock(&self.flushing);
            let _gate = lock_write(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // Every append logged so far is published and applied to the index before the LSN
            // is recorded: from the checkpoint on, an event is in the index or in the log.
            self.drain_locked()?;
            self.apply_locked()?;
            let lsn = self.fail_stop(wal.rotate().map_err(StoreError::Wal))?;
            self.fail_stop(self.index().set_checkpoint(lsn))?;
            (lsn, self.checkpoint_table())
        };
        let sync = self.durability != Durability::None;
        // A failed flush of the index leaves its file in an unknown state (as a failed
        // `fdatasync` does the log's): fail-stop, so the log it needs is never deleted.
        self.fail_stop(self.index().flush(sync))?;
        if let Some(dir) = &self.data_dir {
            self.fail_stop(checkpoint::write(dir, lsn, &table, sync))?;
        }
        wal.delete_before(lsn, &self.index().segments_in_use())?;
        self.checkpointed.store(lsn, Ordering::Relaxed);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        if self.stale_left.swap(false, Ordering::Relaxed) {
            self.delete_stale_dirs();
        }
        if self.rebuild_wanted(rebuild) {
            self.rebuild(wal, lsn)?;
        }
        Ok(())
    }

    /// Whether to rebuild the index now.
    pub(super) fn rebuild_wanted(&self, rebuild: Rebuild) -> bool {
        if self.data_dir.is_none() {
            return false;
        }
        let dropped = self.dropped_since_rebuild.load(Ordering::Relaxed);
        let garbage = self.removed_since_rebuild.load(Ordering::Relaxed) > 0
            || dropped >= REBUILD_MIN_DROPPED.max(self.stored_bytes() / 2);
        match rebuild {
            Rebuild::Now => true,
            Rebuild::IfGarbage => garbage,
            Rebuild::IfDue => {
                garbage
                    && lock(&self.last_rebuild).is_none_or(|(end, took)| {
                        end.elapsed() >= REBUILD_EVERY.max(took * REBUILD_SPACING)
                    })
            }
        }
    }

    /// Rebuilds the index into a fresh sled directory holding only live data, so that what
    /// retention removed is gone from every file of the data dir. The caller holds
    /// `checkpointing` and has just checkpointed at `lsn`: the current index is durable up to
    /// there and the log holds everything after it.
    ///
    /// 1. Copy the current index into `index.<n+1>/` while writers go on applying to the
    ///    current one (and logging).
    /// 2. Under the exclusive gate: rotate the log at `end`, replay the records logged since
    ///    `lsn` into the new index, record `end` as its checkpoint, and make it the index in
    ///    use. Writers wait only for this replay.
    /// 3. Flush the new index to the device, switch `INDEX` to it (the commit point), delete
    ///    the log before `end`, then the old directory.
    ///
    /// A crash before the switch restarts from the old index and the whole log since `lsn`
    /// (still there: nothing before `end` is deleted until after the switch); a crash after it
    /// restarts from the new index, durable up to `end`. Either way the other directory is
    /// deleted at open.
    pub(super) fn rebuild(&self, wal: &Wal, lsn: u64) -> Result<(), StoreError> {
        let (Some(data_dir), Some(current)) = (&self.data_dir, lock(&self.generation).clone())
        else {
            return Ok(());
        };
        let started = Instant::now();
        let removed = self.removed_since_rebuild.swap(0, Ordering::Relaxed);
        let dropped = self.dropped_since_rebuild.swap(0, Ordering::Relaxed);
        let next = current.next(data_dir);
        let result = self.rebuild_into(wal, lsn, data_dir, &next);
        let took = started.elapsed();
        *lock(&self.last_rebuild) = Some((Instant::now(), took));
        match result {
            Ok(done) => {
                self.rebuilds.fetch_add(1, Ordering::Relaxed);
                *lock(&self.generation) = Some(next);
                crate::log::log!(
                    Info,
                    "index rebuilt without {removed} removed task(s) and {dropped} bytes of dropped \
                     events: {} events copied, {} records replayed, {} ms in all, writers held {} ms",
                    done.copied,
                    done.replayed,
                    took.as_millis(),
                    done.blocked.as_millis()
                );
                self.retire(done.old);
                Ok(())
            }
            Err(e) => {
                // The removed tasks are still in the old index: the next rebuild is for them.
                self.removed_since_rebuild
                    .fetch_add(removed, Ordering::Relaxed);
                self.dropped_since_rebuild
                    .fetch_add(dropped, Ordering::Relaxed);
                crate::log::log!(Warn, "index rebuild failed: {e}");
                if !self.failed.load(Ordering::Acquire) {
                    // Not switched: the new directory is garbage, for now or for the next open.
                    let _ = std::fs::remove_dir_all(&next.dir);
                }
                Err(e)
            }
        }
    }

    pub(super) fn rebuild_into(
        &self,
        wal: &Wal,
        lsn: u64,
        data_dir: &Path,
        next: &Generation,
    ) -> Result<Rebuilt, StoreError> {
        let sync = self.durability != Durability::None;
        // Left by an earlier attempt that failed.
        if next.dir.exists() {
            std::fs::remove_dir_all(&next.dir).map_err(StoreError::io("deleting", &next.dir))?;
        }
        crate::fsutil::create_private_dir(&next.dir)
            .map_err(StoreError::io("creating", &next.dir))?;
        if sync {
            crate::fsutil::sync_dir(data_dir).map_err(StoreError::io("fsync of", data_dir))?;
        }
        let new = Arc::new(Index::open(
            Some(&next.dir),
            self.index_cache_bytes,
            self.index().table(),
        )?);
        let old = self.index();
        let copied = new.copy_from(&old)?;
        // The retained events of the log before `lsn` move to its head, so that every segment
        // before it goes at the end (and what retention dropped with it), as the old index does.
        let relocated = self.relocate_before(wal, lsn)?;
        let (end, replayed, blocked, table) = {
            let _flushing = lock(&self.flushing);
            let _gate = lock_write(&self.gate);
            let held = Instant::now();
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // The pending appends go to the old index (and with the log's replay, to the new).
            self.drain_locked()?;
            self.apply_locked()?;
            let end = wal.rotate()?;
            let replayed = wal::read_range(
                wal.storage(),
                wal.dir(),
                lsn,
                end,
                StoreError::Corrupt,
                |rec, raw, lsn| new.replay_rebuilt(rec, raw, lsn),
            )?;
            new.set_checkpoint(end)?;
            *lock_write(&self.index) = Arc::clone(&new);
            (end, replayed, held.elapsed(), self.checkpoint_table())
        };
        // The new index takes every write from here on, but a restart still opens the old one
        // (and replays the log since `lsn`) until the switch; a failure now leaves the two
        // apart, so it stops the store rather than let a later checkpoint delete that log.
        let switched = new
            .flush(sync)
            .and_then(|()| layout::switch(data_dir, next, sync))
            .and_then(|()| checkpoint::write(data_dir, end, &table, sync));
        if let Err(e) = switched {
            self.set_failed();
            return Err(e);
        }
        wal.delete_before(end, &self.index().segments_in_use())?;
        self.checkpointed.store(end, Ordering::Relaxed);
        Ok(Rebuilt {
            old,
            copied: copied + relocated,
            replayed,
            blocked,
        })
    }

    /// Logs again the retained events in the segments before `lsn` (a checkpoint's) and
    /// places them there, while writers go on: each copy is placed only once it is durable and
    /// only if retention has not dropped its event meanwhile (a copy of a dropped event logged
    /// after its truncation is dropped again at recovery, by the floor the index holds).
    pub(super) fn relocate_before(&self, wal: &Wal, lsn: u64) -> Result<u64, StoreError> {
        let Some(table) = self.index().table() else {
            return Ok(0);
        };
        let from: std::collections::BTreeSet<u64> = wal
            .segment_starts()
            .into_iter()
            .filter(|s| *s < lsn)
            .collect();
        if from.is_empty() {
            return Ok(0);
        }
        let _gate = lock_read(&self.gate);
        table.relocate(
            &from,
            |bytes| self.fail_stop(wal.submit_deferred(bytes).map_err(StoreError::Wal)),
            || self.fail_stop(wal.flush_through(wal.submitted()).map_err(StoreError::Wal)),
        )
    }

    /// Deletes the directory of a replaced index once nothing uses it: readers that took it
    /// before the switch finish their read, then sled's own threads let go of its file.
    pub(super) fn retire(&self, old: Arc<Index>) {
        let Some(dir) = old.dir().map(Path::to_owned) else {
            return;
        };
        let deadline = Instant::now() + RETIRE_WAIT;
        let mut old = old;
        loop {
            match Arc::try_unwrap(old) {
                Ok(index) => {
                    drop(index);
                    break;
                }
                Err(still_shared) if Instant::now() < deadline => {
                    old = still_shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => {
                    self.stale_left.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        if !delete_released(&dir, deadline) {
            self.stale_left.store(true, Ordering::Relaxed);
        } else if self.durability != Durability::None {
            if let Some(data_dir) = &self.data_dir {
                // Best effort: a lost deletion is redone at open.
                let _ = crate::fsutil::sync_dir(data_dir);
            }
        }
    }

    /// Deletes the index directories that are not in use and that sled has let go of.
    pub(super) fn delete_stale_dirs(&self) {
        let (Some(data_dir), Some(current)) = (&self.data_dir, lock(&self.generation).clone())
        else {
            return;
        };
        let Ok(stale) = layout::stale_dirs(data_dir, &current) else {
            self.stale_left.store(true, Ordering::Relaxed);
            return;
        };
        for dir in stale {
            if !delete_released(&dir, Instant::now()) {
                self.stale_left.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The checkpoint thread's loop: checkpoints every [`CHECKPOINT_EVERY`] when the log grew,
    /// or at once when woken, until stopped.
    pub(crate) fn run_checkpointer(&self) {
        let mut wake = lock(&self.wake);
        loop {
            if *wake == Some(true) {
                return;
            }
            if wake.is_none() {
                wake = self
                    .wake_cond
                    .wait_timeout(wake, CHECKPOINT_EVERY)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            if *wake == Some(true) {
                return;
            }
            *wake = None;
            drop(wake);
            let grown = self
                .wal
                .as_ref()
                .is_some_and(|w| w.submitted() > self.checkpointed.load(Ordering::Relaxed));
            if grown || self.rebuild_wanted(Rebuild::IfDue) {
                // A failed checkpoint keeps the log; the next one retries.
                let _ = self.checkpoint();
            }
            wake = lock(&self.wake);
        }
    }

    pub(super) fn wake_checkpointer(&self, stop: bool) {
        let mut wake = lock(&self.wake);
        if *wake != Some(true) {
            *wake = Some(stop);
        }
        self.wake_cond.notify_all();
    }

    pub(crate) fn stop_checkpointer(&self) {
        self.wake_checkpointer(true);
    }
}
