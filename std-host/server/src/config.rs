//! The options of `taskstream serve` (docs/interface.md, "Options of serve"), on `clap`:
//! [`ServeArgs`] is the command line (every default, range and conflict is written there, once),
//! [`ServeArgs::resolve`] turns it and the environment into a [`ServeConfig`]. Parsing only:
//! nothing here opens files or reads the clock; the environment is passed in so tests need not
//! touch the process's.
//!
//! Why one file past ~600 lines: every `serve` option is one field of [`ServeArgs`], with its
//! default, range and conflicts written once on the field (CONTRIBUTING.md), and one field of
//! [`ServeConfig`]; splitting the options would split that one list.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, CommandFactory, FromArgMatches};
use taskstream_core::{Millis, RetentionPolicy};

use taskstream_store::{Durability, DEFAULT_INDEX_CACHE_BYTES, DEFAULT_MAX_STORE_BYTES};

/// The most active `tasks/stream` requests one connection may hold, whatever `--max-streams`
/// says (the capacity of the server's stream table).
pub const MAX_STREAMS_CAPACITY: usize = 2048;

/// The default of `--max-running-tasks`.
pub const DEFAULT_MAX_RUNNING_TASKS: usize = 1024;
/// The most `--max-running-tasks` accepts (each running task is a thread).
pub const MAX_RUNNING_TASKS_CAPACITY: usize = 16_384;
/// The default of `--max-failed-lookups-per-minute`.
pub const DEFAULT_MAX_FAILED_LOOKUPS_PER_MINUTE: u32 = 100;
/// The default of `--max-message-bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_576;
/// The default of `--max-streams`.
pub const DEFAULT_MAX_STREAMS: usize = 16;
/// The default of `--max-sessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// The default of `--max-principal-streams`: one principal's streams over HTTP, both eras. A
/// server without tokens is one principal for every client, so the default is sized for a
/// whole server's clients, not one user's (docs/security.md, "HTTP limits").
pub const DEFAULT_MAX_PRINCIPAL_STREAMS: usize = 1024;
/// The default of `--max-connections`: HTTP connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// The default of `--header-timeout` in seconds: how long a request head may take to arrive.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// The default of `--body-timeout` in seconds: how long a request body may take to arrive.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// The default of `--idle-timeout` in seconds: how long a connection with no request in flight
/// stays open.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 75;
/// The default of `--write-stall-timeout` in seconds: how long a response may wait on a client
/// that reads nothing before the connection is closed.
pub const DEFAULT_WRITE_STALL_TIMEOUT_SECS: u64 = 30;
/// The default of `--max-body-memory-bytes`: request bodies held in memory across all
/// connections at once.
pub const DEFAULT_MAX_BODY_MEMORY_BYTES: usize = 64 << 20;
/// The default of `--principal` when `TASKSTREAM_PRINCIPAL` is unset too.
pub const DEFAULT_PRINCIPAL: &str = "local";

const HTTP: &str = "Streamable HTTP (instead of stdio)";
const SOCKET: &str =
    "Unix socket (instead of stdio; what `taskstream connect` starts in the background)";

/// The command line of `taskstream serve` (and of a [`ServerBuilder`](crate::ServerBuilder)'s
/// `main`): flatten it into a command of your own with `#[command(flatten)]`.
#[derive(Args, Clone, Debug)]
#[non_exhaustive]
pub struct ServeArgs {
    /// Where tasks and event logs are kept [default: $TASKSTREAM_DATA_DIR, else
    /// $XDG_DATA_HOME/taskstream, else ~/.local/share/taskstream]
    #[arg(long, value_name = "DIR", conflicts_with = "in_memory")]
    pub data_dir: Option<PathBuf>,
    /// Keep nothing on disk
    #[arg(long)]
    pub in_memory: bool,
    /// Keep tasks and events in PostgreSQL instead of a data dir, shared by every server
    /// (replica) on that database
    #[arg(long, value_name = "postgres://USER@HOST:PORT/DB", value_parser = postgres_url,
          conflicts_with_all = ["data_dir", "in_memory", "socket"])]
    pub store: Option<String>,
    /// With --store: a replica's running tasks end failed this long after it stopped renewing
    /// its lease
    #[arg(long, value_name = "SECS", requires = "store",
          default_value_t = taskstream_store::DEFAULT_LEASE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease_timeout: u64,
    /// With --store: how many database connections reads (replays, tasks/get) may hold at
    /// once, beside the writers' own
    #[arg(long, value_name = "N", requires = "store",
          default_value_t = taskstream_store::DEFAULT_PG_POOL_SIZE as u64,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub store_pool: u64,
    /// With --store: how many connections commit batches of events side by side (each task's
    /// events always through the same one)
    #[arg(long, value_name = "N", requires = "store",
          default_value_t = taskstream_store::DEFAULT_PG_WRITERS as u64,
          value_parser = clap::value_parser!(u64).range(1..=16))]
    pub store_writers: u64,
    /// With --store: how many MiB of committed events the replica keeps to answer reads and
    /// its own streams without the database (0: none)
    #[arg(long, value_name = "MIB", requires = "store",
          default_value_t = taskstream_store::DEFAULT_PG_CACHE_MB as u64,
          value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub store_cache_mb: u64,
    /// Events retained per task
    #[arg(long, value_name = "N", default_value_t = u64::from(RetentionPolicy::DEFAULT.max_events),
          value_parser = clap::value_parser!(u64).range(1..=u64::from(u32::MAX)))]
    pub max_events_per_task: u64,
    /// Events older than this many seconds are dropped
    #[arg(long, value_name = "SECS", default_value_t = RetentionPolicy::DEFAULT.max_event_age.0 / 1000,
          value_parser = clap::value_parser!(u64).range(1..=u64::MAX / 1000))]
    pub max_event_age: u64,
    /// How long, in seconds, a terminal task stays retrievable
    #[arg(long, value_name = "SECS", default_value_t = RetentionPolicy::DEFAULT.terminal_retention.0 / 1000,
          value_parser = clap::value_parser!(u64).range(0..=u64::MAX / 1000))]
    pub terminal_retention: u64,
    /// Largest payload of one event, compact JSON, in bytes
    #[arg(long, value_name = "N", default_value_t = u64::from(RetentionPolicy::DEFAULT.max_payload_bytes),
          value_parser = clap::value_parser!(u64).range(2..=u64::from(u32::MAX)))]
    pub max_payload_bytes: u64,
    /// Once a task appends a dev.taskstream.checkpoint event, answer as if every earlier event
    /// of it were dropped (and reclaim their space): the latest checkpoint is its earliest event
    #[arg(long)]
    pub retain_from_checkpoint: bool,
    /// Bytes of retained events (types and payloads) across all tasks; beyond it new events and
    /// tasks are refused until retention frees some
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STORE_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_store_bytes: u64,
    /// Memory for the data dir's index page cache, in MiB: more makes replays of long logs
    /// faster, less keeps the server smaller
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_INDEX_CACHE_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub index_cache_mib: u64,
    /// Largest incoming JSON-RPC line, in bytes
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_MESSAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(64..=1 << 30))]
    pub max_message_bytes: u64,
    /// Concurrent tasks/stream requests per connection
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STREAMS as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_STREAMS_CAPACITY as u64))]
    pub max_streams: u64,
    /// Tasks running at once per principal, plus a connection's plain tool calls
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_RUNNING_TASKS as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_RUNNING_TASKS_CAPACITY as u64))]
    pub max_running_tasks: u64,
    /// Tasks running at once in the whole server, over every connection
    #[arg(long, value_name = "N", default_value_t = MAX_RUNNING_TASKS_CAPACITY as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_RUNNING_TASKS_CAPACITY as u64))]
    pub max_total_running_tasks: u64,
    /// Tasks requests for unknown tasks or with bad cursors allowed per minute before Tasks
    /// requests are refused for a while
    #[arg(long, value_name = "N", default_value_t = u64::from(DEFAULT_MAX_FAILED_LOOKUPS_PER_MINUTE),
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_failed_lookups_per_minute: u64,
    /// Identity bound to the tasks this connection creates [default: $TASKSTREAM_PRINCIPAL,
    /// else local]
    #[arg(long, value_name = "NAME", value_parser = name)]
    pub principal: Option<String>,
    /// When an appended event is durable: fdatasync per event, per group commit, or never
    #[arg(long, value_name = "MODE", default_value = "group",
          value_parser = PossibleValuesParser::new(["event", "group", "none"]).map(|m| durability(&m)))]
    pub durability: Durability,
    /// Serve MCP Streamable HTTP at http://HOST:PORT/mcp (both eras); port 0 picks a free port;
    /// one stderr line tells `listening on http://HOST:PORT/mcp`. A non-loopback HOST needs
    /// --auth-token-file or --oauth-issuer
    #[arg(long, value_name = "HOST:PORT", value_parser = name, help_heading = HTTP,
          conflicts_with_all = ["socket"])]
    pub http: Option<String>,
    /// Serve only /metrics (Prometheus text), /healthz and /readyz, unauthenticated, at
    /// http://HOST:PORT (any transport; with --http they are also at --http's address)
    #[arg(long, value_name = "HOST:PORT", value_parser = name)]
    pub metrics_addr: Option<String>,
    /// Lines `TOKEN PRINCIPAL`: each request needs `Authorization: Bearer TOKEN` (401
    /// otherwise) and acts as PRINCIPAL
    #[arg(long, value_name = "FILE", requires = "http", help_heading = HTTP)]
    pub auth_token_file: Option<PathBuf>,
    /// Be an OAuth 2.1 resource server: accept only access tokens (JWT, RS256/ES256) issued by
    /// ISSUER_URL for --oauth-resource, checked against the issuer's published keys; the
    /// principal is the token's --oauth-principal-claim. Exclusive with --auth-token-file
    #[arg(long, value_name = "ISSUER_URL", value_parser = name, help_heading = HTTP,
          requires = "oauth_resource", conflicts_with = "auth_token_file")]
    pub oauth_issuer: Option<String>,
    /// With --oauth-issuer: this server's canonical URL (RFC 8707), which a token's `aud`
    /// must contain; its metadata is served at /.well-known/oauth-protected-resource
    #[arg(long, value_name = "RESOURCE_URL", value_parser = name, requires = "oauth_issuer",
          help_heading = HTTP)]
    pub oauth_resource: Option<String>,
    /// With --oauth-issuer: a scope every token must carry (repeatable); a token without it
    /// gets 403 insufficient_scope
    #[arg(long, value_name = "SCOPE", value_parser = name, requires = "oauth_issuer",
          help_heading = HTTP)]
    pub oauth_scope: Vec<String>,
    /// With --oauth-issuer: the token claim that names the principal
    #[arg(long, value_name = "CLAIM", default_value = "sub", value_parser = name,
          help_heading = HTTP)]
    pub oauth_principal_claim: String,
    /// Another Origin (and its host as Host) to accept besides the bound address (repeatable);
    /// any other gets 403
    #[arg(long, value_name = "ORIGIN", value_parser = name, requires = "http", help_heading = HTTP)]
    pub allowed_origin: Vec<String>,
    /// Largest request body [default: --max-message-bytes]
    #[arg(long, value_name = "N", help_heading = HTTP,
          value_parser = clap::value_parser!(u64).range(64..=1 << 30))]
    pub max_body_bytes: Option<u64>,
    /// Legacy (2025-11-25) sessions at once
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS as u64, help_heading = HTTP,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_sessions: u64,
    /// Active `tasks/stream` requests of one principal at once over HTTP, both eras (without
    /// --auth-token-file every client is the same principal)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PRINCIPAL_STREAMS as u64,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_principal_streams: u64,
    /// HTTP connections open at once; more are answered 503 and closed
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS as u64,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_connections: u64,
    /// Seconds a request head may take to arrive (408 and closed after)
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_HEADER_TIMEOUT_SECS,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds a request body may take to arrive (408 after)
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_BODY_TIMEOUT_SECS,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout: u64,
    /// Seconds a connection with no request in flight stays open
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_IDLE_TIMEOUT_SECS,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub idle_timeout: u64,
    /// Seconds a response (a stream among them) may wait on a client that reads nothing before
    /// its connection is closed and what it held is freed
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_WRITE_STALL_TIMEOUT_SECS,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub write_stall_timeout: u64,
    /// Bytes of request bodies held in memory across all connections at once; a request that
    /// would exceed it gets 503
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BODY_MEMORY_BYTES as u64,
          help_heading = HTTP, value_parser = clap::value_parser!(u64).range(1 << 16..=1 << 34))]
    pub max_body_memory_bytes: u64,
    /// Seconds between SIGTERM and the end of the streams: /readyz answers 503 at once while
    /// everything is still served, so a load balancer stops sending new clients first
    #[arg(long, value_name = "SECS", default_value_t = 0, help_heading = HTTP,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub drain_secs: u64,
    /// Turn off the live status page (`GET /`, `/status.js`, `/status.json`)
    #[arg(long, help_heading = HTTP)]
    pub no_status_page: bool,
    /// Serve the Unix socket `taskstream.sock` inside the data dir (0600; peers of another user
    /// are refused); each accepted socket is one connection
    #[arg(long, help_heading = SOCKET, conflicts_with = "in_memory")]
    pub socket: bool,
    /// With --socket: exit once there has been no connection and no running task for SECS
    /// seconds; 0 never
    #[arg(long, value_name = "SECS", requires = "socket", help_heading = SOCKET,
          default_value_t = DEFAULT_IDLE_EXIT_SECS,
          value_parser = clap::value_parser!(u64).range(0..=u64::MAX / 1000))]
    pub idle_exit: u64,
    /// With --socket: start a session of its own (no terminal)
    #[arg(long, requires = "socket", help_heading = SOCKET)]
    pub detach: bool,
}

/// `taskstream serve` as a command of its own.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream serve",
    about = "An MCP server on stdin/stdout (newline-delimited JSON-RPC 2.0) with Tasks and \
             SEP-2694 resumable task event streams. Logs go to stderr.",
    disable_version_flag = true,
    args_override_self = true
)]
struct ServeCli {
    #[command(flatten)]
    args: ServeArgs,
}

/// The usage text of `taskstream serve`.
#[must_use]
pub fn serve_help() -> String {
    ServeCli::command().render_help().to_string()
}

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
    /// The bound of the data dir's index page cache, in bytes (`--index-cache-mib`).
    pub index_cache_bytes: u64,
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
    /// With `store_url`: the read connections' pool size (`--store-pool`).
    pub store_pool: usize,
    /// With `store_url`: the writer connections (`--store-writers`).
    pub store_writers: usize,
    /// With `store_url`: bytes of committed events the replica caches (`--store-cache-mb`).
    pub store_cache_bytes: usize,
    /// Where to serve only `/metrics`, `/healthz` and `/readyz` (`--metrics-addr`).
    pub metrics_addr: Option<String>,
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
    /// OAuth resource-server mode (`--oauth-issuer` and the options beside it).
    pub oauth: Option<OAuthConfig>,
    /// Further accepted origins (`--allowed-origin`).
    pub allowed_origins: Vec<String>,
    /// The largest request body (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// Legacy sessions at once (`--max-sessions`).
    pub max_sessions: usize,
    /// Bounds on connections, requests and streams.
    pub limits: HttpLimits,
    /// How long readiness fails before the streams end, after SIGTERM (`--drain-secs`).
    pub drain: std::time::Duration,
    /// Serve the live status page at `/` (off with `--no-status-page`).
    pub status_page: bool,
}

/// `serve --http --oauth-issuer`: the server is an OAuth 2.1 resource server
/// (docs/security.md, "OAuth mode").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The authorization server whose tokens are accepted (`--oauth-issuer`): a token's `iss`
    /// must equal it.
    pub issuer: String,
    /// This server's canonical URL (`--oauth-resource`): a token's `aud` must contain it.
    pub resource: String,
    /// Scopes every token must carry (`--oauth-scope`).
    pub scopes: Vec<String>,
    /// The claim naming the principal (`--oauth-principal-claim`, default `sub`).
    pub principal_claim: String,
}

/// The bounds of `serve --http` on connections, requests and streams (docs/security.md, "HTTP
/// limits": each default and what it protects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpLimits {
    /// Active streams of one principal (`--max-principal-streams`).
    pub max_principal_streams: usize,
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// How long a request head may take (`--header-timeout`).
    pub header_timeout: std::time::Duration,
    /// How long a request body may take (`--body-timeout`).
    pub body_timeout: std::time::Duration,
    /// How long a connection without a request in flight stays open (`--idle-timeout`).
    pub idle_timeout: std::time::Duration,
    /// How long a write may wait on a client that reads nothing (`--write-stall-timeout`).
    pub write_stall_timeout: std::time::Duration,
    /// Request bodies in memory at once, in bytes (`--max-body-memory-bytes`).
    pub max_body_memory_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        use std::time::Duration;
        HttpLimits {
            max_principal_streams: DEFAULT_MAX_PRINCIPAL_STREAMS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECS),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            write_stall_timeout: Duration::from_secs(DEFAULT_WRITE_STALL_TIMEOUT_SECS),
            max_body_memory_bytes: DEFAULT_MAX_BODY_MEMORY_BYTES,
        }
    }
}

impl ServeConfig {
    /// The defaults of docs/interface.md, in memory, principal `local`.
    #[must_use]
    pub fn in_memory() -> ServeConfig {
        ServeConfig {
            data_dir: None,
            retention: RetentionPolicy::DEFAULT,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_streams: DEFAULT_MAX_STREAMS,
            max_running_tasks: DEFAULT_MAX_RUNNING_TASKS,
            max_failed_lookups_per_minute: DEFAULT_MAX_FAILED_LOOKUPS_PER_MINUTE,
            principal: DEFAULT_PRINCIPAL.to_owned(),
            durability: Durability::Group,
            max_total_running_tasks: MAX_RUNNING_TASKS_CAPACITY,
            http: None,
            socket: None,
            store_url: None,
            lease_timeout: taskstream_store::DEFAULT_LEASE_TIMEOUT,
            store_pool: taskstream_store::DEFAULT_PG_POOL_SIZE,
            store_writers: taskstream_store::DEFAULT_PG_WRITERS,
            store_cache_bytes: taskstream_store::DEFAULT_PG_CACHE_MB << 20,
            metrics_addr: None,
        }
    }
}

/// What the command line asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServeCommand {
    /// Print [`serve_help`] and exit successfully.
    Help,
    /// Serve with this configuration.
    Run(Box<ServeConfig>),
}

/// Why the command line was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// An unknown option, a missing or bad value, or options that exclude each other: clap's
    /// message, which names the option and what it accepts (a range, the possible values).
    #[error("{0}")]
    Usage(String),
    /// No data dir was given and none can be derived (no `HOME`).
    #[error("no data dir: pass --data-dir or --in-memory, or set TASKSTREAM_DATA_DIR or HOME")]
    NoDataDir,
    /// `TASKSTREAM_PRINCIPAL` is set to something that is not a name.
    #[error(
        "TASKSTREAM_PRINCIPAL {0:?}: expected a non-empty UTF-8 name without control characters"
    )]
    BadPrincipal(String),
}

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
    let argv = std::iter::once(OsString::from("serve")).chain(args);
    let parsed = ServeCli::command()
        .try_get_matches_from(argv)
        .and_then(|m| ServeCli::from_arg_matches(&m).map(|cli| (m, cli)));
    match parsed {
        Ok((matches, cli)) => {
            check_requirements(&matches)?;
            Ok(ServeCommand::Run(Box::new(cli.args.resolve(env)?)))
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(ServeCommand::Help),
        Err(e) => Err(usage(&e)),
    }
}

/// Options that mean something only beside another: (option, its flag, the one it needs).
/// clap's `requires` says the same but lets it go when the needed option conflicts with one
/// given (`--in-memory --idle-exit 5`); this check does not.
const REQUIREMENTS: [(&str, &str, &str); 11] = [
    ("lease_timeout", "--lease-timeout", "--store"),
    ("store_pool", "--store-pool", "--store"),
    ("store_writers", "--store-writers", "--store"),
    ("store_cache_mb", "--store-cache-mb", "--store"),
    ("idle_exit", "--idle-exit", "--socket"),
    ("detach", "--detach", "--socket"),
    ("auth_token_file", "--auth-token-file", "--http"),
    ("oauth_issuer", "--oauth-issuer", "--http"),
    ("allowed_origin", "--allowed-origin", "--http"),
    ("drain_secs", "--drain-secs", "--http"),
    ("no_status_page", "--no-status-page", "--http"),
];

/// Refuses an option given on the command line without the option it needs
/// (`--lease-timeout` needs `--store`; `--idle-exit` and `--detach` need `--socket`; `--auth-token-file` and `--allowed-origin` need `--http`). `matches` are those of a command that flattens [`ServeArgs`].
///
/// # Errors
/// [`ConfigError::Usage`] naming both options.
pub fn check_requirements(matches: &clap::ArgMatches) -> Result<(), ConfigError> {
    let given = |id: &str| {
        matches!(
            matches.value_source(id),
            Some(clap::parser::ValueSource::CommandLine)
        )
    };
    for (id, flag, needs) in REQUIREMENTS {
        let needed_id = &needs[2..];
        if given(id) && !given(needed_id) {
            return Err(ConfigError::Usage(format!("{flag} needs {needs}")));
        }
    }
    Ok(())
}

/// clap's message for `e`, without its trailing hint and colours.
pub(crate) fn usage(e: &clap::Error) -> ConfigError {
    let text = e.render().to_string();
    let text = text.trim_end();
    let text = text.strip_prefix("error: ").unwrap_or(text);
    ConfigError::Usage(text.to_owned())
}

impl ServeArgs {
    /// The configuration these options and the environment (`env`: `TASKSTREAM_DATA_DIR`,
    /// `XDG_DATA_HOME`, `HOME`, `TASKSTREAM_PRINCIPAL`) say.
    ///
    /// # Errors
    /// [`ConfigError::NoDataDir`] when a data dir is needed and none can be derived;
    /// [`ConfigError::BadPrincipal`] for a `TASKSTREAM_PRINCIPAL` that is not a name.
    pub fn resolve(
        self,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<ServeConfig, ConfigError> {
        let narrow = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let principal = match self.principal {
            Some(p) => p,
            None => match env("TASKSTREAM_PRINCIPAL") {
                Some(p) if !p.is_empty() => p
                    .to_str()
                    .and_then(|s| name(s).ok())
                    .ok_or_else(|| ConfigError::BadPrincipal(p.to_string_lossy().into_owned()))?,
                _ => DEFAULT_PRINCIPAL.to_owned(),
            },
        };
        let max_message_bytes = narrow(self.max_message_bytes);
        let oauth = self.oauth_issuer.map(|issuer| OAuthConfig {
            issuer,
            resource: self.oauth_resource.unwrap_or_default(),
            scopes: self.oauth_scope,
            principal_claim: self.oauth_principal_claim,
        });
        let data_dir = match (self.in_memory || self.store.is_some(), self.data_dir) {
            (true, _) => None,
            (false, Some(dir)) => Some(dir),
            (false, None) => Some(default_data_dir(&env)?),
        };
        Ok(ServeConfig {
            data_dir,
            retention: RetentionPolicy {
                max_events: u32::try_from(self.max_events_per_task).unwrap_or(u32::MAX),
                max_event_age: Millis::from_secs(self.max_event_age),
                terminal_retention: Millis::from_secs(self.terminal_retention),
                max_payload_bytes: u32::try_from(self.max_payload_bytes).unwrap_or(u32::MAX),
                retain_from_checkpoint: self.retain_from_checkpoint,
                ..RetentionPolicy::DEFAULT
            },
            max_store_bytes: self.max_store_bytes,
            index_cache_bytes: self.index_cache_mib << 20,
            max_message_bytes,
            max_streams: narrow(self.max_streams),
            max_running_tasks: narrow(self.max_running_tasks),
            max_failed_lookups_per_minute: u32::try_from(self.max_failed_lookups_per_minute)
                .unwrap_or(u32::MAX),
            principal,
            durability: self.durability,
            max_total_running_tasks: narrow(self.max_total_running_tasks),
            metrics_addr: self.metrics_addr,
            http: self.http.map(|bind| HttpConfig {
                bind,
                drain: std::time::Duration::from_secs(self.drain_secs),
                status_page: !self.no_status_page,
                auth_token_file: self.auth_token_file,
                oauth,
                allowed_origins: self.allowed_origin,
                max_body_bytes: self.max_body_bytes.map_or(max_message_bytes, narrow),
                max_sessions: narrow(self.max_sessions),
                limits: HttpLimits {
                    max_principal_streams: narrow(self.max_principal_streams),
                    max_connections: narrow(self.max_connections),
                    header_timeout: std::time::Duration::from_secs(self.header_timeout),
                    body_timeout: std::time::Duration::from_secs(self.body_timeout),
                    idle_timeout: std::time::Duration::from_secs(self.idle_timeout),
                    write_stall_timeout: std::time::Duration::from_secs(self.write_stall_timeout),
                    max_body_memory_bytes: narrow(self.max_body_memory_bytes),
                },
            }),
            socket: self.socket.then_some(SocketConfig {
                idle_exit_secs: self.idle_exit,
                detach: self.detach,
            }),
            store_url: self.store,
            lease_timeout: std::time::Duration::from_secs(self.lease_timeout),
            store_pool: usize::try_from(self.store_pool).unwrap_or(usize::MAX),
            store_writers: usize::try_from(self.store_writers).unwrap_or(usize::MAX),
            store_cache_bytes: usize::try_from(self.store_cache_mb.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
        })
    }
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

fn postgres_url(v: &str) -> Result<String, String> {
    if v.starts_with("postgres://") || v.starts_with("postgresql://") {
        Ok(v.to_owned())
    } else {
        Err("expected a postgres:// or postgresql:// URL".to_owned())
    }
}

/// A principal, bind address or origin: non-empty UTF-8 without control characters.
fn name(v: &str) -> Result<String, String> {
    if !v.is_empty() && !v.chars().any(char::is_control) {
        Ok(v.to_owned())
    } else {
        Err("expected a non-empty name without control characters".to_owned())
    }
}

fn durability(mode: &str) -> Durability {
    match mode {
        "event" => Durability::Event,
        "none" => Durability::None,
        _ => Durability::Group,
    }
}

#[cfg(test)]
mod tests;
