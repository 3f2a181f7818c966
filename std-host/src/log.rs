//! Logging to stderr, the only place logs may go on a stdio server (MCP-DIGEST a.5).
//!
//! One line per record, prefixed `taskstream: <level>:`. The level comes from `TASKSTREAM_LOG`
//! (`error`, `warn`, `info` (default), `debug`, `off`). Payloads and tool arguments are never
//! logged at `info` or above: they may be sensitive (SE-08).

use std::fmt;
use std::io::Write as _;
use std::sync::OnceLock;

/// A log level, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed.
    Error,
    /// Something is off but the server goes on.
    Warn,
    /// Task lifecycle and server start and stop.
    Info,
    /// Per-request detail.
    Debug,
}

fn threshold() -> Option<Level> {
    static LEVEL: OnceLock<Option<Level>> = OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var("TASKSTREAM_LOG").ok().as_deref() {
        Some("off") => None,
        Some("error") => Some(Level::Error),
        Some("warn") => Some(Level::Warn),
        Some("debug") => Some(Level::Debug),
        _ => Some(Level::Info),
    })
}

/// Whether records at `level` are written.
pub fn enabled(level: Level) -> bool {
    threshold().is_some_and(|t| level <= t)
}

/// Writes one record at `level` if enabled. Errors writing stderr are ignored.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let tag = match level {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "info",
        Level::Debug => "debug",
    };
    let _ = writeln!(std::io::stderr().lock(), "taskstream: {tag}: {args}");
}

/// `log!(Info, "task {id} completed")`.
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::write($crate::log::Level::$level, format_args!($($arg)*))
    };
}
pub(crate) use log;
