//! Logging through [`tracing`], to stderr: the only place logs may go on a stdio server
//! (MCP-DIGEST a.5).
//!
//! The library emits `tracing` events (target `taskstream`); a program that embeds it
//! collects them with its own subscriber. The `taskstream` binary (and
//! [`ServerBuilder::main`](crate::ServerBuilder::main)) installs one with [`init`]: one line
//! per event on stderr, as text or, with `--log-format json` (or `TASKSTREAM_LOG_FORMAT=json`),
//! as one JSON object per line for hosted log pipelines. The level comes from
//! `TASKSTREAM_LOG` (`error`, `warn`, `info` (default), `debug`, `trace`, `off`). Payloads and
//! tool arguments are never logged at `info` or above: they may be sensitive (SE-08).

use std::ffi::OsString;
use std::fmt;

use tracing_subscriber::filter::LevelFilter;

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

/// How [`init`] writes each event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    /// One human-readable line.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields.message`).
    Json,
}

impl LogFormat {
    /// `text` or `json`.
    ///
    /// # Errors
    /// A message naming the allowed values.
    pub fn parse(value: &str) -> Result<LogFormat, String> {
        match value {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "--log-format takes text or json, not {:?}",
                other.chars().take(32).collect::<String>()
            )),
        }
    }
}

/// The level `TASKSTREAM_LOG` asks for.
fn threshold() -> LevelFilter {
    match std::env::var("TASKSTREAM_LOG").ok().as_deref() {
        Some("off") => LevelFilter::OFF,
        Some("error") => LevelFilter::ERROR,
        Some("warn") => LevelFilter::WARN,
        Some("debug") => LevelFilter::DEBUG,
        Some("trace") => LevelFilter::TRACE,
        _ => LevelFilter::INFO,
    }
}

/// Installs the stderr subscriber in `format` at `TASKSTREAM_LOG`'s level, unless the
/// program already has one (then this does nothing).
pub fn init(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(threshold())
        .with_ansi(false);
    // An error means a subscriber is already installed: the embedder's choice stands.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Takes `--log-format FORMAT` (or `--log-format=FORMAT`) out of `args`, before any `--`;
/// without it, `TASKSTREAM_LOG_FORMAT`, else text.
///
/// # Errors
/// A message for a missing or unknown format.
pub fn take_format(args: &mut Vec<OsString>) -> Result<LogFormat, String> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    for i in 0..end {
        let text = args[i].to_string_lossy().into_owned();
        if text == "--log-format" {
            let value = args[..end]
                .get(i + 1)
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or("--log-format needs a value: text or json")?;
            args.drain(i..i + 2);
            return LogFormat::parse(&value);
        }
        if let Some(value) = text.strip_prefix("--log-format=") {
            let format = LogFormat::parse(value);
            args.remove(i);
            return format;
        }
    }
    match std::env::var("TASKSTREAM_LOG_FORMAT").ok().as_deref() {
        None | Some("") => Ok(LogFormat::Text),
        Some(v) => LogFormat::parse(v).map_err(|e| format!("TASKSTREAM_LOG_FORMAT: {e}")),
    }
}

/// Whether events at `level` are collected by the current subscriber.
#[must_use]
pub fn enabled(level: Level) -> bool {
    match level {
        Level::Error => tracing::enabled!(target: "taskstream", tracing::Level::ERROR),
        Level::Warn => tracing::enabled!(target: "taskstream", tracing::Level::WARN),
        Level::Info => tracing::enabled!(target: "taskstream", tracing::Level::INFO),
        Level::Debug => tracing::enabled!(target: "taskstream", tracing::Level::DEBUG),
    }
}

/// Emits one event at `level` (target `taskstream`).
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    match level {
        Level::Error => tracing::error!(target: "taskstream", "{args}"),
        Level::Warn => tracing::warn!(target: "taskstream", "{args}"),
        Level::Info => tracing::info!(target: "taskstream", "{args}"),
        Level::Debug => tracing::debug!(target: "taskstream", "{args}"),
    }
}

/// `log!(Info, "task {id} completed")`.
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::write($crate::log::Level::$level, format_args!($($arg)*))
    };
}
pub(crate) use log;

#[cfg(test)]
mod tests {
    use super::*;

    fn words(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_log_format_is_taken_out_before_the_command_separator_only() {
        let mut a = words(&["--in-memory", "--log-format", "json", "--", "x"]);
        assert_eq!(take_format(&mut a), Ok(LogFormat::Json));
        assert_eq!(a, words(&["--in-memory", "--", "x"]));
        let mut a = words(&["--log-format=text"]);
        assert_eq!(take_format(&mut a), Ok(LogFormat::Text));
        assert!(a.is_empty());
        // After `--` it is CMD's argument, not ours.
        let mut a = words(&["--", "cmd", "--log-format", "json"]);
        let before = a.clone();
        assert!(take_format(&mut a).is_ok());
        assert_eq!(a, before);
        let mut a = words(&["--log-format", "xml"]);
        assert!(take_format(&mut a).unwrap_err().contains("text or json"));
        let mut a = words(&["--log-format"]);
        assert!(take_format(&mut a).is_err());
    }
}
