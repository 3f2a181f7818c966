//! Server-sent events: the frames, and the producer of a `tasks/stream` response.
//!
//! A [`StreamBody`] is pulled by hyper as the client reads: it pumps its [`Detached`] stream on
//! a blocking thread (store reads may touch sled), yields the frames, and, when there is
//! nothing to send, waits on its task's wake-up without holding any thread; a quiet stream
//! sends a keep-alive comment every [`KEEP_ALIVE`]. A client that stops reading stops the
//! pulling (hyper's back-pressure): its stream costs a cursor and a buffer, and the task runs
//! on. A client that closes the response drops the producer, whose [`StreamHold`] releases the
//! stream from its connection (the task is untouched, TS-08).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use futures_util::Stream;
use tokio::sync::Notify;

use crate::engine::ConnectionState;
use crate::engine::{Detached, DetachedStart, Frame};
use crate::process::Process;
use crate::wire::ServerError;
use crate::wire::STORAGE_FAILED;

/// A quiet stream sends a comment this often (proxies and clients keep it open).
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Frames pumped by a stream's first blocking call: few, so the first event goes out soon.
const FIRST_BATCH: usize = 32;
/// Frames pumped per blocking call after the first: a replay moves in large steps (each call
/// is a hand-off to a blocking thread and back), written as one chunk of the body.
const BATCH: usize = 512;
/// What a 2025-11-25 client should wait before reconnecting, in ms (the `retry` field).
pub(crate) const RETRY_MS: u64 = 1000;

/// One SSE event carrying a JSON-RPC message, with an optional `id:`.
pub(crate) fn event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 32);
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    push_message(&mut out, data);
    Bytes::from(out)
}

/// Appends an SSE event carrying `data` (its `id:` line, if any, already written).
fn push_message(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

/// Appends the SSE events of one pump's frames to `out`, each event's `id:` (`<label>-<seq>`)
/// when the stream is labelled; whether the last frame ended the stream.
fn push_frames(out: &mut Vec<u8>, frames: Vec<Frame>, label: Option<u64>) -> bool {
    use std::io::Write as _;
    out.reserve(
        frames
            .iter()
            .map(|f| match f {
                Frame::Event { line, .. } | Frame::End(line) => line.len() + 64,
            })
            .sum(),
    );
    for f in frames {
        match f {
            Frame::Event { seq, line } => {
                if let Some(n) = label {
                    // Writing into a Vec cannot fail.
                    let _ = writeln!(out, "id: {n}-{}", seq.get());
                }
                push_message(out, &line);
            }
            Frame::End(line) => {
                push_message(out, &line);
                return true;
            }
        }
    }
    false
}

/// The priming event of a resumable stream: an id to resume from and the reconnect delay,
/// no data (SEP-1699 as 2025-11-25 has it).
pub(crate) fn priming(id: &str) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {RETRY_MS}\ndata: \n\n"))
}

/// A keep-alive comment.
pub(crate) fn comment() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// Active streams per principal over HTTP (both eras), at most `--max-principal-streams` each.
pub(crate) type StreamCounts = Arc<Mutex<HashMap<String, usize>>>;

/// One stream's place in its principal's count: taken before the stream is opened, given back
/// when dropped, however the request ends (answered, refused, the client gone mid-request, the
/// server stopping).
pub(crate) struct Slot {
    counts: StreamCounts,
    principal: String,
}

impl Slot {
    /// Takes a place for `principal` if it has fewer than `max` streams.
    pub(crate) fn take(counts: &StreamCounts, principal: &str, max: usize) -> Option<Slot> {
        let mut c = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = c.entry(principal.to_owned()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            counts: Arc::clone(counts),
            principal: principal.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = c.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.remove(&self.principal);
            }
        }
    }
}

/// What a stream holds, given back when the hold is dropped: its principal's [`Slot`] and,
/// once [`armed`](StreamHold::arm), the stream in its connection's table.
///
/// A hold is made *before* the stream is opened and moves into the blocking call that opens
/// it, which arms it only when the stream was admitted. Whatever becomes of the request, the
/// hold is dropped exactly once: by the response's producer, by the handler on a refusal, or,
/// when the client went away while the stream was being opened, by the runtime with the
/// blocking call's unclaimed result. No path leaves a stream held with nobody to release it.
pub(crate) struct StreamHold {
    pub(crate) shared: Arc<ConnectionState>,
    pub(crate) id: taskstream_core::RequestId,
    /// Set when a resume superseded this stream: its connection hold went to the new one.
    pub(crate) superseded: Arc<AtomicBool>,
    /// The principal's count of streams, given back with the hold.
    slot: Option<Slot>,
    /// Whether the connection holds the stream (a session: `notifications/cancelled` can end
    /// it); a modern request's stream is its own connection.
    pub(crate) held: bool,
    /// Whether there is nothing (left) to give back to the connection: not yet armed, or
    /// released already (when the response was queued).
    released: bool,
}

impl StreamHold {
    /// A hold on `slot` only, for the stream of request `id` that is about to be opened.
    pub(crate) fn unarmed(
        shared: Arc<ConnectionState>,
        id: taskstream_core::RequestId,
        superseded: Arc<AtomicBool>,
        slot: Slot,
        held: bool,
    ) -> StreamHold {
        StreamHold {
            shared,
            id,
            superseded,
            slot: Some(slot),
            held,
            released: true,
        }
    }

    /// Opens the stream on the calling (blocking) thread, arming the hold if it was admitted.
    pub(crate) fn open(
        mut self,
        era: crate::wire::era::Era,
        raw: &[u8],
    ) -> (StreamHold, Result<DetachedStart, ServerError>) {
        let opened = self.shared.open_detached(&self.id, era, raw, self.held);
        if matches!(opened, Ok(DetachedStart::Streaming(_))) {
            self.released = false;
        }
        (self, opened)
    }

    /// Whether the stream must stop: cancelled (TS-08, DX-04: no frame after the
    /// cancellation is read), or taken over by a resume.
    fn is_over(&self) -> bool {
        self.superseded.load(Ordering::Acquire)
            || (self.held && !self.released && !self.shared.holds_detached(&self.id))
    }

    /// Gives the hold back now: the stream's response is queued, and a client that reopens
    /// on reading it must be admitted (as on stdio).
    fn release(&mut self) {
        if !self.released && !self.superseded.load(Ordering::Acquire) {
            self.shared.release_detached(&self.id);
        }
        self.released = true;
        self.slot = None;
    }
}

impl Drop for StreamHold {
    fn drop(&mut self) {
        self.release();
    }
}

struct Producer {
    detached: Option<Box<Detached>>,
    queue: VecDeque<Bytes>,
    process: Arc<Process>,
    waker: Arc<Notify>,
    /// The legacy stream number for `id:`s (`None` in the modern era: no resumability).
    label: Option<u64>,
    hold: StreamHold,
    /// Whether the stream has pumped once (later pumps take [`BATCH`] frames).
    pumped: bool,
}

/// The body of a `tasks/stream` response: `first` (a priming event, if any), the events, the
/// response, the end.
pub(crate) fn stream_body(
    process: Arc<Process>,
    detached: Box<Detached>,
    label: Option<u64>,
    first: Option<Bytes>,
    hold: StreamHold,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let waker = process.waker(detached.key);
    let producer = Producer {
        detached: Some(detached),
        queue: first.into_iter().collect(),
        process,
        waker,
        label,
        hold,
        pumped: false,
    };
    futures_util::stream::unfold(producer, next)
}

async fn next(mut p: Producer) -> Option<(Result<Bytes, Infallible>, Producer)> {
    loop {
        if p.hold.is_over() {
            return None;
        }
        if let Some(b) = p.queue.pop_front() {
            return Some((Ok(b), p));
        }
        let detached = p.detached.take()?;
        if p.process.store.has_failed() {
            // Fail-stop: the stream ends with an error saying so, never silently.
            let e = ServerError::Internal(STORAGE_FAILED.into());
            p.queue.push_back(event(None, &e.line(Some(&detached.id))));
            p.hold.release();
            continue;
        }
        if p.process.is_shutting_down() {
            return None;
        }
        let waker = Arc::clone(&p.waker);
        let woken = waker.notified();
        tokio::pin!(woken);
        // Registered before the pump looks, so an append after its look still wakes us.
        woken.as_mut().enable();
        let store = Arc::clone(&p.process.store);
        let max = if p.pumped { BATCH } else { FIRST_BATCH };
        p.pumped = true;
        let pumped = tokio::task::spawn_blocking(move || {
            let mut d = detached;
            let frames = d.poll(&*store, max);
            (d, frames)
        })
        .await;
        let Ok((detached, frames)) = pumped else {
            return None;
        };
        if frames.is_empty() {
            p.detached = Some(detached);
            if tokio::time::timeout(KEEP_ALIVE, woken).await.is_err() {
                p.queue.push_back(comment());
            }
            continue;
        }
        // One chunk of the body for the whole pump: one allocation and one write, however
        // many events it carries. (A cancellation read meanwhile still stops it: `is_over`
        // is looked at before the chunk is yielded.)
        let mut chunk = Vec::new();
        if push_frames(&mut chunk, frames, p.label) {
            p.hold.release();
        } else {
            p.detached = Some(detached);
        }
        p.queue.push_back(Bytes::from(chunk));
    }
}

/// The body of a standalone (`GET`) stream: a priming comment, then each message, with
/// keep-alives.
pub(crate) fn standalone_body(
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    process: Arc<Process>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let first = Some(Bytes::from(format!("retry: {RETRY_MS}\n\n")));
    futures_util::stream::unfold(
        (rx, process, first),
        |(mut rx, process, first)| async move {
            if let Some(b) = first {
                return Some((Ok(b), (rx, process, None)));
            }
            if process.is_shutting_down() {
                return None;
            }
            match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
                Ok(Some(line)) => Some((Ok(event(None, &line)), (rx, process, None))),
                Ok(None) => None,
                Err(_) => Some((Ok(comment()), (rx, process, None))),
            }
        },
    )
}

/// The body of a POST answered as a stream: progress messages as they come, then the answer.
pub(crate) fn answer_body(
    first: Vec<u8>,
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    guard: super::AnswerGuard,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let state = (Some(first), rx, guard, false);
    futures_util::stream::unfold(state, |(first, mut rx, guard, done)| async move {
        if done {
            return None;
        }
        let line = match first {
            Some(l) => l,
            None => match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
                Ok(Some(l)) => l,
                Ok(None) => return None,
                Err(_) => return Some((Ok(comment()), (None, rx, guard, false))),
            },
        };
        let is_answer = super::is_response(&line);
        if is_answer {
            guard.answered();
        }
        Some((Ok(event(None, &line)), (None, rx, guard, is_answer)))
    })
}
