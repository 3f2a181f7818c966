//! The options of `taskstream serve` (docs/interface.md, "Options of serve"): parsing the command
//! line and the environment into a [`ServeConfig`]. Parsing only: nothing here opens files or
//! reads the clock; the environment is passed in so tests need not touch the process's.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

use taskstream_core::{Millis, RetentionPolicy};

use crate::store::{Durability, DEFAULT_MAX_STORE_BYTES};

/// The most active `tasks/stream` requests one connection may hold, whatever `--max-streams`
/// says (the capacity of the server's stream table).
pub const MAX_STREAMS_CAPACITY: usize = 2048;

/// The default of `--max-running-tasks`.
pub const DEFAULT_MAX_RUNNING_TASKS: usize = 1024;
/// The most `--max-running-tasks` accepts (each running task is a thread).
pub const MAX_RUNNING_TASKS_CAPACITY: usize = 16_384;
/// The default of `--max-failed-lookups-per-minute`.
pub const DEFAULT_MAX_FAILED_LOOKUPS_PER_MINUTE: u32 = 100;

/// The usage text of `taskstream serve`.
pub const SERVE_HELP: &str = "\
taskstream serve: an MCP server on stdin/stdout (newline-delimited JSON-RPC 2.0) with Tasks and
SEP-2694 resumable task event streams. Logs go to stderr.

USAGE:
    taskstream serve [OPTIONS]

OPTIONS:
    --data-dir DIR             where tasks and event logs are kept
                               [default: $TASKSTREAM_DATA_DIR, else $XDG_DATA_HOME/taskstream,
                               else ~/.local/share/taskstream]
    --in-memory                keep nothing on disk (conflicts with --data-dir)
    --store postgres://USER@HOST:PORT/DB
                               keep tasks and events in PostgreSQL instead of a data dir,
                               shared by every server (replica) on that database (conflicts
                               with --data-dir, --in-memory and --socket)
    --lease-timeout SECS       with --store: a replica's running tasks end failed this long
                               after it stopped renewing its lease [default: 15]
    --max-events-per-task N    events retained per task [default: 10000]
    --max-event-age SECS       events older than this are dropped [default: 86400]
    --terminal-retention SECS  how long a terminal task stays retrievable [default: 3600]
    --max-payload-bytes N      largest payload of one event, compact JSON [default: 65536]
    --max-store-bytes N        bytes of retained events (types and payloads) across all tasks;
                               beyond it new events and tasks are refused until retention frees
                               some [default: 1073741824 (1 GiB)]
    --max-message-bytes N      largest incoming JSON-RPC line [default: 1048576]
    --max-streams N            concurrent tasks/stream requests per connection [default: 16]
    --max-running-tasks N      tasks running at once per principal, plus a connection's
                               plain tool calls [default: 1024]
    --max-total-running-tasks N
                               tasks running at once in the whole server, over every
                               connection [default: 16384]
    --max-failed-lookups-per-minute N
                               Tasks requests for unknown tasks or with bad cursors allowed per
                               minute before Tasks requests are refused for a while [default: 100]
    --principal NAME           identity bound to the tasks this connection creates
                               [default: $TASKSTREAM_PRINCIPAL, else local]
    --durability MODE          event | group | none [default: group]

STREAMABLE HTTP (instead of stdio):
    --http HOST:PORT           serve MCP Streamable HTTP at http://HOST:PORT/mcp (both eras);
                               port 0 picks a free port; one stderr line tells
                               `listening on http://HOST:PORT/mcp`. A non-loopback HOST needs
                               --auth-token-file
    --auth-token-file FILE     lines `TOKEN PRINCIPAL`: each request needs
                               `Authorization: Bearer TOKEN` (401 otherwise) and acts as PRINCIPAL
    --allowed-origin ORIGIN    another Origin (and its host as Host) to accept besides the bound
                               address (repeatable); any other gets 403
    --max-body-bytes N         largest request body [default: --max-message-bytes]
    --max-sessions N           legacy (2025-11-25) sessions at once [default: 1024]

UNIX SOCKET (instead of stdio; what `taskstream connect` starts in the background):
    --socket                   serve the Unix socket `taskstream.sock` inside the data dir
                               (0600; peers of another user are refused); each accepted
                               socket is one connection
    --idle-exit SECS           with --socket: exit once there has been no connection and no
                               running task for SECS seconds; 0 never [default: 300]
    --detach                   with --socket: start a session of its own (no terminal)
    -h, --help                 print this help
";

/// Everything `taskstream serve` was told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeConfig {
    /// The data dir, or `None` with `--in-memory`.
    pub data_dir: Option<PathBuf>,
    /// Retention limits (`--max-events-per-task`, `--max-event-age`, `--terminal-retention`,
    /// `--max-payload-bytes`).
    pub retention: RetentionPolicy,
    /// The bytes of retained events (types plus payloads) across all tasks, beyond which new
    /// events and tasks are refused (`--max-store-bytes`).
    pub max_store_bytes: u64,
    /// The longest incoming line accepted, in bytes (`--max-message-bytes`).
    pub max_message_bytes: usize,
    /// Active `tasks/stream` requests per connection (`--max-streams`), at most
    /// [`MAX_STREAMS_CAPACITY`].
    pub max_streams: usize,
    /// Tasks running at once per principal, plus a connection's plain tool calls
    /// (`--max-running-tasks`).
    pub max_running_tasks: usize,
    /// Failed task lookups (unknown task, bad cursor) a connection may make per minute before
    /// its Tasks requests are refused for a while (`--max-failed-lookups-per-minute`, SE-07).
    pub max_failed_lookups_per_minute: u32,
    /// The principal bound to tasks this connection creates (`--principal`).
    pub principal: String,
    /// When appended events are durable (`--durability`).
    pub durability: Durability,
    /// Tasks running at once in the whole process (`--max-total-running-tasks`).
    pub max_total_running_tasks: usize,
    /// Serve Streamable HTTP instead of stdio (`--http` and its options).
    pub http: Option<HttpConfig>,
    /// Serve the data dir's Unix socket instead of stdio (`--socket` and its options).
    pub socket: Option<SocketConfig>,
    /// Keep tasks and events in PostgreSQL (`--store postgres://…`) instead of a data dir;
    /// `data_dir` is then `None`.
    pub store_url: Option<String>,
    /// With `store_url`: how long a replica's lease lasts without renewal (`--lease-timeout`).
    pub lease_timeout: std::time::Duration,
}

/// The options of `serve --socket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketConfig {
    /// Seconds without a connection and without a running task before the server exits by
    /// itself (`--idle-exit`); 0 never.
    pub idle_exit_secs: u64,
    /// Start a session of its own, away from any terminal (`--detach`).
    pub detach: bool,
}

/// The default of `--idle-exit`.
pub const DEFAULT_IDLE_EXIT_SECS: u64 = 300;

/// The options of `serve --http`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// `HOST:PORT` to bind (`--http`).
    pub bind: String,
    /// The bearer-token file (`--auth-token-file`).
    pub auth_token_file: Option<PathBuf>,
    /// Further accepted origins (`--allowed-origin`).
    pub allowed_origins: Vec<String>,
    /// The largest request body (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// Legacy sessions at once (`--max-sessions`).
    pub max_sessions: usize,
}

impl ServeConfig {
    /// The defaults of docs/interface.md, in memory, principal `local`.
    #[must_use]
    pub fn in_memory() -> ServeConfig {
        ServeConfig {
            data_dir: None,
            retention: RetentionPolicy::DEFAULT,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            max_message_bytes: 1_048_576,
            max_streams: 16,
            max_running_tasks: DEFAULT_MAX_RUNNING_TASKS,
            max_failed_lookups_per_minute: DEFAULT_MAX_FAILED_LOOKUPS_PER_MINUTE,
            principal: "local".to_owned(),
            durability: Durability::Group,
            max_total_running_tasks: MAX_RUNNING_TASKS_CAPACITY,
            http: None,
            socket: None,
            store_url: None,
            lease_timeout: crate::store::pg::DEFAULT_LEASE_TIMEOUT,
        }
    }
}

/// What the command line asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServeCommand {
    /// Print [`SERVE_HELP`] and exit successfully.
    Help,
    /// Serve with this configuration.
    Run(Box<ServeConfig>),
}

/// Why the command line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// An argument that is not a known option.
    UnknownArgument(String),
    /// An option that needs a value came last.
    MissingValue(&'static str),
    /// An option's value is not acceptable.
    InvalidValue {
        /// The option.
        flag: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// `--in-memory` together with `--data-dir`.
    Conflict,
    /// No data dir was given and none can be derived (no `HOME`).
    NoDataDir,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownArgument(a) => write!(f, "unknown argument {a:?}"),
            ConfigError::MissingValue(flag) => write!(f, "{flag} needs a value"),
            ConfigError::InvalidValue {
                flag,
                value,
                expected,
            } => write!(f, "{flag} {value:?}: expected {expected}"),
            ConfigError::Conflict => f.write_str("--in-memory and --data-dir exclude each other"),
            ConfigError::NoDataDir => f.write_str(
                "no data dir: pass --data-dir or --in-memory, or set TASKSTREAM_DATA_DIR or HOME",
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses the arguments after `serve`. `env` reads an environment variable (pass
/// `|k| std::env::var_os(k)` in the binary).
///
/// Options take their value as the next argument or after `=` (`--max-streams=32`).
///
/// # Errors
/// [`ConfigError`] for an unknown option, a missing or bad value, or no derivable data dir.
pub fn parse_serve(
    args: impl IntoIterator<Item = OsString>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<ServeCommand, ConfigError> {
    let mut config = ServeConfig::in_memory();
    let mut data_dir: Option<PathBuf> = None;
    let mut in_memory = false;
    let mut principal: Option<String> = None;
    let mut http: Option<HttpConfig> = None;
    let mut auth_token_file = None;
    let mut allowed_origins = Vec::new();
    let mut max_body_bytes = None;
    let mut max_sessions = 1024;
    let mut socket = false;
    let mut idle_exit = None;
    let mut detach = false;
    let mut store_url: Option<String> = None;
    let mut lease_timeout = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(OsString::from(v))),
            _ => (text.clone(), None),
        };
        let mut value = |flag: &'static str| -> Result<OsString, ConfigError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => args.next().ok_or(ConfigError::MissingValue(flag)),
            }
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(ServeCommand::Help),
            "--in-memory" if inline.is_none() => in_memory = true,
            "--data-dir" => data_dir = Some(PathBuf::from(value("--data-dir")?)),
            "--store" => {
                let url = value("--store")?.to_string_lossy().into_owned();
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    return Err(ConfigError::UnknownArgument(
                        "--store takes a postgres:// URL".into(),
                    ));
                }
                store_url = Some(url);
            }
            "--lease-timeout" => {
                let flag = "--lease-timeout";
                lease_timeout = Some(number(flag, &value(flag)?, 1, 86_400)?);
            }
            "--max-events-per-task" => {
                let flag = "--max-events-per-task";
                config.retention.max_events = number(flag, &value(flag)?, 1, u32::MAX.into())?
                    .try_into()
                    .unwrap_or(u32::MAX);
            }
            "--max-event-age" => {
                let flag = "--max-event-age";
                config.retention.max_event_age =
                    Millis::from_secs(number(flag, &value(flag)?, 1, u64::MAX / 1000)?);
            }
            "--terminal-retention" => {
                let flag = "--terminal-retention";
                config.retention.terminal_retention =
                    Millis::from_secs(number(flag, &value(flag)?, 0, u64::MAX / 1000)?);
            }
            "--max-payload-bytes" => {
                let flag = "--max-payload-bytes";
                config.retention.max_payload_bytes =
                    number(flag, &value(flag)?, 2, u32::MAX.into())?
                        .try_into()
                        .unwrap_or(u32::MAX);
            }
            "--max-store-bytes" => {
                let flag = "--max-store-bytes";
                config.max_store_bytes = number(flag, &value(flag)?, 1, u64::MAX)?;
            }
            "--max-message-bytes" => {
                let flag = "--max-message-bytes";
                let n = number(flag, &value(flag)?, 64, 1 << 30)?;
                config.max_message_bytes = usize::try_from(n).unwrap_or(usize::MAX);
            }
            "--max-streams" => {
                let flag = "--max-streams";
                let n = number(flag, &value(flag)?, 1, MAX_STREAMS_CAPACITY as u64)?;
                config.max_streams = usize::try_from(n).unwrap_or(MAX_STREAMS_CAPACITY);
            }
            "--max-running-tasks" => {
                let flag = "--max-running-tasks";
                let n = number(flag, &value(flag)?, 1, MAX_RUNNING_TASKS_CAPACITY as u64)?;
                config.max_running_tasks = usize::try_from(n).unwrap_or(MAX_RUNNING_TASKS_CAPACITY);
            }
            "--max-failed-lookups-per-minute" => {
                let flag = "--max-failed-lookups-per-minute";
                let n = number(flag, &value(flag)?, 1, 1_000_000)?;
                config.max_failed_lookups_per_minute = u32::try_from(n).unwrap_or(1_000_000);
            }
            "--max-total-running-tasks" => {
                let flag = "--max-total-running-tasks";
                let n = number(flag, &value(flag)?, 1, MAX_RUNNING_TASKS_CAPACITY as u64)?;
                config.max_total_running_tasks =
                    usize::try_from(n).unwrap_or(MAX_RUNNING_TASKS_CAPACITY);
            }
            "--http" => {
                let flag = "--http";
                let bind = non_empty(flag, &value(flag)?)?;
                http = Some(HttpConfig {
                    bind,
                    auth_token_file: None,
                    allowed_origins: Vec::new(),
                    max_body_bytes: 0,
                    max_sessions: 0,
                });
            }
            "--socket" if inline.is_none() => socket = true,
            "--detach" if inline.is_none() => detach = true,
            "--idle-exit" => {
                let flag = "--idle-exit";
                idle_exit = Some(number(flag, &value(flag)?, 0, u64::MAX / 1000)?);
            }
            "--auth-token-file" => {
                auth_token_file = Some(PathBuf::from(value("--auth-token-file")?));
            }
            "--allowed-origin" => {
                let flag = "--allowed-origin";
                allowed_origins.push(non_empty(flag, &value(flag)?)?);
            }
            "--max-body-bytes" => {
                let flag = "--max-body-bytes";
                let n = number(flag, &value(flag)?, 64, 1 << 30)?;
                max_body_bytes = Some(usize::try_from(n).unwrap_or(1 << 30));
            }
            "--max-sessions" => {
                let flag = "--max-sessions";
                let n = number(flag, &value(flag)?, 1, 1 << 20)?;
                max_sessions = usize::try_from(n).unwrap_or(1 << 20);
            }
            "--principal" => {
                let flag = "--principal";
                principal = Some(non_empty(flag, &value(flag)?)?);
            }
            "--durability" => {
                let flag = "--durability";
                let v = value(flag)?;
                config.durability = match v.to_str() {
                    Some("event") => Durability::Event,
                    Some("group") => Durability::Group,
                    Some("none") => Durability::None,
                    _ => {
                        return Err(ConfigError::InvalidValue {
                            flag,
                            value: v.to_string_lossy().into_owned(),
                            expected: "event, group or none",
                        })
                    }
                };
            }
            _ => return Err(ConfigError::UnknownArgument(text)),
        }
    }
    config.principal = match principal {
        Some(p) => p,
        None => match env("TASKSTREAM_PRINCIPAL") {
            Some(p) if !p.is_empty() => non_empty("TASKSTREAM_PRINCIPAL", &p)?,
            _ => "local".to_owned(),
        },
    };
    if let Some(mut h) = http {
        h.auth_token_file = auth_token_file;
        h.allowed_origins = allowed_origins;
        h.max_body_bytes = max_body_bytes.unwrap_or(config.max_message_bytes);
        h.max_sessions = max_sessions;
        config.http = Some(h);
    } else if auth_token_file.is_some() || !allowed_origins.is_empty() {
        return Err(ConfigError::UnknownArgument(
            "--auth-token-file and --allowed-origin need --http".into(),
        ));
    }
    if socket {
        if config.http.is_some() || in_memory {
            return Err(ConfigError::UnknownArgument(
                "--socket excludes --http and --in-memory".into(),
            ));
        }
        config.socket = Some(SocketConfig {
            idle_exit_secs: idle_exit.unwrap_or(DEFAULT_IDLE_EXIT_SECS),
            detach,
        });
    } else if idle_exit.is_some() || detach {
        return Err(ConfigError::UnknownArgument(
            "--idle-exit and --detach need --socket".into(),
        ));
    }
    if let Some(url) = store_url {
        if in_memory || data_dir.is_some() || config.socket.is_some() {
            return Err(ConfigError::UnknownArgument(
                "--store excludes --data-dir, --in-memory and --socket".into(),
            ));
        }
        config.store_url = Some(url);
        if let Some(secs) = lease_timeout {
            config.lease_timeout = std::time::Duration::from_secs(secs);
        }
        return Ok(ServeCommand::Run(Box::new(config)));
    } else if lease_timeout.is_some() {
        return Err(ConfigError::UnknownArgument(
            "--lease-timeout needs --store".into(),
        ));
    }
    config.data_dir = match (in_memory, data_dir) {
        (true, Some(_)) => return Err(ConfigError::Conflict),
        (true, None) => None,
        (false, Some(dir)) => Some(dir),
        (false, None) => Some(default_data_dir(&env)?),
    };
    Ok(ServeCommand::Run(Box::new(config)))
}

/// `$TASKSTREAM_DATA_DIR`, else `$XDG_DATA_HOME/taskstream`, else `~/.local/share/taskstream`
/// (docs/interface.md). Empty variables count as unset; a relative `XDG_DATA_HOME` is ignored, as the
/// XDG Base Directory specification says.
///
/// # Errors
/// [`ConfigError::NoDataDir`] when none of them is set.
pub fn default_data_dir(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, ConfigError> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(dir) = set("TASKSTREAM_DATA_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(xdg) = set("XDG_DATA_HOME").map(PathBuf::from) {
        if xdg.is_absolute() {
            return Ok(xdg.join("taskstream"));
        }
    }
    set("HOME")
        .map(|home| PathBuf::from(home).join(".local/share/taskstream"))
        .ok_or(ConfigError::NoDataDir)
}

fn number(flag: &'static str, v: &OsStr, min: u64, max: u64) -> Result<u64, ConfigError> {
    let bad = || ConfigError::InvalidValue {
        flag,
        value: v.to_string_lossy().into_owned(),
        expected: "a whole number in range",
    };
    let n: u64 = v.to_str().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(bad())
    }
}

fn non_empty(flag: &'static str, v: &OsStr) -> Result<String, ConfigError> {
    match v.to_str() {
        Some(s) if !s.is_empty() && !s.chars().any(char::is_control) => Ok(s.to_owned()),
        _ => Err(ConfigError::InvalidValue {
            flag,
            value: v.to_string_lossy().into_owned(),
            expected: "a non-empty UTF-8 name without control characters",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<ServeCommand, ConfigError> {
        let env: Vec<(String, OsString)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        parse_serve(args.iter().map(OsString::from), move |k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[track_caller]
    fn run(args: &[&str], env: &[(&str, &str)]) -> ServeConfig {
        match parse(args, env) {
            Ok(ServeCommand::Run(c)) => *c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_follow_the_interface() {
        let c = run(&[], &[("HOME", "/home/u")]);
        assert_eq!(
            c.data_dir,
            Some(PathBuf::from("/home/u/.local/share/taskstream"))
        );
        assert_eq!(c.retention, RetentionPolicy::DEFAULT);
        assert_eq!(c.max_message_bytes, 1_048_576);
        assert_eq!(c.max_store_bytes, 1 << 30);
        assert_eq!(c.max_streams, 16);
        assert_eq!(c.max_running_tasks, 1024);
        assert_eq!(c.max_failed_lookups_per_minute, 100);
        assert_eq!(c.principal, "local");
        assert_eq!(c.durability, Durability::Group);
    }

    #[test]
    fn store_takes_a_postgres_url_instead_of_a_data_dir() {
        let c = run(&["--store", "postgres://u@h:5432/db"], &[("HOME", "/h")]);
        assert_eq!(c.store_url.as_deref(), Some("postgres://u@h:5432/db"));
        assert_eq!(c.data_dir, None, "no data dir with --store");
        assert_eq!(c.lease_timeout, crate::store::pg::DEFAULT_LEASE_TIMEOUT);
        let c = run(
            &["--store=postgresql://u@h/db", "--lease-timeout", "3"],
            &[],
        );
        assert_eq!(c.lease_timeout, std::time::Duration::from_secs(3));
        for bad in [
            &["--store", "mysql://u@h/db"][..],
            &["--store", "postgres://u@h/db", "--in-memory"],
            &["--store", "postgres://u@h/db", "--data-dir", "/d"],
            &["--store", "postgres://u@h/db", "--socket"],
            &["--store", "postgres://u@h/db", "--lease-timeout", "0"],
            &["--lease-timeout", "5", "--in-memory"],
        ] {
            assert!(parse(bad, &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn data_dir_precedence() {
        let c = run(&[], &[("HOME", "/h"), ("XDG_DATA_HOME", "/x")]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/x/taskstream")));
        let c = run(
            &[],
            &[
                ("HOME", "/h"),
                ("XDG_DATA_HOME", "/x"),
                ("TASKSTREAM_DATA_DIR", "/t"),
            ],
        );
        assert_eq!(c.data_dir, Some(PathBuf::from("/t")));
        let c = run(&["--data-dir", "/d"], &[("TASKSTREAM_DATA_DIR", "/t")]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/d")));
        assert_eq!(run(&["--in-memory"], &[]).data_dir, None);
        assert_eq!(parse(&[], &[]), Err(ConfigError::NoDataDir));
        assert_eq!(
            parse(&["--in-memory", "--data-dir", "/d"], &[]),
            Err(ConfigError::Conflict)
        );
    }

    #[test]
    fn every_flag_is_read() {
        let c = run(
            &[
                "--in-memory",
                "--max-events-per-task",
                "5",
                "--max-event-age=60",
                "--terminal-retention",
                "0",
                "--max-payload-bytes",
                "100",
                "--max-store-bytes=5000",
                "--max-message-bytes",
                "4096",
                "--max-streams",
                "1000",
                "--max-running-tasks",
                "7",
                "--max-failed-lookups-per-minute=3",
                "--principal",
                "alice",
                "--durability",
                "none",
            ],
            &[("TASKSTREAM_PRINCIPAL", "bob")],
        );
        assert_eq!(c.retention.max_events, 5);
        assert_eq!(c.retention.max_event_age, Millis(60_000));
        assert_eq!(c.retention.terminal_retention, Millis(0));
        assert_eq!(c.retention.max_payload_bytes, 100);
        assert_eq!(c.max_store_bytes, 5000);
        assert_eq!(c.max_message_bytes, 4096);
        assert_eq!(c.max_streams, 1000);
        assert_eq!(c.max_running_tasks, 7);
        assert_eq!(c.max_failed_lookups_per_minute, 3);
        assert_eq!(c.principal, "alice");
        assert_eq!(c.durability, Durability::None);
        let c = run(&["--in-memory"], &[("TASKSTREAM_PRINCIPAL", "bob")]);
        assert_eq!(c.principal, "bob");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(
            parse(&["--bogus"], &[]),
            Err(ConfigError::UnknownArgument("--bogus".into()))
        );
        assert_eq!(
            parse(&["--max-streams"], &[]),
            Err(ConfigError::MissingValue("--max-streams"))
        );
        for bad in [
            &["--max-streams", "0"][..],
            &["--max-streams", "99999"],
            &["--max-running-tasks", "0"],
            &["--max-store-bytes", "0"],
            &["--max-failed-lookups-per-minute", "0"],
            &["--max-events-per-task", "-1"],
            &["--max-event-age", "1.5"],
            &["--durability", "fast"],
            &["--principal", ""],
        ] {
            assert!(
                matches!(parse(bad, &[]), Err(ConfigError::InvalidValue { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(parse(&["--help"], &[]), Ok(ServeCommand::Help));
    }
}

#[cfg(test)]
mod socket_tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ServeCommand, ConfigError> {
        parse_serve(args.iter().map(OsString::from), |_| None)
    }

    #[test]
    fn socket_options() {
        let Ok(ServeCommand::Run(c)) = parse(&["--data-dir", "d", "--socket"]) else {
            panic!("--socket refused");
        };
        assert_eq!(
            c.socket,
            Some(SocketConfig {
                idle_exit_secs: DEFAULT_IDLE_EXIT_SECS,
                detach: false
            })
        );
        let Ok(ServeCommand::Run(c)) = parse(&[
            "--data-dir",
            "d",
            "--socket",
            "--idle-exit",
            "0",
            "--detach",
        ]) else {
            panic!("--idle-exit refused");
        };
        assert_eq!(
            c.socket,
            Some(SocketConfig {
                idle_exit_secs: 0,
                detach: true
            })
        );
        assert!(parse(&["--data-dir", "d", "--idle-exit", "5"]).is_err());
        assert!(parse(&["--in-memory", "--socket"]).is_err());
        assert!(parse(&["--socket", "--http", "127.0.0.1:0", "--data-dir", "d"]).is_err());
        assert!(parse(&["--data-dir", "d", "--socket", "--idle-exit", "-1"]).is_err());
    }
}
