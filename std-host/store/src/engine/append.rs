//! Appends: seq allocation under a task's lock, the store-wide byte budget, the log write,
//! the durability wait (or the pipelined drain) and publication, after which readers see an
//! event; fail-stop on a failed write.

use std::borrow::Cow;
use std::sync::MutexGuard;

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    pub(crate) fn create_task(&self, record: TaskRecord, now: Millis) -> Result<(), AppendError> {
        let id = record.task_id.clone();
        let slot = LiveTask::new(LiveTaskState {
            record,
            earliest: Seq::ZERO,
            next: Seq::ZERO,
            visible: false,
            removed: false,
            cache: None,
            unapplied: VecDeque::new(),
            ahead: None,
            sizes: VecDeque::new(),
            empty: 0,
            bytes: 0,
            record_bytes: 0,
        });
        {
            let mut tasks = lock_write(&self.tasks);
            if tasks.contains_key(&id) {
                return Err(AppendError::Storage(StoreError::DuplicateTask(id)));
            }
            tasks.insert(id.clone(), slot);
        }
        let pushed = self.push(
            &id,
            STATUS_EVENT_TYPE,
            br#"{"status":"working"}"#,
            now,
            Op::Create,
            true,
        );
        if pushed.is_err() {
            lock_write(&self.tasks).remove(&id);
        }
        pushed.map(|_| ())
    }

    /// Appends an event; with `wait`, returns once it is durable and visible, without (in
    /// `group` and `none` mode, on a data dir) once it is logged, to become durable and
    /// visible at the next flush.
    pub(crate) fn append(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        wait: bool,
    ) -> Result<Seq, AppendError> {
        self.push(task_id, event_type, payload, now, Op::Append, wait)
    }

    /// Returns once the event `seq` of a task (and every event before it) is durable and
    /// visible, or the task no longer exists.
    pub(crate) fn wait_durable(&self, task_id: &str, seq: Seq) -> Result<(), StoreError> {
        let Some(slot) = self.slot(task_id) else {
            return Ok(());
        };
        let pending = {
            let st = lock(&slot.state);
            st.next <= seq && st.ahead.is_some_and(|a| a.next > seq)
        };
        if pending {
            self.drain()?;
        }
        Ok(())
    }

    pub(crate) fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        message: Option<String>,
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        now: Millis,
    ) -> Result<Seq, AppendError> {
        let bytes = status.event_payload(message.as_deref()).into_bytes();
        self.push(
            task_id,
            STATUS_EVENT_TYPE,
            &bytes,
            now,
            Op::Finish {
                status,
                message,
                result,
                error,
            },
            true,
        )
    }

    /// Validates, allocates the seq, logs, applies to sled, then makes the event visible.
    pub(super) fn push(
        &self,
        task_id: &str,
        event_type: &str,
        payload: &[u8],
        now: Millis,
        op: Op,
        wait: bool,
    ) -> Result<Seq, AppendError> {
        // The limit is for the events tools emit; the store's own status events always fit.
        let (ty, checked, compact) =
            self.stored_payload(event_type, payload, matches!(op, Op::Append))?;
        let compact: &[u8] = &compact;

        let size = (event_type.len() + compact.len()) as u64;
        let finishing = matches!(op, Op::Finish { .. });
        let from_checkpoint = matches!(op, Op::Append) && self.retention.drops_before(event_type);
        let slot = self.slot(task_id).ok_or(AppendError::UnknownTask)?;
        let _append = lock(&slot.append);
        let (seq, earliest, floor, new_record, sizes_front, old_record_bytes, published_bytes) = {
            let st = lock(&slot.state);
            // Only a creation may (and must) find the task not yet visible.
            let must_be_visible = !matches!(op, Op::Create);
            if st.removed || st.visible != must_be_visible {
                return Err(AppendError::UnknownTask);
            }
            let (head, head_earliest, terminal) = st.head();
            if terminal {
                return Err(AppendError::Terminal);
            }
            let new_record = match op {
                Op::Create => Some(st.record.clone()),
                Op::Append => None,
                Op::Finish {
                    status,
                    message,
                    result,
                    error,
                } => Some(TaskRecord {
                    status,
                    status_message: message,
                    result,
                    error,
                    last_updated_at: now,
                    ..st.record.clone()
                }),
            };
            // The sizes of the oldest events, which the count limit may push out below (an
            // estimate while appends are pending; publication corrects the budget).
            let mut front = [0u32; 2];
            for (f, size) in front.iter_mut().zip(&st.sizes) {
                *f = *size;
            }
            // Retention by count: the event that makes the log too long pushes the oldest out.
            // Like the core ring, a limit of zero still keeps the newest event; seqs a repair
            // left empty count for nothing (R1).
            let max = u64::from(self.retention.max_events.max(1));
            let count_floor = head.next().map_or(head_earliest, |next| {
                st.count_floor(head_earliest, next, max)
            });
            (
                head,
                head_earliest,
                count_floor,
                new_record,
                front,
                st.record_bytes,
                st.bytes,
            )
        };
        let next = seq
            .next()
            .ok_or(AppendError::Storage(StoreError::SeqExhausted))?;
        let state = match &new_record {
            Some(r) => Some(serde_json::to_vec(r).map_err(|e| {
                AppendError::Storage(StoreError::Corrupt(format!("task record: {e}")))
            })?),
            None => None,
        };
        // Retention from a checkpoint (CP-03): the checkpoint itself becomes the floor, and
        // the same truncation record as the count limit's drops everything before it.
        let floor = if from_checkpoint {
            floor.max(seq)
        } else {
            floor
        };
        // One append pushes out at most the one or two events beyond the count limit; a
        // checkpoint pushes out every published event (an estimate while appends are
        // pending, settled at publication).
        let pushed_out = usize::try_from(floor.distance_from(earliest)).unwrap_or(usize::MAX);
        let events_freed: u64 = if from_checkpoint {
            published_bytes
        } else {
            sizes_front
                .iter()
                .take(pushed_out)
                .copied()
                .map(u64::from)
                .sum()
        };
        // A creation or an end (re)writes the task's record, which the budget counts too.
        let new_record_bytes = state
            .as_ref()
            .map(|s| crate::model::TASK_OVERHEAD_BYTES + s.len() as u64);
        let (size, freed) = match new_record_bytes {
            Some(r) => (size + r, events_freed + old_record_bytes),
            None => (size, events_freed),
        };
        // Encoded from the caller's bytes, which `checked` proves valid: the JSON is not
        // scanned again.
        let event = EventRecord {
            task_id,
            seq,
            at: now,
            event_type,
            payload: compact,
        };
        let record = match &state {
            Some(state) => Record::Transition { event, state },
            None => Record::Event(event),
        };
        let new_floor = (floor > earliest).then_some(floor);
        let truncate = new_floor.map(|before| Record::Truncate { task_id, before });
        let mut buf = Vec::with_capacity(
            record::max_encoded_len(&record)
                + truncate.as_ref().map_or(0, record::max_encoded_len)
                + event_type.len()
                + compact.len(),
        );
        encode_checked_into(&record, (ty, checked), &mut buf).map_err(AppendError::Storage)?;
        let event_len = buf.len();
        if let Some(truncate) = &truncate {
            encode_into(truncate, &mut buf).map_err(AppendError::Storage)?;
        }
        let records_len = buf.len();
        buf.extend_from_slice(event_type.as_bytes());
        buf.extend_from_slice(compact);
        self.reserve(size, freed, finishing)?;

        let pending = Pending {
            slot: Arc::clone(&slot),
            seq,
            next,
            at: now,
            state,
            floor: new_floor,
            buf,
            event_len,
            records_len,
            type_len: event_type.len(),
            lsn: AtomicU64::new(0),
            new_record,
            new_record_bytes,
            events_freed,
        };
        let ahead = Ahead {
            next,
            earliest: floor,
            terminal: finishing,
        };
        // A creation or an end waits for durability whatever the caller asked.
        let wait = wait || new_record_bytes.is_some();
        let queued = self
            .commit(&slot, pending, ahead, wait, (ty, checked))
            .map_err(|e| {
                self.release(size, freed);
                AppendError::Storage(e)
            })?;
        // Queued: a failed flush from here on is the store's (fail-stop), and the reservation
        // belongs to the queued append.
        if let Some(ticket) = queued {
            self.drain_through(ticket, wait)
                .map_err(AppendError::Storage)?;
        }
        Ok(seq)
    }

    /// The checks every append makes (a valid type, a JSON object payload, within
    /// `max_payload_bytes` when `limited`, a store that has not failed), and the payload in
    /// its stored, compact form (borrowed when it already is compact).
    ///
    /// Also the validated type and payload, which prove the record encoded from these bytes
    /// valid (see `record::encode_checked`).
    #[allow(clippy::type_complexity)]
    fn stored_payload<'t, 'p>(
        &self,
        event_type: &'t str,
        payload: &'p [u8],
        limited: bool,
    ) -> Result<(EventType<'t>, Payload<'p>, Cow<'p, [u8]>), AppendError> {
        let ty = EventType::new(event_type).map_err(AppendError::InvalidType)?;
        let p = Payload::new(payload).map_err(AppendError::InvalidPayload)?;
        let limit = self.retention.max_payload_bytes;
        if limited && p.compact_len() > limit as usize {
            return Err(AppendError::PayloadTooLarge {
                size: p.compact_len(),
                limit,
            });
        }
        let compact = match p.as_compact() {
            Some(text) => Cow::Borrowed(text),
            None => {
                let mut buf = vec![0; p.compact_len()];
                p.write_compact(&mut buf)
                    .map_err(AppendError::InvalidPayload)?;
                Cow::Owned(buf)
            }
        };
        if self.failed.load(Ordering::Acquire) {
            return Err(AppendError::Storage(StoreError::Failed));
        }
        Ok((ty, p, compact))
    }

    /// Makes a reserved append durable and visible as the mode says: queued for the next
    /// flush, answering the ticket to drain through when `wait` (or when the queue is full);
    /// or, in `event` mode and in memory, written, applied and published at once. On an error
    /// nothing was queued, and the caller releases the reservation.
    ///
    /// `checked` is the append's validated type and payload (the caller's bytes), which an
    /// append published here puts into the read cache without validating them again.
    fn commit(
        &self,
        slot: &LiveTask,
        pending: Pending,
        ahead: Ahead,
        wait: bool,
        checked: (EventType<'_>, Payload<'_>),
    ) -> Result<Option<u64>, StoreError> {
        if self.pipelined() {
            // Backpressure: when sled falls behind, this appender applies what is published
            // (outside any drain: the flusher goes on publishing meanwhile).
            if self.unapplied_over_limit() {
                self.apply_unapplied()?;
            }
            // Logged now, durable and visible at the next flush (by the flusher, or by this
            // thread below when it must wait).
            // Set before the append is queued, so that its publication (which may come at
            // once) finds it and clears it.
            let before = lock(&slot.state).ahead.replace(ahead);
            let (queued, ticket) = self.enqueue(pending).inspect_err(|_| {
                lock(&slot.state).ahead = before;
            })?;
            return Ok((wait || queued >= MAX_PENDING).then_some(ticket));
        }
        self.write(pending.encoded(), true, |index, lsn| {
            pending.lsn.store(lsn, Ordering::Relaxed);
            index.apply_all(pending.records_at(lsn))
        })?;
        self.publish_checked(&Arc::new(pending), false, Some(checked));
        self.changes.notify();
        Ok(None)
    }

    /// Whether appends go through the pipeline: `group` and `none` mode with a log (in memory,
    /// where nothing is logged, an append is visible at once whatever the mode). In `none`
    /// mode a drain writes the batch with one `write` and no `fdatasync`: the pipeline takes
    /// sled and the per-event system call off the appender's path.
    pub(super) fn pipelined(&self) -> bool {
        self.durability != Durability::Event && self.wal.is_some()
    }

    /// Logs a pending append (without waiting) and queues it for publication, in one order
    /// for both; returns how many are queued and its ticket.
    pub(super) fn enqueue(&self, pending: Pending) -> Result<(usize, u64), StoreError> {
        let Some(wal) = &self.wal else {
            return Err(StoreError::Failed);
        };
        // Shared from here on (publication and the applier take it by reference); made
        // outside the pipe's lock.
        let pending = Arc::new(pending);
        let queued = {
            let _gate = lock_read(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            let mut pipe = lock(&self.pipe);
            match wal.submit_deferred(pending.encoded()) {
                // Read only after this lock (or one taken after it) hands the append on.
                Ok(lsn) => pending.lsn.store(lsn, Ordering::Relaxed),
                Err(e) => {
                    drop(pipe);
                    self.set_failed();
                    return Err(StoreError::Wal(e));
                }
            }
            pipe.items.push(pending);
            pipe.queued += 1;
            if pipe.gather_target > 0 && pipe.items.len() >= pipe.gather_target {
                self.gathered.notify_one();
            }
            (pipe.items.len(), pipe.queued)
        };
        if queued.0 == 1 {
            self.pipe_cond.notify_one();
        }
        Ok(queued)
    }

    /// Makes every queued append durable (one flush for all), applies them to the index in
    /// one batch, then publishes them; returns once every append queued before the call is
    /// published (by this thread, or by the one that took it first). A failure is fail-stop.
    pub(crate) fn drain(&self) -> Result<(), StoreError> {
        let ticket = lock(&self.pipe).queued;
        self.drain_through(ticket, false)
    }

    /// [`drain`](Self::drain), unless the append with `ticket` (and so every one before it)
    /// was published meanwhile: a waiter whose append a drain that ran while it waited
    /// covered returns at once, instead of flushing the one or two appends queued since (the
    /// next drain then takes them with everything else queued by then). A leader that
    /// `gather`s (an appender waiting for its own append, in `group` mode) first waits up to
    /// [`GATHER_WAIT`] until as many appends are queued as the last drain published: the
    /// appenders it released queue again meanwhile, and one flush covers them all.
    pub(super) fn drain_through(&self, ticket: u64, gather: bool) -> Result<(), StoreError> {
        if !self.pipelined() {
            return Ok(());
        }
        loop {
            if self.published.load(Ordering::Acquire) >= ticket {
                return self.drain_outcome();
            }
            let mut pipe = lock(&self.pipe);
            if self.published.load(Ordering::Acquire) >= ticket {
                return self.drain_outcome();
            }
            if pipe.draining {
                // Group commit: the leader's drain may cover this append. Parked until the
                // leader wakes this thread (a spurious return just looks again).
                pipe.waiters.push(Waiter {
                    ticket,
                    thread: std::thread::current(),
                });
                drop(pipe);
                std::thread::park();
                continue;
            }
            pipe.draining = true;
            if gather && self.durability == Durability::Group {
                pipe = self.gather(pipe);
            }
            drop(pipe);
            let result = {
                let _one = lock(&self.flushing);
                let _gate = lock_read(&self.gate);
                self.drain_locked()
            };
            self.end_drain();
            result?;
        }
    }

    /// What a waiter whose append is covered returns: an append dropped by a failed drain
    /// counts as covered, and its waiter learns of the failure here.
    fn drain_outcome(&self) -> Result<(), StoreError> {
        if self.failed.load(Ordering::Acquire) {
            Err(StoreError::Failed)
        } else {
            Ok(())
        }
    }

    /// A leader's end of its drain: wakes each waiter the drain covered, and one it did not
    /// (which leads the next drain, or finds one under way and waits again), each on its own
    /// and outside the pipe's lock. Every waiter was registered while this drain ran, so
    /// none is left without a drain that will wake it.
    fn end_drain(&self) {
        let woken: Vec<Waiter> = {
            let mut pipe = lock(&self.pipe);
            pipe.draining = false;
            let published = self.published.load(Ordering::Acquire);
            let mut next_leader = false;
            let mut woken = Vec::with_capacity(pipe.waiters.len());
            pipe.waiters.retain_mut(|w| {
                let wake = w.ticket <= published || !std::mem::replace(&mut next_leader, true);
                if wake {
                    woken.push(Waiter {
                        ticket: w.ticket,
                        thread: w.thread.clone(),
                    });
                }
                !wake
            });
            woken
        };
        for w in woken {
            w.thread.unpark();
        }
    }

    /// A leader's wait for the appenders of the last batch (see
    /// [`drain_through`](Self::drain_through)); returns the pipe locked again.
    fn gather<'a>(&self, mut pipe: MutexGuard<'a, Pipe>) -> MutexGuard<'a, Pipe> {
        let target = self.last_batch.load(Ordering::Relaxed);
        if pipe.items.len() >= target {
            return pipe;
        }
        let deadline = Instant::now() + GATHER_WAIT;
        pipe.gather_target = target;
        while pipe.items.len() < target && !self.failed.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            pipe = self
                .gathered
                .wait_timeout(pipe, deadline - now)
                .map_or_else(|e| e.into_inner().0, |(p, _)| p);
        }
        pipe.gather_target = 0;
        pipe
    }

    /// [`drain`](Self::drain) for a caller that holds `flushing` and the gate (shared, or
    /// exclusive: a checkpoint, so that everything logged is in the index before it records
    /// its LSN).
    pub(super) fn drain_locked(&self) -> Result<(), StoreError> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let (items, upto, ticket) = {
            let mut pipe = lock(&self.pipe);
            if !pipe.items.is_empty() {
                self.last_batch.store(pipe.items.len(), Ordering::Relaxed);
            }
            (
                std::mem::take(&mut pipe.items),
                wal.submitted(),
                pipe.queued,
            )
        };
        let result = self.publish_all(wal, items, upto);
        // On failure the taken appends are dropped, never published: they count as done,
        // and their waiters see `failed`. Stored only now, so a waiter that sees its ticket
        // covered sees its append published.
        self.published.store(ticket, Ordering::Release);
        result
    }

    /// Flushes the log through `upto`, publishes `items` at once (durable, not yet in the
    /// index: reads find them in their tasks' unapplied sets) and hands them to the applier.
    pub(super) fn publish_all(
        &self,
        wal: &Wal,
        items: Vec<Arc<Pending>>,
        upto: u64,
    ) -> Result<(), StoreError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Failed);
        }
        if items.is_empty() {
            return Ok(());
        }
        self.fail_stop(wal.flush_through(upto).map_err(StoreError::Wal))?;
        // Into each task's set first, then the applier's queue: the applier takes an append
        // out of its task's set only after applying it, so it must find it there. A run of
        // one task's appends is published under one hold of its lock, so a task emitting
        // while its batch is published waits for that lock once per batch, not per event.
        for run in items.chunk_by(|a, b| Arc::ptr_eq(&a.slot, &b.slot)) {
            self.publish_run(run);
        }
        {
            let mut unapplied = lock(&self.unapplied);
            unapplied.bytes += items.iter().map(|p| p.footprint()).sum::<u64>();
            unapplied.items.extend(items);
        }
        self.changes.notify();
        // In `none` mode no device flush paces the drains, and waking the applier for each
        // small batch costs more than applying it: the drain applies its batch itself (one
        // thread fewer to schedule per batch) unless the applier is at work. What is left
        // (more than one apply batch, or all of it) goes to the applier. A failure is
        // fail-stop, as in the applier.
        if self.durability == Durability::None {
            if let Ok(_one) = self.applying.try_lock() {
                let _ = self.apply_batch();
            }
        }
        if !lock(&self.unapplied).items.is_empty() {
            self.apply_cond.notify_one();
        }
        if upto.saturating_sub(self.checkpointed.load(Ordering::Relaxed)) > CHECKPOINT_BYTES {
            self.wake_checkpointer(false);
        }
        Ok(())
    }

    /// Makes a run of one task's durable appends (in log order) visible, as
    /// [`publish_checked`](Self::publish_checked) does one, each also into the task's
    /// unapplied set (it is not yet in the index). Their types and payloads are checked for
    /// the read cache before the task's lock is taken, so the lock is held only to publish.
    fn publish_run(&self, run: &[Arc<Pending>]) {
        let Some(first) = run.first() else {
            return;
        };
        // In chunks of a fixed size, so the proofs need no allocation (runs are often
        // short: tasks emitting at once interleave in the log).
        const CHUNK: usize = 32;
        let mut checked: [Option<(EventType<'_>, Payload<'_>)>; CHUNK] = [None; CHUNK];
        for chunk in run.chunks(CHUNK) {
            for (proof, p) in checked.iter_mut().zip(chunk) {
                *proof = EventType::new(p.event_type())
                    .ok()
                    .zip(Payload::new(p.payload()).ok());
            }
            let mut st = lock(&first.slot.state);
            for (p, proof) in chunk.iter().zip(checked) {
                self.publish_locked(&mut st, p, true, proof);
            }
        }
    }

    /// Makes a durable append visible: the task's published state, its read cache, and (when
    /// it is not yet in the index, `unapplied`) its task's unapplied set; given the append's
    /// type and payload already validated (the same text as `p`'s, from which `p` was made),
    /// so the cache takes them as they are.
    fn publish_checked(
        &self,
        p: &Arc<Pending>,
        unapplied: bool,
        checked: Option<(EventType<'_>, Payload<'_>)>,
    ) {
        let mut st = lock(&p.slot.state);
        self.publish_locked(&mut st, p, unapplied, checked);
    }

    /// [`publish_checked`](Self::publish_checked) under the task's lock, held by the caller.
    /// Without `checked` (cannot happen: both were validated) the task's cache is reset.
    fn publish_locked(
        &self,
        st: &mut LiveTaskState,
        p: &Arc<Pending>,
        unapplied: bool,
        checked: Option<(EventType<'_>, Payload<'_>)>,
    ) {
        if unapplied {
            st.unapplied.push_back(Arc::clone(p));
        }
        let event_size = p.event_size();
        st.push_size(u32::try_from(event_size).unwrap_or(u32::MAX));
        if let Some(r) = p.new_record_bytes {
            st.record_bytes = r;
        }
        let floor = p.floor.unwrap_or(st.earliest).max(st.earliest);
        let dropped = st.drop_sizes_before(floor);
        // The append reserved its size less `events_freed`, an estimate from the oldest sizes
        // it saw; what was really dropped settles the difference.
        if dropped > p.events_freed {
            self.free(dropped - p.events_freed);
        } else if dropped < p.events_freed {
            self.stored_bytes
                .fetch_add(p.events_freed - dropped, Ordering::AcqRel);
        }
        self.dropped_since_rebuild
            .fetch_add(dropped, Ordering::Relaxed);
        st.next = p.next;
        st.earliest = floor;
        st.visible = true;
        if st.ahead.is_some_and(|a| a.next == p.next) {
            st.ahead = None;
        }
        if let Some(r) = &p.new_record {
            st.record = r.clone();
        }
        if st.record.status.is_terminal() {
            st.cache = None;
        } else if let Some((ty, payload)) = checked {
            let cache = st
                .cache
                .get_or_insert_with(|| Box::new(Cache::resuming_at(p.seq)));
            cache_append(cache, p.seq, p.at, ty, payload, floor);
        } else if let Some(cache) = &mut st.cache {
            // Cannot happen (both were validated); a cache that would miss it must not stay.
            cache.reset(p.next);
        }
    }

    /// Takes `size` bytes of the store-wide budget for an event whose append frees `freed`
    /// (events the count limit pushes out). A task's creation is refused once the budget is
    /// spent, an event too when it would overspend it; a task's end never is (it is small, and
    /// a task must be able to end), nor is an append that frees at least what it takes.
    pub(super) fn reserve(
        &self,
        size: u64,
        freed: u64,
        finishing: bool,
    ) -> Result<(), AppendError> {
        let limit = self.max_store_bytes;
        let always = finishing || size <= freed;
        let updated = self
            .stored_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                let new = cur.saturating_sub(freed).saturating_add(size);
                (always || new <= limit).then_some(new)
            });
        match updated {
            Ok(_) => Ok(()),
            Err(stored) => Err(AppendError::StoreFull { stored, limit }),
        }
    }

    /// Gives back what [`reserve`](Self::reserve) took, for an append that failed.
    pub(super) fn release(&self, size: u64, freed: u64) {
        // Both directions saturate, so a failed append cannot wrap the counter.
        let _ = self
            .stored_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                Some(cur.saturating_add(freed).saturating_sub(size))
            });
    }

    /// Returns `bytes` to the budget (events truncated or removed).
    pub(super) fn free(&self, bytes: u64) {
        self.release(bytes, 0);
    }

    /// The bytes of retained events now counted against the budget.
    pub(crate) fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Acquire)
    }

    /// Logs `bytes` (durably with `wait`) and applies the change to sled, inside the gate. A
    /// failure of either is fail-stop.
    pub(super) fn write(
        &self,
        bytes: &[u8],
        wait: bool,
        apply: impl FnOnce(&Index, u64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let submitted = {
            let _gate = lock_read(&self.gate);
            if self.failed.load(Ordering::Acquire) {
                return Err(StoreError::Failed);
            }
            // What is published but not yet in the index goes first, so the index gets every
            // change in log order (a truncation or removal after the events it drops).
            self.apply_locked()?;
            let result = match &self.wal {
                Some(wal) => wal.submit(bytes, wait).map_err(StoreError::Wal),
                None => Ok(0),
            }
            .and_then(|lsn| apply(&self.index(), lsn));
            if result.is_err() {
                self.set_failed();
            }
            result?;
            self.wal.as_ref().map_or(0, Wal::submitted)
        };
        if submitted.saturating_sub(self.checkpointed.load(Ordering::Relaxed)) > CHECKPOINT_BYTES {
            self.wake_checkpointer(false);
        }
        Ok(())
    }

    /// Stops the store for good (fail-stop) and wakes every waiter on the change signal, so
    /// the server learns of it at once.
    pub(super) fn set_failed(&self) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            crate::log::log!(
                Error,
                "storage failed: the store refuses every write from now on"
            );
        }
        self.changes.notify();
    }

    /// `result`, after making an error of it fail-stop.
    pub(super) fn fail_stop<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.set_failed();
        }
        result
    }

    /// Whether a write or flush failure stopped the store.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}
