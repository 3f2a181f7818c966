//! `tasks/stream`: validating a request, replaying and delivering events, closing, and
//! cancellation, each with the faults that bend it.

use std::io::Write;

use serde_json::{json, Value};

use super::{error, Answer, FaultyServer, OutgoingError, MAX_SEQ};
use crate::faulty::fault::Fault;
use crate::faulty::task::Status;

/// An active `tasks/stream` request.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) request_id: Value,
    pub(super) task_id: String,
    /// Events with a seq of at least this are still to be delivered.
    pub(super) next: u64,
    pub(super) delivered: usize,
    /// live-before-replay: nothing is sent until the next live event.
    pub(super) held: bool,
    /// answer-cancelled: cancelled, sends nothing, but is answered when the task ends.
    pub(super) zombie: bool,
    /// empty-no-result: opened on a terminal task with nothing retained, and never answered.
    pub(super) hang: bool,
    /// empty-left-open: opened on a terminal task with nothing retained; answered, but kept
    /// active.
    pub(super) linger: bool,
    /// drop-history-tail: events with a seq of at least this are never sent.
    pub(super) cut: Option<u64>,
    /// Delivered at least one event live.
    pub(super) saw_live: bool,
    pub(super) closed: bool,
}

impl<W: Write> FaultyServer<W> {
    pub(super) fn tasks_stream(&mut self, id: &Value, params: &Value) -> Answer {
        match self.open_stream(id, params) {
            Ok(Some(index)) => {
                self.pump(index, None);
                self.streams.retain(|s| !s.closed);
                Answer::Later
            }
            Ok(None) => Answer::Now(Ok(self.stream_result())),
            Err(e) => Answer::Now(Err(e)),
        }
    }

    /// Validates a `tasks/stream` and registers it. `Ok(None)` answers an empty result at once.
    fn open_stream(&mut self, id: &Value, params: &Value) -> Result<Option<usize>, OutgoingError> {
        let wanted = Self::task_id_param(params)?;
        let found = self.tasks.keys().find(|k| {
            k.as_str() == wanted
                || (self.has(Fault::StreamLooseMatch)
                    && (k.eq_ignore_ascii_case(wanted) || wanted.starts_with(k.as_str())))
        });
        let Some(task_id) = found.cloned() else {
            if self.has(Fault::StreamSkipsLookup) {
                return Ok(None);
            }
            return Err(self.unknown_task());
        };
        let after = match params.get("after") {
            None => None,
            Some(value) => match value.as_u64().filter(|a| *a <= MAX_SEQ) {
                Some(after) => Some(after),
                None if self.has(Fault::AcceptNegative)
                    && value.as_i64().is_some_and(|a| a < 0) =>
                {
                    None
                }
                None => return Err(error(-32602, "after must be an integer from 0 to 2^53 - 1")),
            },
        };
        let Some(task) = self.tasks.get(&task_id) else {
            return Err(self.unknown_task());
        };
        if let Some(after) = after {
            let beyond = task.last_seq.is_none_or(|last| after > last);
            if beyond && !self.has(Fault::AcceptBeyondLast) {
                return Err(error(-32602, "after is beyond the last assigned seq"));
            }
        }
        let active = |s: &&Stream| !s.closed && !s.zombie;
        if !self.has(Fault::SecondStream)
            && self
                .streams
                .iter()
                .filter(active)
                .any(|s| s.task_id == task_id)
        {
            let code = if self.has(Fault::SecondStreamCode) {
                -32600
            } else {
                -32602
            };
            let mut e = error(
                code,
                "The task already has an active stream on this connection",
            );
            e.data = Some(json!({"reason": "stream_active"}));
            return Err(e);
        }
        let earliest = task.earliest();
        if let Some(after) = after {
            let limit = if self.has(Fault::GoneOffByOne) {
                earliest.saturating_sub(1)
            } else {
                earliest
            };
            let gap = task.from_checkpoint && self.has(Fault::CheckpointGap);
            if task.dropped && after + 1 < limit && !self.has(Fault::NoEventsGone) && !gap {
                let reported = if self.has(Fault::GoneWrongEarliest) {
                    earliest.saturating_sub(1)
                } else {
                    earliest
                };
                let code = if self.has(Fault::GoneOtherCode) {
                    -32602
                } else {
                    -32010
                };
                let mut e = error(code, "Task events are no longer available");
                e.data = Some(
                    json!({"reason": "events_gone", "taskId": task_id, "earliestSeq": reported}),
                );
                return Err(e);
            }
        }
        let running = !task.status.is_terminal();
        // gone-on-resume: the first resume of a task finds the events up to after + 1 dropped.
        if let Some(after) = after {
            let resumable = task.last_seq.is_some_and(|last| after < last);
            if self.has(Fault::GoneOnResume) && resumable && self.resumed.insert(task_id.clone()) {
                let gone = after + 2;
                if let Some(task) = self.tasks.get_mut(&task_id) {
                    task.drop_below(gone);
                }
                let mut e = error(-32010, "Task events are no longer available");
                e.data =
                    Some(json!({"reason": "events_gone", "taskId": task_id, "earliestSeq": gone}));
                return Err(e);
            }
        }
        let Some(task) = self.tasks.get(&task_id) else {
            return Err(self.unknown_task());
        };
        let next = match after {
            None if running && self.has(Fault::NoAfterLiveOnly) => task.next_seq,
            None => earliest,
            Some(after) if self.has(Fault::ReplayIncludesCursor) => after,
            Some(after) if self.has(Fault::DuplicateOnResume) => after.saturating_sub(1),
            Some(after)
                if self.has(Fault::AfterLastNotImmediate)
                    && !running
                    && Some(after) == task.last_seq =>
            {
                after
            }
            Some(after) => after + 1,
        };
        // The limit binds only a stream with something to send: one answered at once (RS-04,
        // RS-06) needs no slot.
        let answered_at_once = !running && task.first_from(next).is_none();
        if !answered_at_once
            && !self.has(Fault::NoStreamLimit)
            && self.streams.iter().filter(active).count() >= self.opts.max_streams
        {
            let mut e = error(-32602, "Too many active streams");
            e.data = Some(json!({"reason": "stream_limit"}));
            return Err(e);
        }
        let held = running && self.has(Fault::LiveBeforeReplay) && task.first_from(next).is_some();
        let empty = after.is_none() && !running && task.log.is_empty();
        let hang = empty && self.has(Fault::EmptyNoResult);
        let linger = empty && self.has(Fault::EmptyLeftOpen);
        let cut =
            (self.has(Fault::DropHistoryTail) && !running && self.followed.contains(&task_id))
                .then(|| task.last_seq.map(|last| last.saturating_sub(1)))
                .flatten();
        self.streams.push(Stream {
            request_id: id.clone(),
            task_id,
            next,
            delivered: 0,
            held,
            zombie: false,
            hang,
            linger,
            cut,
            saw_live: false,
            closed: false,
        });
        Ok(Some(self.streams.len() - 1))
    }

    fn stream_result(&self) -> Value {
        if self.legacy || self.has(Fault::NoResultType) {
            json!({})
        } else {
            json!({"resultType": "complete"})
        }
    }

    /// Sends stream `index` what it may send now; `live` is the seq just appended, if any.
    /// Closes the stream once its task is terminal and everything is delivered.
    pub(super) fn pump(&mut self, index: usize, live: Option<u64>) {
        let Some(stream) = self.streams.get(index) else {
            return;
        };
        if stream.closed {
            return;
        }
        let Some(task) = self.tasks.get(&stream.task_id) else {
            return;
        };
        let terminal = task.status.is_terminal();
        if stream.zombie {
            if terminal {
                let request_id = stream.request_id.clone();
                let result = self.stream_result();
                self.respond(&request_id, Ok(result));
                if let Some(stream) = self.streams.get_mut(index) {
                    stream.closed = true;
                }
            }
            return;
        }
        let mut next = stream.next;
        let mut held = stream.held;
        let mut out: Vec<(u64, bool)> = Vec::new();
        if held {
            let Some(live) = live else {
                return;
            };
            // The live event first, then the replay it should have followed.
            out.push((live, true));
            out.extend(
                task.log
                    .iter()
                    .filter(|r| r.seq >= next && r.seq < live)
                    .map(|r| (r.seq, false)),
            );
            next = live + 1;
            held = false;
        }
        let cut = stream.cut.unwrap_or(u64::MAX);
        // close-early: at most 3 events per stream while the task runs, then the result.
        let early_limit = (self.has(Fault::CloseEarly) && !terminal).then_some(3usize);
        while let Some(record) = task.first_from(next).filter(|r| r.seq < cut) {
            let seq = record.seq;
            if self.has(Fault::DropLiveEvent) && seq == 3 && live == Some(3) {
                next = seq + 1;
                continue;
            }
            if self.has(Fault::Reorder) && seq == 2 {
                if task.get(3).is_some() {
                    out.push((3, live == Some(3)));
                    out.push((2, live == Some(2)));
                    next = 4;
                    continue;
                }
                if !terminal {
                    break;
                }
            }
            if early_limit.is_some_and(|limit| stream.delivered + out.len() >= limit) {
                break;
            }
            out.push((seq, live == Some(seq)));
            next = seq + 1;
        }
        let notes: Vec<Value> = out
            .iter()
            .filter_map(|(seq, is_live)| {
                task.get(*seq)
                    .map(|r| self.notification_for(&task.id, r, *is_live))
            })
            .collect();
        let delivered = stream.delivered + notes.len();
        let saw_live = stream.saw_live || out.iter().any(|(_, is_live)| *is_live);
        let finished = terminal && task.first_from(next).is_none_or(|r| r.seq >= cut)
            || early_limit.is_some_and(|limit| delivered >= limit);
        let close = finished && !stream.hang && !(self.has(Fault::NeverClose) && delivered > 0);
        // empty-left-open: the result goes out, but the stream stays active and never answers again.
        let linger = close && stream.linger;
        let request_id = stream.request_id.clone();
        let task_id = stream.task_id.clone();
        for note in &notes {
            self.write(note);
        }
        if close {
            let result = self.stream_result();
            self.respond(&request_id, Ok(result));
            if saw_live {
                self.followed.insert(task_id);
            }
        }
        if let Some(stream) = self.streams.get_mut(index) {
            stream.saw_live = saw_live;
            stream.next = next;
            stream.held = held;
            stream.delivered = delivered;
            stream.closed = close && !linger;
            if linger {
                stream.linger = false;
                stream.hang = true;
            }
        }
    }

    pub(super) fn cancel_stream(&mut self, request_id: &Value) {
        let Some(index) = self
            .streams
            .iter()
            .position(|s| &s.request_id == request_id && !s.closed && !s.zombie)
        else {
            return;
        };
        if self.has(Fault::IgnoreCancel) {
            return;
        }
        let task_id = self.streams.get(index).map(|s| s.task_id.clone());
        if let Some(stream) = self.streams.get_mut(index) {
            if self.opts.faults.has(Fault::AnswerCancelled) {
                stream.zombie = true;
                return;
            }
            stream.closed = true;
        }
        self.streams.retain(|s| !s.closed);
        if self.has(Fault::CancelKillsTask) {
            if let Some(task_id) = task_id {
                if self
                    .tasks
                    .get(&task_id)
                    .is_some_and(|t| !t.status.is_terminal())
                {
                    self.finish(&task_id, Status::Cancelled);
                }
            }
        }
    }
}
