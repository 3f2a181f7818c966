//! [`ServerBuilder`]: an MCP server of your own tools, with everything `taskstream serve` does.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{self, ServeCommand, ServeConfig};
use crate::error::ServeError;
use crate::process::{Extra, Forward, Process};
use crate::tool::{Registry, Tool};
#[cfg(feature = "postgres")]
use taskstream_store::{PgConfig, PgStore};
use taskstream_store::{Store, StoreConfig, TaskStore};

/// Builds and runs an MCP server whose tools are yours (see [`crate::tool`]): both protocol
/// eras, Tasks, `tasks/stream` with retention and `events_gone`, events durable before any
/// client sees them, and recovery after a crash (a task that was running ends `failed` at the
/// next start) come with it.
///
/// It takes the options of `taskstream serve`: [`args`](Self::args) parses them (data dir or
/// `--in-memory`, retention, limits, `--durability`, `--principal`, `--http` with its
/// authentication options), or set a [`ServeConfig`] with [`config`](Self::config).
///
/// ```no_run
/// use serde_json::json;
/// use taskstream_server::tool::{Tool, ToolResult};
/// use taskstream_server::ServerBuilder;
///
/// fn main() -> std::process::ExitCode {
///     let hello = Tool::new("hello", "Greets, slowly", json!({"type": "object"}), |ctx, _| {
///         for word in ["hello", "world"] {
///             ctx.emit("com.example.hello.word", &json!({ "word": word }))?;
///             ctx.sleep(std::time::Duration::from_millis(100))?;
///         }
///         Ok(ToolResult::text("hello, world"))
///     });
///     // `my-server --data-dir DIR`, `my-server --in-memory --http 127.0.0.1:8080`, …
///     ServerBuilder::new("my-server", "0.1.0").tool(hello).main()
/// }
/// ```
pub struct ServerBuilder {
    config: ServeConfig,
    tools: Vec<Tool>,
    builtin: bool,
    name: String,
    version: String,
    instructions: Option<String>,
    capabilities: Map<String, Value>,
    forward: Option<Arc<dyn Forward>>,
}

/// Why [`ServerBuilder::args`] refused the command line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// `--help` was asked for: print [`config::serve_help`].
    #[error("help was asked for")]
    Help,
    /// A bad option.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
}

impl ServerBuilder {
    /// A server called `name` (its `serverInfo`), in memory with the defaults of
    /// `taskstream serve`, and no tools yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder {
            config: ServeConfig::in_memory(),
            tools: Vec::new(),
            builtin: false,
            name: name.into(),
            version: version.into(),
            instructions: None,
            capabilities: Map::new(),
            forward: None,
        }
    }

    /// Adds a tool (a later tool of the same name replaces an earlier one).
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> ServerBuilder {
        self.tools.push(tool);
        self
    }

    /// Adds `taskstream serve`'s own tools, `emit` and `run_trace` (docs/interface.md).
    #[must_use]
    pub fn builtin_tools(mut self) -> ServerBuilder {
        self.builtin = true;
        self
    }

    /// What the server tells a host about itself (`instructions`).
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> ServerBuilder {
        self.instructions = Some(text.into());
        self
    }

    /// Replaces the configuration.
    #[must_use]
    pub fn config(mut self, config: ServeConfig) -> ServerBuilder {
        self.config = config;
        self
    }

    /// The configuration, to change one setting.
    pub fn config_mut(&mut self) -> &mut ServeConfig {
        &mut self.config
    }

    /// Takes the options of `taskstream serve` from `args` (without the program name), with
    /// the environment (`TASKSTREAM_DATA_DIR`, `TASKSTREAM_PRINCIPAL`, …) as `serve` reads it.
    ///
    /// # Errors
    /// [`ArgsError::Help`] for `--help`; [`ArgsError::Config`] naming a bad option.
    pub fn args(
        mut self,
        args: impl IntoIterator<Item = OsString>,
    ) -> Result<ServerBuilder, ArgsError> {
        match config::parse_serve(args, |k| std::env::var_os(k)) {
            Ok(ServeCommand::Run(c)) => {
                self.config = *c;
                Ok(self)
            }
            Ok(ServeCommand::Help) => Err(ArgsError::Help),
            Err(e) => Err(ArgsError::Config(e)),
        }
    }

    /// Capabilities beyond `tools` and `tasks` that `initialize` and `server/discover`
    /// declare (`resources`, `prompts`, `logging`, `completions`, …): for a server that
    /// answers those requests through a [`Forward`] (the gateway relays another server's).
    /// They never replace `tools`, `tasks` or `extensions`.
    #[must_use]
    pub fn capabilities(mut self, caps: Map<String, Value>) -> ServerBuilder {
        self.capabilities = caps;
        self
    }

    /// Where the requests and notifications that this server does not answer itself go, for
    /// the methods that `forward` [`handles`](Forward::handles) (the gateway passes them to
    /// the server behind it).
    #[must_use]
    pub fn forward(mut self, forward: Arc<dyn Forward>) -> ServerBuilder {
        self.forward = Some(forward);
        self
    }

    /// Opens the store and starts the process (its tasks, its retention sweep).
    ///
    /// # Errors
    /// A message saying why the store could not be opened or a thread not started.
    fn start(self) -> Result<Arc<Process>, String> {
        let mut tools = Vec::new();
        if self.builtin {
            tools.extend(crate::workloads::builtin(u64::from(
                self.config.retention.max_payload_bytes,
            )));
        }
        tools.extend(self.tools);
        let mut extra = Extra::builtin();
        if !self.builtin || self.name != "taskstream" {
            extra.identity.server_info =
                serde_json::json!({ "name": self.name, "version": self.version });
            let text = self.instructions.unwrap_or_else(|| {
                "Tools run as tasks when asked to; follow a task's events with tasks/stream \
                 (SEP-2694), resuming with `after` = the last seq you processed."
                    .into()
            });
            extra.identity.instructions = (text.clone(), text);
        }
        extra.identity.capabilities = self.capabilities;
        if self.config.retention.retain_from_checkpoint {
            advertise_checkpoints(&mut extra.identity.capabilities);
        }
        extra.forward = self.forward;
        let store: Arc<dyn TaskStore> = match &self.config.store_url {
            #[cfg(feature = "postgres")]
            Some(url) => Arc::new(open_pg(&self.config, url)?),
            #[cfg(not(feature = "postgres"))]
            Some(_) => {
                return Err(
                    "this server was built without the PostgreSQL store (the feature \
                            `postgres` of taskstream-server)"
                        .to_owned(),
                )
            }
            None => Arc::new(open_store(&self.config)?),
        };
        Process::start_with(self.config, store, Registry::new(tools), extra)
            .map_err(|e| format!("starting a thread: {e}"))
    }

    /// Serves as configured: Streamable HTTP with `--http`, the data dir's socket with
    /// `--socket`, else stdio (until stdin ends).
    ///
    /// # Errors
    /// [`ServeError`] saying why the server could not start or stopped.
    pub fn serve(self) -> Result<(), ServeError> {
        let http = self.config.http.clone();
        let socket = self.config.socket.zip(self.config.data_dir.clone());
        let process = self.start().map_err(ServeError::Start)?;
        if let Some(addr) = &process.config.metrics_addr {
            crate::http::serve_ops(Arc::clone(&process), addr)?;
        }
        if let Some((socket, dir)) = socket {
            if socket.detach {
                // Away from the terminal and the process group of whoever started it.
                let _ = rustix::process::setsid();
            }
            let idle = (socket.idle_exit_secs > 0)
                .then(|| std::time::Duration::from_secs(socket.idle_exit_secs));
            return crate::socket::serve_socket(process, &dir, idle);
        }
        if let Some(http) = http {
            return crate::http::serve_http(process, &http);
        }
        crate::stdio::serve_process(
            process,
            std::io::stdin().lock(),
            Box::new(std::io::stdout()),
        )
    }

    /// Serves one connection over `input` and `output` (newline-delimited JSON-RPC, as on
    /// stdio) until `input` ends; then the process stops (running tasks end `failed` at the
    /// next start on the same data dir). For tests and for transports of your own.
    ///
    /// # Errors
    /// [`ServeError`] saying why the server could not start or stopped.
    pub fn serve_io(
        self,
        input: impl std::io::Read,
        output: Box<dyn std::io::Write + Send>,
    ) -> Result<(), ServeError> {
        let process = self.start().map_err(ServeError::Start)?;
        crate::stdio::serve_process(process, input, output)
    }

    /// The whole `main` of a server: takes `serve`'s options from the process's arguments,
    /// prints help or a bad option's error, serves, and says how it ended. It installs the
    /// stderr log subscriber first ([`crate::log::init`]; `--log-format text|json`), with
    /// OpenTelemetry traces when `--otlp-endpoint URL` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
    /// ([`crate::otel`]), flushed when the server has stopped.
    pub fn main(self) -> ExitCode {
        let program = std::env::args().next().unwrap_or_else(|| self.name.clone());
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let format = crate::log::take_format(&mut args);
        let otlp = crate::otel::take_endpoint(&mut args);
        match (format, otlp) {
            (Ok(format), Ok(otlp)) => crate::log::init_traced(format, otlp.as_ref()),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{program}: {e}");
                return ExitCode::from(2);
            }
        }
        match self.args(args) {
            Ok(b) => {
                let served = b.serve();
                crate::otel::shutdown();
                match served {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("{program}: {e}");
                        ExitCode::FAILURE
                    }
                }
            }
            Err(ArgsError::Help) => {
                print!("{}", config::serve_help());
                ExitCode::SUCCESS
            }
            Err(ArgsError::Config(e)) => {
                eprintln!("{program}: {e}");
                ExitCode::from(2)
            }
        }
    }
}

/// Connects to the PostgreSQL store (`--store`), migrating its schema, and says so on stderr.
///
/// # Errors
/// Why it could not be opened.
#[cfg(feature = "postgres")]
pub(super) fn open_pg(config: &ServeConfig, url: &str) -> Result<PgStore, String> {
    let store = PgStore::open(PgConfig {
        url: url.to_owned(),
        retention: config.retention,
        lease_timeout: config.lease_timeout,
        pool_size: config.store_pool,
        writers: config.store_writers,
        cache_bytes: config.store_cache_bytes,
    })
    .map_err(|e| format!("cannot open the store: {e}"))?;
    eprintln!(
        "taskstream: store {} (PostgreSQL), replica {}",
        store.target(),
        store.replica_id()
    );
    Ok(store)
}

/// Opens the data dir `config` describes, reporting on stderr what recovery found.
///
/// # Errors
/// Why it could not be opened.
pub fn open_store(config: &ServeConfig) -> Result<Store, String> {
    // The store creates a missing data dir itself, owner-only (0700); creating it here first
    // would leave it with the umask's mode.
    let store = Store::open(store_config(config), taskstream_store::clock::now())
        .map_err(|e| format!("cannot open the store: {e}"))?;
    let report = store.recovery();
    for w in &report.warnings {
        eprintln!("taskstream: warning: {w}");
    }
    if let Some(torn) = &report.torn_tail {
        eprintln!(
            "taskstream: cut a torn write off the log ({} at offset {}: {})",
            torn.segment.display(),
            torn.offset,
            torn.error
        );
    }
    Ok(store)
}

/// The store's part of `config`.
#[must_use]
pub(crate) fn store_config(config: &ServeConfig) -> StoreConfig {
    StoreConfig {
        data_dir: config.data_dir.clone(),
        durability: config.durability,
        retention: config.retention,
        max_store_bytes: config.max_store_bytes,
        index_cache_bytes: config.index_cache_bytes,
    }
}

/// The key under `capabilities.experimental` that says the server retains from checkpoints
/// (`--retain-from-checkpoint`, rules CP-01..CP-04): its earliest retained event is always a
/// `dev.taskstream.checkpoint` once a task has appended one.
pub(crate) const CHECKPOINTS_CAPABILITY: &str = "dev.taskstream/checkpoints";

/// Adds `experimental["dev.taskstream/checkpoints"]` to `caps`, beside whatever experimental
/// capabilities are already there (a gateway's relayed ones).
fn advertise_checkpoints(caps: &mut Map<String, Value>) {
    let entry = caps
        .entry("experimental")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(experimental) = entry {
        experimental.insert(
            CHECKPOINTS_CAPABILITY.to_owned(),
            serde_json::json!({
                "eventType": "dev.taskstream.checkpoint",
                "retainFromCheckpoint": true,
            }),
        );
    }
}

#[cfg(test)]
mod checkpoint_capability {
    use super::*;

    #[test]
    fn joins_the_experimental_capabilities_already_there() {
        let mut caps = Map::new();
        caps.insert("experimental".into(), serde_json::json!({ "relayed": {} }));
        advertise_checkpoints(&mut caps);
        let experimental = &caps["experimental"];
        assert!(experimental.get("relayed").is_some());
        assert_eq!(
            experimental[CHECKPOINTS_CAPABILITY]["eventType"],
            "dev.taskstream.checkpoint"
        );
        let mut empty = Map::new();
        advertise_checkpoints(&mut empty);
        assert_eq!(
            empty["experimental"][CHECKPOINTS_CAPABILITY]["retainFromCheckpoint"],
            true
        );
    }
}
