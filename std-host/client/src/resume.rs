//! [`ResumableStream`]: following one task's events across reconnects, the client half of
//! SEP-2694's resume contract.
//!
//! - The cursor is persisted only after the handler returns `Ok` for an event (RS-08), and
//!   each (re)connect sends it as `after` (RS-09).
//! - Events at or below the cursor are duplicates and are dropped, never handed to the handler
//!   (RS-10, RS-11); a duplicate whose content differs from the processed original is a
//!   violation (EV-08).
//! - The next event must be exactly the cursor + 1; a gap or a reordering is an error, never
//!   accepted silently (EV-03, EV-04, RS-07). The only gaps accepted are the ones the caller's
//!   [`GonePolicy`] accepts after the server said `events_gone`; they are recorded in
//!   [`FollowStats::gaps`].
//! - Every event must carry the related-task `_meta` naming its task (NT-01, NT-02).
//! - [`ResumableStream::follow_state`] rebuilds from checkpoints (CP-06): when the first event
//!   after a gap (an `events_gone` recovery, or a late join whose first event is not seq 0) is a
//!   `dev.taskstream.checkpoint`, the host is handed [`Delivery::FromCheckpoint`] with its state,
//!   then the events after it, and so knows that it started from a checkpoint.
//!
//! What it deliberately does not do: reconnect by itself. A lost connection is returned as an
//! error with the cursor safely persisted; the caller makes a new [`Client`] (respawning or
//! re-attaching as it sees fit) and calls [`ResumableStream::follow`] again.

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use serde_json::Value;

use crate::cursor::CursorStore;
use crate::error::{ClientError, CursorError, EventsGone, FollowError, Violation};
use crate::mcp_client::Client;
use crate::stream::{EventStream, StreamItem};
use crate::types::{Checkpoint, TaskEvent};

/// What to do when the server answers `events_gone` (EG-02), and when a stream without a
/// cursor does not start at seq 0 (the first events were dropped by retention).
///
/// Every gap a policy accepts is recorded in [`FollowStats::gaps`]; none is accepted silently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GonePolicy {
    /// Resume with `after = earliestSeq - 1`: the first retained event comes next, and the lost
    /// range is recorded as a gap.
    ResumeFromEarliest,
    /// Resume without `after`: every retained event, from whatever the server's earliest is by
    /// then; the lost range is recorded as a gap.
    ReplayRetained,
    /// Treat the gap as fatal: [`FollowError::EventsGone`].
    Fail,
}

/// What the handler wants after processing an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Commit the cursor and continue.
    Continue,
    /// Commit the cursor, cancel the stream and return [`FollowEnd::Stopped`].
    Stop,
}

/// How a [`ResumableStream`] follows.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The longest wait for the next event (a task may be quiet for a while; a stream that
    /// stays quiet longer is cancelled and [`ClientError::Timeout`] is returned).
    pub idle_timeout: Duration,
    /// The answer to `events_gone`.
    pub gone_policy: GonePolicy,
    /// How many `events_gone` answers one [`follow`](ResumableStream::follow) recovers from
    /// before giving up (retention can move on while the client catches up).
    pub max_gone_recoveries: u32,
    /// Whether an event without a matching related-task `_meta` is an error (NT-01, NT-02).
    pub require_related_task: bool,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            idle_timeout: Duration::from_secs(30),
            gone_policy: GonePolicy::ResumeFromEarliest,
            max_gone_recoveries: 4,
            require_related_task: true,
        }
    }
}

/// Which `after` the first `tasks/stream` of a follow sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartAt {
    /// The persisted cursor (omitted when there is none): RS-09.
    Cursor,
    /// This `after`, whatever the cursor. Events at or below the cursor are still dropped as
    /// duplicates; starting above the cursor records the skipped range as a gap.
    After(u64),
    /// No `after`: every retained event (RS-05).
    Retained,
}

/// How a follow ended without error.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FollowEnd {
    /// The server closed the stream normally (the task is terminal and everything was sent),
    /// with this result.
    Completed(Value),
    /// The handler returned [`Flow::Stop`]; the stream was cancelled.
    Stopped,
}

/// What [`ResumableStream::follow_state`] hands its host (CP-06).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Delivery<'a> {
    /// The next event, in seq order, with none missing before it.
    Event(&'a TaskEvent),
    /// The stream (re)started from a checkpoint: the host replaces its state with `checkpoint`'s
    /// state, which covers every event up to `checkpoint.covers_through`; the events in `lost`
    /// were never handed to it (retention dropped them), and the events after the checkpoint
    /// follow as [`Delivery::Event`].
    FromCheckpoint {
        /// The checkpoint event itself.
        event: &'a TaskEvent,
        /// Its payload.
        checkpoint: Checkpoint<'a>,
        /// The range the host did not see, now covered by the state.
        lost: SkippedRange,
    },
    /// The first event after a gap that no checkpoint covers (the server keeps no checkpoint
    /// there): the host's state may be missing what `lost` held.
    AfterGap {
        /// The event.
        event: &'a TaskEvent,
        /// The range lost before it.
        lost: SkippedRange,
    },
}

/// A range of seqs the client accepted as lost, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkippedRange {
    /// The first lost seq.
    pub first: u64,
    /// The last lost seq.
    pub last: u64,
}

/// Counters of a [`ResumableStream`], over all its follows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FollowStats {
    /// Events handed to the handler and committed.
    pub processed: u64,
    /// Events dropped as duplicates by (taskId, seq).
    pub duplicates: u64,
    /// Events whose related-task `_meta` was checked and matched.
    pub related_task_checked: u64,
    /// Gaps accepted by the [`GonePolicy`] (or by [`StartAt::After`] above the cursor).
    pub gaps: Vec<SkippedRange>,
    /// The `events_gone` answers received.
    pub gone: Vec<EventsGone>,
    /// The `after` of each `tasks/stream` request sent, in order.
    pub afters: Vec<Option<u64>>,
    /// The seqs of the checkpoints a gap was rebuilt from ([`Delivery::FromCheckpoint`]).
    pub checkpoint_starts: Vec<u64>,
}

/// What the next event has to be.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The cursor + 1.
    Next,
    /// No cursor and no `after`: seq 0, or a gap at the start (policy).
    Start,
    /// Exactly this seq (a gap before it is already recorded).
    Exactly(u64),
    /// Anything above the cursor; a gap before it is recorded (after `ReplayRetained`).
    AnyAbove,
}

/// Remembers hashes of recently processed events, to check that a duplicate is the same event.
const RECENT: usize = 4096;

/// One task's event stream, resumable across connections, with its cursor in a
/// [`CursorStore`].
#[derive(Debug)]
pub struct ResumableStream<S> {
    task_id: String,
    store: S,
    options: StreamOptions,
    cursor: Option<u64>,
    stats: FollowStats,
    recent: VecDeque<(u64, u64)>,
    /// The gap recorded since the last event handed over: the next event is the first after it.
    pending_gap: Option<SkippedRange>,
}

impl<S: CursorStore> ResumableStream<S> {
    /// Follows `task_id`, starting from the cursor `store` holds for it.
    ///
    /// # Errors
    ///
    /// If the cursor cannot be loaded.
    pub fn new(
        task_id: impl Into<String>,
        store: S,
        options: StreamOptions,
    ) -> Result<Self, CursorError> {
        let task_id = task_id.into();
        let cursor = store.load(&task_id)?;
        Ok(ResumableStream {
            task_id,
            store,
            options,
            cursor,
            stats: FollowStats::default(),
            recent: VecDeque::new(),
            pending_gap: None,
        })
    }

    /// The task.
    #[must_use]
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The last fully processed seq, as persisted.
    #[must_use]
    pub fn cursor(&self) -> Option<u64> {
        self.cursor
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> &FollowStats {
        &self.stats
    }

    /// The options.
    #[must_use]
    pub fn options(&self) -> &StreamOptions {
        &self.options
    }

    /// Changes the options (for instance the [`GonePolicy`]) between follows.
    pub fn set_options(&mut self, options: StreamOptions) {
        self.options = options;
    }

    /// The cursor store.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Gives the cursor store back.
    #[must_use]
    pub fn into_store(self) -> S {
        self.store
    }

    /// Follows from the persisted cursor until the server ends the stream, the handler stops,
    /// or an error. See [`follow_from`](Self::follow_from).
    ///
    /// # Errors
    ///
    /// As [`follow_from`](Self::follow_from).
    pub fn follow<E>(
        &mut self,
        client: &Client,
        handler: impl FnMut(&TaskEvent) -> Result<Flow, E>,
    ) -> Result<FollowEnd, FollowError<E>> {
        self.follow_from(client, StartAt::Cursor, handler)
    }

    /// Opens `tasks/stream` on `client` with the `after` that `start` says and hands each new
    /// event, in seq order, to `handler`; commits the cursor after each `Ok`.
    ///
    /// # Errors
    ///
    /// [`FollowError`]: in every case the stream is cancelled (if still open) and the persisted
    /// cursor is the last event the handler finished.
    pub fn follow_from<E>(
        &mut self,
        client: &Client,
        start: StartAt,
        mut handler: impl FnMut(&TaskEvent) -> Result<Flow, E>,
    ) -> Result<FollowEnd, FollowError<E>> {
        self.follow_inner(client, start, &mut |event, _| handler(event))
    }

    /// [`follow_from`](Self::follow_from) for a host that rebuilds the task's state from
    /// checkpoints (CP-06): each event is handed as a [`Delivery`], and the first event after
    /// a gap is [`Delivery::FromCheckpoint`] when it is a checkpoint (the usual case against
    /// `serve --retain-from-checkpoint`, with [`GonePolicy::ResumeFromEarliest`]), else
    /// [`Delivery::AfterGap`]. Never silent: the host always learns where it started.
    ///
    /// # Errors
    ///
    /// As [`follow_from`](Self::follow_from).
    pub fn follow_state<E>(
        &mut self,
        client: &Client,
        start: StartAt,
        mut host: impl FnMut(Delivery<'_>) -> Result<Flow, E>,
    ) -> Result<FollowEnd, FollowError<E>> {
        let mut starts = Vec::new();
        let end = self.follow_inner(client, start, &mut |event, gap| match gap {
            None => host(Delivery::Event(event)),
            Some(lost) => match event.checkpoint() {
                Some(checkpoint) => {
                    starts.push(event.seq);
                    host(Delivery::FromCheckpoint {
                        event,
                        checkpoint,
                        lost,
                    })
                }
                None => host(Delivery::AfterGap { event, lost }),
            },
        });
        self.stats.checkpoint_starts.extend(starts);
        end
    }

    fn follow_inner<E>(
        &mut self,
        client: &Client,
        start: StartAt,
        handler: &mut Handler<'_, E>,
    ) -> Result<FollowEnd, FollowError<E>> {
        self.pending_gap = None;
        let (mut after, mut expect) = match (start, self.cursor) {
            (StartAt::Cursor, Some(c)) => (Some(c), Expect::Next),
            (StartAt::Cursor | StartAt::Retained, None) => (None, Expect::Start),
            (StartAt::Retained, Some(_)) => (None, Expect::AnyAbove),
            (StartAt::After(a), c) => {
                let expect = match c {
                    Some(c) if a <= c => Expect::Next,
                    _ => {
                        let first_lost = self.cursor.map_or(0, |c| c + 1);
                        if a >= first_lost {
                            self.record_gap(SkippedRange {
                                first: first_lost,
                                last: a,
                            });
                        }
                        Expect::Exactly(a.saturating_add(1))
                    }
                };
                (Some(a), expect)
            }
        };
        let mut recoveries = 0;
        loop {
            self.stats.afters.push(after);
            let mut stream = client.open_stream(&self.task_id, after)?;
            match self.pump(&mut stream, &mut expect, handler)? {
                Pumped::End(end) => return Ok(end),
                Pumped::Gone(gone) => {
                    self.check_gone(&gone, after)?;
                    self.stats.gone.push(gone.clone());
                    recoveries += 1;
                    if self.options.gone_policy == GonePolicy::Fail
                        || recoveries > self.options.max_gone_recoveries
                    {
                        return Err(FollowError::EventsGone(gone));
                    }
                    let first_lost = self.cursor.map_or(0, |c| c + 1);
                    match self.options.gone_policy {
                        GonePolicy::ResumeFromEarliest => {
                            self.record_gap(SkippedRange {
                                first: first_lost,
                                last: gone.earliest_seq - 1,
                            });
                            after = Some(gone.earliest_seq - 1);
                            expect = Expect::Exactly(gone.earliest_seq);
                        }
                        GonePolicy::ReplayRetained | GonePolicy::Fail => {
                            after = None;
                            expect = Expect::AnyAbove;
                        }
                    }
                }
            }
        }
    }

    /// Records an accepted gap. A second `events_gone` before any progress widens the last
    /// gap instead of adding an overlapping one.
    fn record_gap(&mut self, gap: SkippedRange) {
        match self.stats.gaps.last_mut() {
            Some(last) if last.first == gap.first => last.last = last.last.max(gap.last),
            _ => self.stats.gaps.push(gap),
        }
        self.pending_gap = self.stats.gaps.last().copied();
    }

    /// `events_gone` must name this task and leave a real gap after the cursor that was sent.
    fn check_gone<E>(&self, gone: &EventsGone, after: Option<u64>) -> Result<(), FollowError<E>> {
        let bad = |detail: String| FollowError::Violation(Violation::BadEventsGone { detail });
        if gone.task_id != self.task_id {
            return Err(bad(format!(
                "names task {:?}, asked for {:?}",
                gone.task_id, self.task_id
            )));
        }
        match after {
            None => Err(bad(
                "answered a stream without `after`, which starts at the earliest retained event (RS-05)"
                    .into(),
            )),
            Some(a) if gone.earliest_seq <= a.saturating_add(1) => Err(bad(format!(
                "earliestSeq {} leaves no gap after {a}",
                gone.earliest_seq
            ))),
            Some(_) => Ok(()),
        }
    }

    fn pump<E>(
        &mut self,
        stream: &mut EventStream<'_>,
        expect: &mut Expect,
        handler: &mut Handler<'_, E>,
    ) -> Result<Pumped, FollowError<E>> {
        loop {
            let params = match stream.next(self.options.idle_timeout)? {
                StreamItem::Event(params) => params,
                StreamItem::End(result) => return Ok(Pumped::End(FollowEnd::Completed(result))),
                StreamItem::Error(error) => {
                    return match error.events_gone() {
                        Some(Ok(gone)) => Ok(Pumped::Gone(gone)),
                        Some(Err(v)) => Err(v.into()),
                        None => Err(FollowError::Client(ClientError::Rpc {
                            method: "tasks/stream".into(),
                            error,
                        })),
                    };
                }
            };
            let event = TaskEvent::parse(&params)?;
            if event.task_id != self.task_id {
                return Err(Violation::WrongTask {
                    seq: event.seq,
                    task_id: event.task_id,
                }
                .into());
            }
            if self.options.require_related_task {
                event.check_related_task()?;
                self.stats.related_task_checked += 1;
            }
            let hash = content_hash(&event);
            if self.cursor.is_some_and(|c| event.seq <= c) {
                // A duplicate (RS-10, RS-11). If we processed it recently, it must be the same.
                if let Some(&(_, h)) = self.recent.iter().find(|(s, _)| *s == event.seq) {
                    if h != hash {
                        return Err(Violation::BadEvent {
                            detail: format!(
                                "seq {} was delivered again with different content (EV-08)",
                                event.seq
                            ),
                        }
                        .into());
                    }
                }
                self.stats.duplicates += 1;
                continue;
            }
            let cursor_next = self.cursor.map_or(0, |c| c + 1);
            let expected = match *expect {
                Expect::Next => cursor_next,
                Expect::Exactly(n) => n,
                Expect::Start if event.seq > 0 => {
                    if self.options.gone_policy == GonePolicy::Fail {
                        return Err(FollowError::MissingHistory {
                            task_id: self.task_id.clone(),
                            first_seq: event.seq,
                        });
                    }
                    self.record_gap(SkippedRange {
                        first: 0,
                        last: event.seq - 1,
                    });
                    event.seq
                }
                Expect::Start => 0,
                Expect::AnyAbove => {
                    if event.seq > cursor_next {
                        self.record_gap(SkippedRange {
                            first: cursor_next,
                            last: event.seq - 1,
                        });
                    }
                    event.seq
                }
            };
            if event.seq > expected {
                return Err(FollowError::Gap {
                    task_id: self.task_id.clone(),
                    expected,
                    got: event.seq,
                });
            }
            if event.seq < expected {
                return Err(FollowError::OutOfOrder {
                    task_id: self.task_id.clone(),
                    expected,
                    got: event.seq,
                });
            }
            let flow = handler(&event, self.pending_gap).map_err(FollowError::Handler)?;
            self.pending_gap = None;
            // RS-08: only now, with the event fully processed, is the cursor persisted.
            self.store.save(&self.task_id, event.seq)?;
            self.cursor = Some(event.seq);
            *expect = Expect::Next;
            self.stats.processed += 1;
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((event.seq, hash));
            if flow == Flow::Stop {
                return Ok(Pumped::End(FollowEnd::Stopped));
            }
        }
    }
}

/// The handler the follow loop calls: the event, and the gap recorded just before it.
type Handler<'h, E> = dyn FnMut(&TaskEvent, Option<SkippedRange>) -> Result<Flow, E> + 'h;

enum Pumped {
    End(FollowEnd),
    Gone(EventsGone),
}

fn content_hash(event: &TaskEvent) -> u64 {
    let mut h = DefaultHasher::new();
    event.event_type.hash(&mut h);
    // serde_json's Map is ordered (BTreeMap without `preserve_order`), so equal payloads
    // serialise equally.
    serde_json::to_string(&event.payload)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}
