//! Reads: task views, retained ranges, one event, and runs of events from a seq, from the
//! running task's cache, its unapplied set, or the index.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    pub(crate) fn task(&self, task_id: &str) -> Option<TaskView> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        view(&st)
    }

    pub(crate) fn tasks(&self) -> Vec<TaskView> {
        let slots: Vec<Arc<LiveTask>> = lock_read(&self.tasks).values().cloned().collect();
        let mut all: Vec<TaskView> = slots.iter().filter_map(|s| view(&lock(&s.state))).collect();
        all.sort_by(|a, b| {
            (a.record.created_at, &a.record.task_id).cmp(&(b.record.created_at, &b.record.task_id))
        });
        all
    }

    /// The retained range of a task, if it is visible.
    pub(super) fn retained(&self, task_id: &str) -> Option<Retained> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        retained_of(&st)
    }

    /// The retained range of a task and, if `from` is in its read cache, up to `max` events
    /// from there (handed to `push`; their count is returned); if it is not, what of the task
    /// is not yet in the index, taken in the same look as the range.
    pub(super) fn retained_or_cached(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        mut push: impl FnMut(RawEvent),
    ) -> Option<(Retained, usize, Tail)> {
        let slot = self.slot(task_id)?;
        let st = lock(&slot.state);
        let retained = retained_of(&st)?;
        let from = from.max(retained.earliest());
        let mut n = 0;
        if let Some(cache) = &st.cache {
            if cache.retained().contains(from) {
                for e in cache.iter_from(from).take(max) {
                    push(RawEvent::copied(e.seq, e.at, e.event_type, e.payload));
                    n += 1;
                }
            }
        }
        let tail = if n == 0 {
            Tail {
                start: st.unapplied.front().map(|p| p.seq),
                events: st
                    .unapplied
                    .iter()
                    .filter(|p| p.seq >= from)
                    .take(max)
                    .cloned()
                    .collect(),
            }
        } else {
            Tail::default()
        };
        Some((retained, n, tail))
    }

    pub(crate) fn event(&self, task_id: &str, seq: Seq) -> Result<Option<StoredEvent>, StoreError> {
        let mut cached = None;
        let Some((retained, n, tail)) =
            self.retained_or_cached(task_id, seq, 1, |e| cached = Some(e.to_stored()))
        else {
            return Ok(None);
        };
        if !retained.contains(seq) {
            return Ok(None);
        }
        if n == 1 {
            return Ok(cached);
        }
        if tail.start.is_some_and(|start| seq >= start) {
            return Ok(tail
                .events
                .first()
                .filter(|p| p.seq == seq)
                .map(|p| RawEvent::copied(p.seq, p.at, p.event_type(), p.payload()).to_stored()));
        }
        match self.index().event(task_id, seq)? {
            None => Ok(None),
            Some(raw) => RawEvent::from_index(raw, task_id, seq).map(|e| Some(e.to_stored())),
        }
    }

    /// Hands up to `max` retained events of a task from `from` on, in seq order, to `push`;
    /// returns how many. Stops early at a seq that retention dropped meanwhile.
    pub(crate) fn read_raw_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        mut push: impl FnMut(RawEvent),
    ) -> Result<usize, StoreError> {
        if max == 0 {
            return Ok(0);
        }
        let Some((retained, cached, tail)) = self.retained_or_cached(task_id, from, max, &mut push)
        else {
            return Ok(0);
        };
        if cached > 0 {
            return Ok(cached);
        }
        let from = from.max(retained.earliest());
        if from >= retained.next() {
            return Ok(0);
        }
        // The index holds every visible event before the task's first unapplied one (taken
        // in the same look as the range, so an event applied since is in both places).
        let index_end = tail
            .start
            .map_or(retained.next(), |start| start.min(retained.next()));
        let mut expected = from;
        let mut n = 0;
        if from < index_end {
            for raw in self.index().events(task_id, from, index_end, max).take(max) {
                match RawEvent::from_index(raw?, task_id, expected) {
                    Ok(ev) => push(ev),
                    // A hole: retention dropped these meanwhile. Stop; the caller re-checks
                    // the retained range (and answers `events_gone`).
                    Err(StoreError::Corrupt(_)) if self.gone(task_id, expected) => return Ok(n),
                    Err(e) => return Err(e),
                }
                n += 1;
                match expected.next() {
                    Some(s) => expected = s,
                    None => return Ok(n),
                }
            }
        }
        if expected < index_end {
            // The index read stopped at `max` (or short of it, which the next read resolves).
            return Ok(n);
        }
        let first = expected;
        for p in tail.events.iter().filter(|p| p.seq >= first) {
            if n >= max || p.seq != expected {
                break;
            }
            push(RawEvent::copied(p.seq, p.at, p.event_type(), p.payload()));
            n += 1;
            match expected.next() {
                Some(s) => expected = s,
                None => break,
            }
        }
        Ok(n)
    }

    pub(crate) fn read_from(
        &self,
        task_id: &str,
        from: Seq,
        max: usize,
        out: &mut Vec<StoredEvent>,
    ) -> Result<usize, StoreError> {
        self.read_raw_from(task_id, from, max, |e| out.push(e.to_stored()))
    }

    /// Whether `seq` is no longer retained.
    pub(super) fn gone(&self, task_id: &str, seq: Seq) -> bool {
        self.retained(task_id).is_none_or(|r| seq < r.earliest())
    }
}
