//! The work behind the server's tools: `emit` ([`emit`]) and `run_trace` ([`trace`]).
//!
//! A workload only produces events into a [`Sink`] and waits on it; it knows nothing of
//! JSON-RPC, tasks, the store or threads. The server gives a task's workload a sink that
//! appends to the store, and a plain call's workload one that reports progress; cancellation
//! reaches the workload as [`Stop::Cancelled`] from the sink.

pub(crate) mod emit;
pub(crate) mod trace;

use std::time::Instant;

use serde_json::Value;

/// Where a workload's events go.
pub(crate) trait Sink {
    /// Records one event.
    ///
    /// # Errors
    /// [`Stop`] when the workload must stop now.
    fn emit(&mut self, event_type: &str, payload: &[u8]) -> Result<(), Stop>;

    /// Waits until `deadline` (or returns at once if it has passed).
    ///
    /// # Errors
    /// [`Stop::Cancelled`] if the work was cancelled meanwhile.
    fn wait_until(&mut self, deadline: Instant) -> Result<(), Stop>;
}

/// Why a workload stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The task or request was cancelled (or already finished elsewhere): report nothing.
    Cancelled,
    /// An event could not be recorded: the work fails with this message.
    Refused(String),
}

/// How a workload ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Done; the `CallToolResult`.
    Completed(Value),
    /// Failed; a human-readable message and the `CallToolResult` (with `isError: true`).
    Failed {
        /// Why.
        message: String,
        /// The tool result describing the failure.
        result: Value,
    },
}

impl Outcome {
    /// A failure whose tool result is a single text block saying `message`.
    pub(crate) fn failed(message: String) -> Outcome {
        let result = text_result(&message, true);
        Outcome::Failed { message, result }
    }
}

/// A `CallToolResult` with one text content block.
pub(crate) fn text_result(text: &str, is_error: bool) -> Value {
    serde_json::json!({
        "content": [{ "type": "text", "text": text }],
        "isError": is_error,
    })
}

/// A validated tool call, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Workload {
    /// `emit`.
    Emit(emit::Emit),
    /// `run_trace`.
    Trace(trace::Replay),
}

impl Workload {
    /// How many events the workload emits if it runs to the end (for progress `total`).
    pub(crate) fn total_events(&self) -> u64 {
        match self {
            Workload::Emit(e) => e.count,
            Workload::Trace(t) => t.total_events(),
        }
    }

    /// Runs the workload to its end.
    ///
    /// # Errors
    /// [`Stop`] as the sink reported it.
    pub(crate) fn run(&self, sink: &mut dyn Sink) -> Result<Outcome, Stop> {
        match self {
            Workload::Emit(e) => e.run(sink),
            Workload::Trace(t) => t.run(sink),
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A sink that records events and never waits, for unit tests.

    use super::*;

    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) events: Vec<(String, String)>,
        pub(crate) waits: usize,
        pub(crate) cancel_after: Option<usize>,
    }

    impl Sink for Recorder {
        fn emit(&mut self, event_type: &str, payload: &[u8]) -> Result<(), Stop> {
            if self.cancel_after == Some(self.events.len()) {
                return Err(Stop::Cancelled);
            }
            self.events.push((
                event_type.to_owned(),
                String::from_utf8_lossy(payload).into_owned(),
            ));
            Ok(())
        }

        fn wait_until(&mut self, _deadline: Instant) -> Result<(), Stop> {
            self.waits += 1;
            Ok(())
        }
    }
}
