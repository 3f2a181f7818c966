//! `taskstream gateway [serve options] -- CMD [ARGS...]`: taskstream in front of any stdio MCP
//! server. Each of `CMD`'s tools is offered as a tool of the gateway ([`taskstream_server::tool`]), so a
//! call the client makes as a task becomes a durable task with a resumable event stream; the
//! other requests (resources, prompts, completion, logging level) are passed on.
//!
//! A call runs as a plain `tools/call` to `CMD` with a `progressToken` of the gateway's; what
//! `CMD` sends about it is recorded as the task's events:
//! - `notifications/progress` for that token → `dev.taskstream.progress`
//!   `{progress, total?, message?}`;
//! - `notifications/message` while the call is the only one in flight at `CMD` →
//!   `dev.taskstream.log` with the message's params (`{level, logger?, data}`); stdio gives no
//!   other way to tie a log message to a call, so with several calls in flight they are not
//!   recorded;
//! - `notifications/tasks/event` while the call is the only one in flight → kept as it is
//!   (type and payload).
//!
//! `CMD`'s result, once checked to be a `CallToolResult`, is the task's result; an error
//! answer, a result that is not a `CallToolResult`, or `CMD` exiting during the call end the
//! task `failed` with a status message that says which. `tasks/cancel` sends
//! `notifications/cancelled` for the inner call. `CMD` is started again for the next call
//! after it exits; its tool list is the one read at the gateway's start.
//!
//! A request `CMD` makes of its client (sampling, elicitation, roots) while one call is in
//! flight is that call's: it asks as any tool does ([`TaskContext::ask`]): a 2026-07-28 task
//! becomes `input_required` until `tasks/update` answers, a 2025-11-25 task asks a 2025-11-25
//! session of its principal, a plain call its own client if that is a 2025-11-25 session;
//! each waits up to `--input-timeout`. With no call or several in flight the request goes to
//! the gateway's most recent 2025-11-25 session on stdio (`Process::ask_client`). Where no
//! client can answer, `CMD` gets an error saying so.

mod child;
mod log;

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};

use taskstream_server::config;
use taskstream_server::tool::{
    check_result, error_message, AskError, Handler, TaskContext, Tool, ToolError, ToolResult,
};
use taskstream_server::{Forward, Process, ServerBuilder};

use crate::log::log;
use child::{error, CallMessage, ChildServer, Relay, INNER_VERSION};

/// The event type of a log message tied to a call.
pub const LOG_TYPE: &str = "dev.taskstream.log";

/// What a client is told when `CMD` cannot be started again (the log has the details, which
/// name the host's paths and errors).
const NOT_STARTED: &str =
    "the server behind the gateway could not be started again (the gateway's log says why)";

/// The default of `--inner-timeout`.
const DEFAULT_INNER_TIMEOUT_SECS: u64 = 30;
/// The default of `--input-timeout`.
const DEFAULT_INPUT_TIMEOUT_SECS: u64 = 600;

/// The gateway's help.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream gateway",
    about = "taskstream in front of a stdio MCP server",
    long_about = "taskstream in front of a stdio MCP server.\n\n\
        Starts CMD (any stdio MCP server), offers its tools and passes its other requests on. A \
        tool call the client makes as a task becomes a durable task of the gateway with a \
        resumable event stream: CMD's progress notifications become dev.taskstream.progress \
        events, log messages tied to the call dev.taskstream.log events, and CMD's result the \
        task's result. The serve options apply to the gateway: data dir or --in-memory, \
        retention, limits, --durability, --principal, --http.",
    override_usage = "taskstream gateway [serve options] [--inner-timeout SECS] [--input-timeout SECS] -- CMD [ARGS...]",
    disable_version_flag = true,
    args_override_self = true
)]
struct GatewayCli {
    /// How long CMD may take to answer initialize, tools/list and passed-on requests (not tool
    /// calls, which may run for as long as they need)
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_INNER_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    inner_timeout: u64,
    /// How long a request CMD makes of its client during a call (sampling, elicitation, roots)
    /// waits for the client's answer; a 2026-07-28 task is input_required meanwhile
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_INPUT_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    input_timeout: u64,
    #[command(flatten)]
    serve: config::ServeArgs,
    /// The stdio MCP server to stand in front of, and its arguments
    #[arg(last = true, required = true, value_name = "CMD [ARGS...]")]
    command: Vec<OsString>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The inner server, started again after it exits.
struct Gateway {
    cmd: String,
    args: Vec<String>,
    timeout: Duration,
    /// How long a call's request of its client waits for the answer.
    input_timeout: Duration,
    current: Mutex<Option<Arc<ChildServer>>>,
    tokens: AtomicU64,
    /// The gateway's process, once it runs: where `CMD`'s requests of a client go.
    process: Arc<OnceLock<Weak<Process>>>,
}

impl Gateway {
    /// Relays a request `CMD` makes of its client to a client of the gateway.
    fn relay(&self) -> Relay {
        let process = Arc::clone(&self.process);
        let timeout = self.timeout;
        Arc::new(move |method: &str, params: Value| {
            let shown: String = method.chars().take(64).collect();
            match process.get().and_then(Weak::upgrade) {
                Some(p) => p.ask_client(None, method, params, timeout),
                None => Err(error(format!(
                    "taskstream gateway is still starting and cannot relay {shown} to a client"
                ))),
            }
        })
    }
}

impl Gateway {
    /// The running `CMD`, started (and initialized) if it is not running.
    ///
    /// # Errors
    /// Why it could not be started or initialized.
    fn inner(&self) -> Result<(Arc<ChildServer>, Option<Value>), String> {
        let mut current = lock(&self.current);
        if let Some(i) = current.as_ref().filter(|i| i.is_alive()) {
            return Ok((Arc::clone(i), None));
        }
        if current.is_some() {
            log!(Info, "starting the inner server again");
        }
        let inner = ChildServer::spawn(&self.cmd, &self.args, self.relay())?;
        let init = inner.request(
            "initialize",
            json_map(json!({
                "protocolVersion": INNER_VERSION,
                "capabilities": {},
                "clientInfo": { "name": "taskstream-gateway", "version": env!("CARGO_PKG_VERSION") },
            })),
            self.timeout,
        );
        let init = match init {
            Ok(r) if r.is_object() => r,
            Ok(_) => {
                inner.kill();
                return Err(
                    "the inner server answered initialize with something that is not an object"
                        .into(),
                );
            }
            Err(e) => {
                inner.kill();
                return Err(format!(
                    "the inner server did not initialize: {}",
                    error_message(&e)
                ));
            }
        };
        inner.notify("notifications/initialized", json!({}));
        *current = Some(Arc::clone(&inner));
        Ok((inner, Some(init)))
    }

    /// Every tool `CMD` lists (following `nextCursor`).
    fn list_tools(&self, inner: &ChildServer) -> Result<Vec<Map<String, Value>>, String> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..1000 {
            let mut params = Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let page = inner
                .request("tools/list", params, self.timeout)
                .map_err(|e| format!("tools/list failed: {}", error_message(&e)))?;
            let Some(list) = page.get("tools").and_then(Value::as_array) else {
                return Err("the inner server's tools/list result has no tools array".into());
            };
            for t in list {
                match t.as_object() {
                    Some(def) if def.get("name").is_some_and(Value::is_string) => {
                        tools.push(def.clone());
                    }
                    _ => log!(
                        Warn,
                        "the inner server listed a tool without a name; left out"
                    ),
                }
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err("the inner server's tools/list pages never end".into())
    }

    /// Runs one tool call through `CMD`.
    fn call(
        &self,
        ctx: &mut TaskContext<'_>,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<ToolResult, ToolError> {
        let (inner, _) = self.inner().map_err(|e| {
            log!(Error, "gateway: {e}");
            ToolError::failed(NOT_STARTED)
        })?;
        let token = format!("taskstream-{}", self.tokens.fetch_add(1, Ordering::Relaxed));
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_owned()));
        params.insert("arguments".into(), Value::Object(args.clone()));
        let pending = inner.send("tools/call", params, Some(token));
        // At the moment of cancellation the call stops being routed (so that log messages are
        // tied to the calls still in flight); the loop below tells CMD.
        let routes = Arc::clone(&inner);
        let id = pending.id;
        ctx.on_cancel(move || routes.forget(id));
        let in_task = ctx.task_id().is_some();
        let outcome = loop {
            let msg = match pending.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => m,
                // Routing stops at cancellation (above), and the channel with it.
                Err(_) if ctx.is_cancelled() => {
                    inner.forget(pending.id);
                    inner.notify(
                        "notifications/cancelled",
                        json!({"requestId": pending.id, "reason": "the task was cancelled"}),
                    );
                    break Err(ToolError::Cancelled);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(ToolError::failed(
                        "the server behind the gateway stopped routing the call",
                    ))
                }
            };
            let recorded = match msg {
                CallMessage::Progress {
                    progress,
                    total,
                    message,
                } => ctx.progress(progress, total, message.as_deref()),
                CallMessage::Log(params) if in_task => {
                    ctx.emit(LOG_TYPE, &Value::Object(params)).map(|_| ())
                }
                CallMessage::Event {
                    event_type,
                    payload,
                } if in_task => ctx.emit(&event_type, &payload).map(|_| ()),
                CallMessage::Log(_) | CallMessage::Event { .. } => Ok(()),
                CallMessage::Ask { id, method, params } => {
                    let answer = match ctx.ask(&method, params, self.input_timeout) {
                        Ok(result) => Ok(result),
                        Err(AskError::Refused(e)) => Err(e),
                        Err(e) => Err(error(e.to_string())),
                    };
                    inner.reply(&id, answer);
                    Ok(())
                }
                CallMessage::Answer(Ok(result)) => {
                    break match check_result(&result) {
                        Ok(()) => ToolResult::from_value(result)
                            .map_err(|e| ToolError::failed(e.to_string())),
                        Err(e) => Err(ToolError::failed(format!(
                            "the server behind the gateway returned a result that is {e}"
                        ))),
                    };
                }
                CallMessage::Answer(Err(e)) => {
                    break Err(ToolError::failed(format!(
                        "the server behind the gateway answered the call with an error: {}",
                        error_message(&e)
                    )));
                }
                CallMessage::Died(status) => {
                    break Err(ToolError::failed(format!(
                        "the server behind the gateway exited during the call ({status}); \
                         the next call starts it again"
                    )));
                }
            };
            if let Err(e) = recorded {
                inner.forget(pending.id);
                if !matches!(e, ToolError::Cancelled) {
                    inner.notify(
                        "notifications/cancelled",
                        json!({"requestId": pending.id, "reason": "the gateway could not record the call"}),
                    );
                }
                break Err(e);
            }
        };
        outcome
    }
}

/// The gateway's passing-on of other requests.
struct Passer {
    gateway: Arc<Gateway>,
}

/// The requests passed on to `CMD`.
const FORWARDED: [&str; 9] = [
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

impl Forward for Passer {
    fn handles(&self, method: &str) -> bool {
        FORWARDED.contains(&method) || method == "notifications/roots/list_changed"
    }

    fn request(&self, method: &str, params: Map<String, Value>) -> Result<Value, Value> {
        let (inner, _) = self.gateway.inner().map_err(|e| {
            log!(Error, "gateway: {e}");
            error(NOT_STARTED.into())
        })?;
        inner.request(method, params, self.gateway.timeout)
    }

    fn notify(&self, method: &str, params: Map<String, Value>) {
        if let Ok((inner, _)) = self.gateway.inner() {
            inner.notify(method, Value::Object(params));
        }
    }

    fn attach(&self, process: &Arc<Process>) {
        let _ = self.gateway.process.set(Arc::downgrade(process));
    }
}

fn json_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `taskstream gateway ARGS`.
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let argv = std::iter::once(OsString::from("gateway")).chain(args);
    let parsed = GatewayCli::command()
        .try_get_matches_from(argv)
        .and_then(|m| GatewayCli::from_arg_matches(&m).map(|cli| (m, cli)));
    let cli = match parsed {
        Ok((matches, cli)) => {
            if let Err(e) = config::check_requirements(&matches) {
                eprintln!("taskstream gateway: {e}");
                return ExitCode::from(2);
            }
            cli
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let config = match cli.serve.resolve(|k| std::env::var_os(k)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("taskstream gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let mut command = cli.command.iter().map(|a| a.to_string_lossy().into_owned());
    let Some(cmd) = command.next() else {
        eprintln!("taskstream gateway: no CMD after `--`");
        return ExitCode::from(2);
    };
    let (timeout, input_timeout) = (cli.inner_timeout, cli.input_timeout);
    let gateway = Arc::new(Gateway {
        cmd,
        args: command.collect(),
        timeout: Duration::from_secs(timeout),
        input_timeout: Duration::from_secs(input_timeout),
        current: Mutex::new(None),
        tokens: AtomicU64::new(0),
        process: Arc::new(OnceLock::new()),
    });
    let (inner, init) = match gateway.inner() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("taskstream gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    let init = init.unwrap_or_default();
    let tools = match gateway.list_tools(&inner) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("taskstream gateway: {e}");
            inner.kill();
            return ExitCode::FAILURE;
        }
    };
    drop(inner);
    log!(
        Info,
        "gateway: the inner server offers {} tools",
        tools.len()
    );
    let inner_caps = init.get("capabilities").and_then(Value::as_object);
    let mut capabilities = Map::new();
    for key in ["resources", "prompts", "logging", "completions"] {
        if let Some(v) = inner_caps.and_then(|c| c.get(key)) {
            capabilities.insert(key.into(), v.clone());
        }
    }
    let name = init
        .get("serverInfo")
        .and_then(|i| i.get("name"))
        .and_then(Value::as_str)
        .map_or_else(
            || "taskstream gateway".to_owned(),
            |n| format!("taskstream gateway: {n}"),
        );
    let mut instructions = String::from(
        "Each tool runs as a durable task when asked to; follow a task's events with \
         tasks/stream (SEP-2694), resuming with `after` = the last seq you processed.",
    );
    if let Some(i) = init.get("instructions").and_then(Value::as_str) {
        instructions.push_str("\n\n");
        instructions.push_str(i);
    }
    let mut builder = ServerBuilder::new(name, env!("CARGO_PKG_VERSION"))
        .config(config)
        .instructions(instructions)
        .capabilities(capabilities)
        .forward(Arc::new(Passer {
            gateway: Arc::clone(&gateway),
        }));
    for mut def in tools {
        def.remove("execution");
        let name = def
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let g = Arc::clone(&gateway);
        let handler: Arc<Handler> = Arc::new(
            move |ctx: &mut TaskContext<'_>, args: &Map<String, Value>| g.call(ctx, &name, args),
        );
        builder = builder.tool(Tool::relayed(def, handler));
    }
    let served = builder.serve();
    if let Some(i) = lock(&gateway.current).take() {
        i.stop();
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskstream gateway: {e}");
            ExitCode::FAILURE
        }
    }
}
