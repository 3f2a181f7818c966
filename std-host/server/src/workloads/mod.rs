//! The server's own tools, `emit` ([`emit`]) and `run_trace` ([`trace`]), written on the public
//! tool API ([`crate::tool`]) like any other server's: the binary is its first user.

pub(crate) mod emit;
pub mod trace;

use serde_json::{json, Map, Value};

use crate::tool::Tool;

/// `emit` and `run_trace`, with schemas shaped by `--max-payload-bytes`.
pub(crate) fn builtin(max_payload_bytes: u64) -> Vec<Tool> {
    vec![emit::tool(max_payload_bytes), trace::tool()]
}

/// The integer argument `key`, if given.
fn int(args: &Map<String, Value>, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

/// An object schema with `properties` and `required`, closed to other arguments.
fn schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! A sink that records events and never waits, for unit tests.

    use std::time::Instant;

    use crate::tool::{AskError, Sink, ToolError};

    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) events: Vec<(String, String)>,
        pub(crate) waits: std::cell::Cell<usize>,
        pub(crate) cancel_after: Option<usize>,
    }

    impl Sink for Recorder {
        fn emit(
            &mut self,
            expected: Option<u64>,
            event_type: &str,
            payload: &[u8],
        ) -> Result<u64, ToolError> {
            if self.cancel_after == Some(self.events.len()) {
                return Err(ToolError::Cancelled);
            }
            let next = self.events.len() as u64;
            if let Some(e) = expected.filter(|e| *e != next) {
                return Err(ToolError::SeqMismatch { expected: e, next });
            }
            self.events.push((
                event_type.to_owned(),
                String::from_utf8_lossy(payload).into_owned(),
            ));
            Ok(next)
        }

        fn progress(&mut self, _: f64, _: Option<f64>, _: Option<&str>) -> Result<(), ToolError> {
            Ok(())
        }

        fn is_cancelled(&self) -> bool {
            false
        }

        fn wait_cancelled(&self, _deadline: Instant) -> bool {
            self.waits.set(self.waits.get() + 1);
            false
        }

        fn task_id(&self) -> Option<&str> {
            None
        }

        fn on_cancel(&mut self, _callback: Box<dyn FnOnce() + Send>) {}

        fn ask(
            &mut self,
            method: &str,
            _params: serde_json::Value,
            _deadline: Instant,
        ) -> Result<serde_json::Value, AskError> {
            Err(AskError::Unanswered(format!("no client to ask {method}")))
        }
    }
}
