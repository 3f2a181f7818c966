//! The output side of an HTTP connection: the protocol engine writes JSON-RPC lines to an
//! [`io::Write`](std::io::Write) as on stdio; [`RouteWriter`] splits them into messages and
//! hands each to the HTTP response waiting for it — a response to the POST that carries its
//! request id, a progress notification to the POST whose `progressToken` it names, any other
//! notification to the session's `GET` stream (or nowhere, when none is open).
//!
//! Every queue is bounded: a POST's queue holds [`QUEUE`] messages, progress is dropped when
//! it is nearly full (the final answer always has room: one answer per request), and the
//! standalone stream drops what a client does not read. Nothing here blocks.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;

/// Messages one POST's queue holds.
pub(crate) const QUEUE: usize = 64;

/// Where a connection's output lines go.
#[derive(Default)]
pub(crate) struct LineRoutes {
    /// Request id (its JSON text) → the POST waiting for the answer.
    waiting: HashMap<String, mpsc::Sender<Vec<u8>>>,
    /// Progress token (its JSON text) → request id (its JSON text).
    progress: HashMap<String, String>,
    /// The session's `GET` stream.
    standalone: Option<mpsc::Sender<Vec<u8>>>,
}

/// A shared handle on a connection's [`LineRoutes`].
#[derive(Clone, Default)]
pub(crate) struct Router(Arc<Mutex<LineRoutes>>);

impl Router {
    fn lock(&self) -> MutexGuard<'_, LineRoutes> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Expects the answer to request `id` (JSON text) and, with a progress token, its
    /// progress; returns the queue they arrive on.
    pub(crate) fn expect(&self, id: &str, token: Option<&str>) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut r = self.lock();
        r.waiting.insert(id.to_owned(), tx);
        if let Some(t) = token {
            r.progress.insert(t.to_owned(), id.to_owned());
        }
        rx
    }

    /// Forgets request `id` (answered, or its POST went away).
    pub(crate) fn forget(&self, id: &str) {
        let mut r = self.lock();
        r.waiting.remove(id);
        r.progress.retain(|_, v| v != id);
    }

    /// Opens the standalone (`GET`) stream; `None` when one is open already.
    pub(crate) fn open_standalone(&self) -> Option<mpsc::Receiver<Vec<u8>>> {
        let mut r = self.lock();
        if r.standalone.as_ref().is_some_and(|s| !s.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        r.standalone = Some(tx);
        Some(rx)
    }

    /// A writer for the engine's output.
    pub(crate) fn writer(&self) -> RouteWriter {
        RouteWriter {
            router: self.clone(),
            buf: Vec::new(),
        }
    }

    fn route(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let mut r = self.lock();
        if msg.get("method").is_some() {
            let token = msg
                .get("params")
                .and_then(|p| p.get("progressToken"))
                .map(Value::to_string);
            let target = token
                .and_then(|t| r.progress.get(&t).cloned())
                .and_then(|id| r.waiting.get(&id).cloned());
            match target {
                // Keep room for the answer.
                Some(tx) if tx.capacity() > 1 => {
                    let _ = tx.try_send(line.to_vec());
                }
                Some(_) => {}
                None => {
                    if let Some(tx) = &r.standalone {
                        let _ = tx.try_send(line.to_vec());
                    }
                }
            }
            return;
        }
        let id = msg
            .get("id")
            .map_or_else(|| "null".to_owned(), Value::to_string);
        if let Some(tx) = r.waiting.remove(&id) {
            r.progress.retain(|_, v| *v != id);
            let _ = tx.try_send(line.to_vec());
        }
    }
}

/// The engine's output for one HTTP connection: whole lines are routed as they complete.
pub(crate) struct RouteWriter {
    router: Router,
    buf: Vec<u8>,
}

impl io::Write for RouteWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        while let Some(n) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=n).take(n).collect();
            self.router.route(&line);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn answers_and_progress_reach_their_post_and_the_rest_the_get_stream() {
        let router = Router::default();
        let mut one = router.expect("1", Some("\"p\""));
        let mut two = router.expect("\"x\"", None);
        let mut get = router.open_standalone().unwrap();
        assert!(router.open_standalone().is_none());
        let mut w = router.writer();
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",")
            .unwrap();
        w.write_all(
            b"\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n{\"id\":\"x\",\"result\":{}}\n",
        )
        .unwrap();
        w.write_all(b"{\"method\":\"notifications/tasks/status\",\"params\":{}}\n{\"id\":1,\"result\":{}}\n{\"id\":1,\"result\":{}}\n")
            .unwrap();
        assert!(one
            .try_recv()
            .unwrap()
            .starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\""));
        assert_eq!(one.try_recv().unwrap(), b"{\"id\":1,\"result\":{}}");
        // Answered once: the second answer with the same id has nowhere to go.
        assert!(one.try_recv().is_err());
        assert_eq!(two.try_recv().unwrap(), b"{\"id\":\"x\",\"result\":{}}");
        assert_eq!(
            get.try_recv().unwrap(),
            b"{\"method\":\"notifications/tasks/status\",\"params\":{}}"
        );
        assert!(get.try_recv().is_err());
    }
}
