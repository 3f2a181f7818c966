//! Input a running task asks of its client ([`TaskContext::ask`](crate::tool::TaskContext::ask)).
//!
//! How a request reaches a client depends on the era of the call:
//! - a SEP-2663 (2026-07-28) task becomes `input_required`: the request waits here, keyed,
//!   `tasks/get` shows it under `inputRequests` (`{key: {method, params}}`), and the client
//!   answers it with `tasks/update {taskId, inputResponses: {key: result}}`, from any
//!   connection of the task's principal and at any later time; the task is `working` again
//!   once answered. Each change is also a `dev.taskstream.task.status` event, so the stream
//!   and `tasks/get` agree. The modern era has no other way to ask, so this holds whether or
//!   not a client is connected.
//! - a SEP-1686 (2025-11-25) task, or a plain call, sends the request to a 2025-11-25 session on
//!   stdio (the call's own connection for a plain call; any of the task's principal for a
//!   task) and waits for its answer; with none connected the request is refused, saying so.
//!   That era's `input_required` carries the request on `tasks/result`, which this server
//!   does not do.
//!
//! **Architecture Invariant:** the waiting requests belong to the process running the task
//! (they are not in the store): a task in `input_required` at a restart ends `failed` like any
//! running task, and with several replicas `tasks/update` must reach the task's own replica.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Map, Value};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What ends a wait for input: the client's answer, or `None` for a cancellation.
pub(crate) type Answer = Option<Value>;

/// One request waiting for its answer.
struct Waiting {
    method: String,
    params: Value,
    tx: SyncSender<Answer>,
}

/// The requests every task of the process waits on, by task key, then by input key.
#[derive(Default)]
pub(crate) struct Inputs {
    waiting: Mutex<HashMap<u128, BTreeMap<String, Waiting>>>,
    next: AtomicU64,
}

impl Inputs {
    /// Records a request of task `key`; its input key (unique in the process).
    pub(crate) fn add(
        &self,
        key: u128,
        method: &str,
        params: Value,
        tx: SyncSender<Answer>,
    ) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let input = format!("input-{n}");
        lock(&self.waiting).entry(key).or_default().insert(
            input.clone(),
            Waiting {
                method: method.to_owned(),
                params,
                tx,
            },
        );
        input
    }

    /// Forgets a request (answered, timed out or cancelled).
    pub(crate) fn remove(&self, key: u128, input: &str) {
        let mut waiting = lock(&self.waiting);
        if let Some(task) = waiting.get_mut(&key) {
            task.remove(input);
            if task.is_empty() {
                waiting.remove(&key);
            }
        }
    }

    /// Task `key`'s waiting requests as `inputRequests` shows them, if it has any.
    pub(crate) fn requests(&self, key: u128) -> Option<Map<String, Value>> {
        let waiting = lock(&self.waiting);
        let task = waiting.get(&key).filter(|t| !t.is_empty())?;
        Some(
            task.iter()
                .map(|(k, w)| (k.clone(), json!({"method": w.method, "params": w.params})))
                .collect(),
        )
    }

    /// Hands each response to the request of task `key` it answers (keys of no waiting
    /// request are ignored, as SEP-2663 says); how many it answered.
    pub(crate) fn answer(&self, key: u128, responses: &Map<String, Value>) -> usize {
        let mut waiting = lock(&self.waiting);
        let Some(task) = waiting.get_mut(&key) else {
            return 0;
        };
        let mut answered = 0;
        for (input, response) in responses {
            if let Some(w) = task.remove(input) {
                // The waiter may have timed out meanwhile; then nobody reads this.
                let _ = w.tx.try_send(Some(response.clone()));
                answered += 1;
            }
        }
        if task.is_empty() {
            waiting.remove(&key);
        }
        answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_reaches_its_request_once_and_unknown_keys_are_ignored() {
        let inputs = Inputs::default();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let key = inputs.add(7, "elicitation/create", json!({"message": "ok?"}), tx);
        let shown = inputs.requests(7).expect("waiting");
        assert_eq!(shown[&key]["method"], "elicitation/create");
        assert_eq!(shown[&key]["params"]["message"], "ok?");
        assert!(inputs.requests(8).is_none());
        let mut responses = Map::new();
        responses.insert("input-999".into(), json!({"action": "decline"}));
        assert_eq!(inputs.answer(7, &responses), 0);
        assert!(rx.try_recv().is_err());
        responses.insert(key.clone(), json!({"action": "accept"}));
        assert_eq!(inputs.answer(7, &responses), 1);
        assert_eq!(
            rx.try_recv().ok().flatten(),
            Some(json!({"action": "accept"}))
        );
        assert!(inputs.requests(7).is_none(), "answered requests are gone");
        assert_eq!(
            inputs.answer(7, &responses),
            0,
            "a second answer finds nothing"
        );
    }
}
