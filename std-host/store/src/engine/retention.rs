//! Retention: the sweep (age limits, terminal tasks removed), count limits, and truncation
//! of a task's log, each logged before it is applied.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    pub(crate) fn sweep(&self, now: Millis) -> usize {
        let slots: Vec<(String, Arc<LiveTask>)> = lock_read(&self.tasks)
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let mut removed = 0;
        let mut changed = false;
        for (id, slot) in slots {
            match self.sweep_task(&id, &slot, now) {
                Ok(Swept::Removed) => {
                    removed += 1;
                    changed = true;
                }
                Ok(Swept::Truncated) => changed = true,
                Ok(Swept::Kept) | Err(_) => {}
            }
        }
        if changed {
            self.changes.notify();
        }
        removed
    }

    pub(super) fn sweep_task(
        &self,
        id: &str,
        slot: &LiveTask,
        now: Millis,
    ) -> Result<Swept, StoreError> {
        let _append = lock(&slot.append);
        self.settle(slot)?;
        let (record_expired, earliest, next) = {
            let st = lock(&slot.state);
            if st.removed || !st.visible {
                return Ok(Swept::Kept);
            }
            let expired = st.record.status.is_terminal()
                && self
                    .retention
                    .is_task_expired(st.record.last_updated_at, now);
            (expired, st.earliest, st.next)
        };
        if record_expired {
            let rec = Record::Remove { task_id: id };
            let mut buf = Vec::new();
            encode_into(&rec, &mut buf)?;
            self.write(&buf, false, |index, lsn| {
                index.apply(&rec, &buf, lsn)?;
                // Inside the gate, so a checkpoint never lists a task its index no longer has.
                lock(&slot.state).removed = true;
                Ok(())
            })?;
            let freed = {
                let mut st = lock(&slot.state);
                st.removed = true;
                st.sizes = VecDeque::new();
                st.empty = 0;
                std::mem::take(&mut st.bytes) + std::mem::take(&mut st.record_bytes)
            };
            self.free(freed);
            lock_write(&self.tasks).remove(id);
            self.removed_since_rebuild.fetch_add(1, Ordering::Relaxed);
            return Ok(Swept::Removed);
        }
        // Retention by age: events are in time order, so drop from the front.
        let mut floor = earliest;
        for raw in self.index().events(id, earliest, next, 4) {
            let raw = raw?;
            let (rec, _) = record::decode(&raw).map_err(StoreError::Record)?;
            let Some(ev) = rec.event() else { break };
            if !self.retention.is_expired(ev.at, now) {
                break;
            }
            floor = ev.seq.next().unwrap_or(next);
        }
        self.truncate(id, slot, earliest, floor)
    }

    /// Publishes a task's pending appends, if it has any (the caller holds its append lock,
    /// so it has none after this).
    pub(super) fn settle(&self, slot: &LiveTask) -> Result<(), StoreError> {
        if lock(&slot.state).ahead.is_some() {
            self.drain()?;
        }
        // And applies them, so the sweep's reads of the index see every published event.
        if !lock(&slot.state).unapplied.is_empty() {
            self.apply_unapplied()?;
        }
        Ok(())
    }

    /// Drops the events of a task before `floor` (the caller holds its append lock).
    pub(crate) fn truncate(
        &self,
        id: &str,
        slot: &LiveTask,
        earliest: Seq,
        floor: Seq,
    ) -> Result<Swept, StoreError> {
        if floor <= earliest {
            return Ok(Swept::Kept);
        }
        let rec = Record::Truncate {
            task_id: id,
            before: floor,
        };
        let mut buf = Vec::new();
        encode_into(&rec, &mut buf)?;
        // Not waited for: a lost truncation is redone by the next sweep or open.
        self.write(&buf, false, |index, lsn| index.apply(&rec, &buf, lsn))?;
        let mut st = lock(&slot.state);
        let freed = st.drop_sizes_before(floor);
        st.earliest = floor;
        if let Some(cache) = &mut st.cache {
            cache.evict_before(floor);
        }
        drop(st);
        self.free(freed);
        self.dropped_since_rebuild
            .fetch_add(freed, Ordering::Relaxed);
        Ok(Swept::Truncated)
    }

    /// Enforces the count limit on every task (after a restart with a smaller limit).
    pub(crate) fn enforce_count_limits(&self) -> Result<(), StoreError> {
        let slots: Vec<(String, Arc<LiveTask>)> = lock_read(&self.tasks)
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let max = u64::from(self.retention.max_events.max(1));
        for (id, slot) in slots {
            let _append = lock(&slot.append);
            self.settle(&slot)?;
            let (earliest, floor) = {
                let st = lock(&slot.state);
                (st.earliest, st.count_floor(st.earliest, st.next, max))
            };
            if floor > earliest {
                self.truncate(&id, &slot, earliest, floor)?;
            }
        }
        Ok(())
    }
}
