//! The store's log lines: `tracing` events with the target `taskstream`, like the server's, so
//! one filter (`TASKSTREAM_LOG`) and one subscriber take both. The store never logs a payload.

/// `log!(Warn, "retention: {e}")`: a `tracing` event at that level, target `taskstream`.
macro_rules! log {
    (Error, $($arg:tt)*) => { ::tracing::error!(target: "taskstream", $($arg)*) };
    (Warn, $($arg:tt)*) => { ::tracing::warn!(target: "taskstream", $($arg)*) };
    (Info, $($arg:tt)*) => { ::tracing::info!(target: "taskstream", $($arg)*) };
}
pub(crate) use log;
