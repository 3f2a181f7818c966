//! Logging through [`tracing`], to stderr: the only place logs may go on a stdio server
//! (MCP-DIGEST a.5).
//!
//! The library emits `tracing` events (target `taskstream`); a program that embeds it
//! collects them with its own subscriber. The `taskstream` binary (and
//! [`ServerBuilder::main`](crate::ServerBuilder::main)) installs one with [`init`]: one line
//! per event on stderr, as text or, with `--log-format json` (or `TASKSTREAM_LOG_FORMAT=json`),
//! as one JSON object per line for hosted log pipelines. What is logged comes from
//! `TASKSTREAM_LOG`, in `RUST_LOG`'s syntax: a level (`off`, `error`, `warn`, `info` (the
//! default), `debug`, `trace`) or comma-separated `target=level` directives
//! (`taskstream=debug`); a value that is neither is reported on stderr and the default used.
//! Payloads and tool arguments are never logged at `info` or above: they may be sensitive
//! (SE-08).

use std::ffi::OsString;
use std::fmt;

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// A level of the crate's own log lines, most severe first (nothing here logs at `trace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
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

/// The level names `TASKSTREAM_LOG` takes on their own.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The filter for `value` (`TASKSTREAM_LOG`'s): `info` when unset or empty.
///
/// # Errors
/// Why `value` is not a filter. A lone word that is not a level is refused too: `RUST_LOG`
/// reads it as a target at `trace`, which would silently turn off every other log line.
fn filter(value: Option<&std::ffi::OsStr>) -> Result<EnvFilter, String> {
    let builder = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .with_regex(false);
    let Some(value) = value else {
        return Ok(builder.parse_lossy(""));
    };
    let value = value
        .to_str()
        .ok_or_else(|| format!("{value:?} is not UTF-8"))?;
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let lone_word = directive
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if lone_word && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(directive)) {
            return Err(format!(
                "{directive:?} is not a level ({}) nor a target=level directive",
                LEVELS.join(", ")
            ));
        }
    }
    builder.parse(value).map_err(|e| format!("{value:?}: {e}"))
}

/// Installs the stderr subscriber in `format`, filtered by `TASKSTREAM_LOG`, unless the
/// program already has one (then this does nothing). A `TASKSTREAM_LOG` that is not a filter
/// is reported as the first log line, and `info` is used.
pub fn init(format: LogFormat) {
    init_traced(format, None);
}

/// [`init`], and with `otlp`, OpenTelemetry traces exported there too ([`crate::trace`]; flush
/// them with [`crate::otel::shutdown`] before the program exits). An exporter that cannot be
/// built is reported as a log line, and the server runs without traces.
pub fn init_traced(format: LogFormat, otlp: Option<&crate::otel::Endpoint>) {
    use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
    use tracing_subscriber::util::SubscriberInitExt as _;
    type Boxed = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;
    let (filter, refused) = match filter(std::env::var_os("TASKSTREAM_LOG").as_deref()) {
        Ok(f) => (f, None),
        Err(e) => (
            EnvFilter::builder()
                .with_default_directive(LevelFilter::INFO.into())
                .parse_lossy(""),
            Some(e),
        ),
    };
    // The trace spans are the exporter's, never log lines (nor their context).
    let filter = match format!("{}=off", crate::otel::TARGET).parse() {
        Ok(d) => filter.add_directive(d),
        Err(_) => filter,
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let fmt: Boxed = match format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    };
    let mut layers = vec![fmt];
    let mut failed = None;
    if let Some(endpoint) = otlp {
        match crate::otel::layer(endpoint) {
            Ok(l) => layers.push(l.boxed()),
            Err(e) => failed = Some(e),
        }
    }
    let installed = tracing_subscriber::registry().with(layers).try_init();
    // An error means a subscriber is already installed: the embedder's choice stands.
    if installed.is_ok() {
        if let Some(e) = refused {
            tracing::warn!(target: "taskstream", "TASKSTREAM_LOG ignored, logging at info: {e}");
        }
        if let Some(e) = failed {
            tracing::error!(target: "taskstream", "traces off: {e}");
        }
    }
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

/// Emits one event at `level` (target `taskstream`).
pub(crate) fn write(level: Level, args: fmt::Arguments<'_>) {
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
    fn taskstream_log_takes_a_level_or_directives_and_refuses_anything_else() {
        use std::ffi::OsStr;
        for ok in LEVELS
            .iter()
            .chain(&["", "INFO", "taskstream=debug", "warn,taskstream=trace"])
        {
            assert!(filter(Some(OsStr::new(ok))).is_ok(), "{ok}");
        }
        assert!(filter(None).is_ok());
        let e = filter(Some(OsStr::new("verbose"))).unwrap_err();
        assert!(e.contains("\"verbose\" is not a level (off, error"), "{e}");
        assert!(filter(Some(OsStr::new("taskstream=loud"))).is_err());
        assert!(filter(Some(OsStr::new("info,[{"))).is_err());
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
