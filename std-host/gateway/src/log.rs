//! The gateway's log lines: `tracing` events of the server's target, `taskstream`.

/// `log!(Info, "…")`: one [`tracing`] event with the server's target (`taskstream`), so that
/// the gateway's lines go wherever the server's go, in the same form.
macro_rules! log {
    (Error, $($arg:tt)*) => { tracing::error!(target: "taskstream", "{}", format_args!($($arg)*)) };
    (Warn, $($arg:tt)*) => { tracing::warn!(target: "taskstream", "{}", format_args!($($arg)*)) };
    (Info, $($arg:tt)*) => { tracing::info!(target: "taskstream", "{}", format_args!($($arg)*)) };
    (Debug, $($arg:tt)*) => { tracing::debug!(target: "taskstream", "{}", format_args!($($arg)*)) };
}
pub(crate) use log;
