//! [`Client`]: one MCP connection to a stdio server in either era, with the Tasks and
//! `tasks/stream` methods on top of it.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::conn::{self, Connection, Inbound};
use crate::error::{ClientError, Violation};
use crate::http::{self, HttpLink};
use crate::stream::EventStream;
use crate::types::{
    CallOutcome, Era, EraChoice, ServerInfo, TaskInfo, ToolInfo, LEGACY_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSION, TASKS_EXTENSION,
};

/// How a [`Client`] behaves; [`ClientOptions::default`] suits most hosts.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How to pick the era.
    pub era: EraChoice,
    /// The deadline of every request (not of streams; see
    /// [`StreamOptions`](crate::StreamOptions)).
    pub request_timeout: Duration,
    /// The deadline of the `server/discover` probe under [`EraChoice::Probe`]; after it the
    /// client falls back to `initialize`.
    pub probe_timeout: Duration,
    /// Longer incoming lines are skipped (and kept as an unsolicited marker).
    pub max_line_bytes: usize,
    /// `clientInfo.name`.
    pub client_name: String,
    /// How long [`Client::close`] and `Drop` wait for a spawned server to exit after its stdin
    /// is closed before killing it.
    pub exit_grace: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            era: EraChoice::Modern,
            request_timeout: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(3),
            max_line_bytes: 16 * 1024 * 1024,
            client_name: "taskstream-client".into(),
            exit_grace: Duration::from_secs(3),
        }
    }
}

/// An MCP client connection to a stdio server.
///
/// Every method that waits has a deadline. The client is `Sync`: several threads may issue
/// requests and follow streams of different tasks on one connection at once.
///
/// ```no_run
/// use std::process::Command;
/// use taskstream_client::{Client, ClientOptions};
///
/// let mut cmd = Command::new("taskstream");
/// cmd.args(["serve", "--in-memory"]);
/// let client = Client::spawn(cmd, ClientOptions::default())?;
/// let task = client.start_task("emit", serde_json::json!({"count": 3}))?;
/// let mut stream = client.open_stream(&task.task_id, None)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Client {
    conn: Connection,
    /// The HTTP transport, for a client made by [`Client::connect_http`].
    http: Option<HttpLink>,
    child: Mutex<Option<Child>>,
    info: ServerInfo,
    options: ClientOptions,
}

impl Client {
    /// Spawns `command` with piped stdin and stdout (stderr is left as the command says) and
    /// connects to it.
    ///
    /// # Errors
    ///
    /// [`ClientError::Io`] if it cannot be spawned; any error of connecting (see
    /// [`Client::attach`]). The child is killed if connecting fails.
    pub fn spawn(mut command: Command, options: ClientOptions) -> Result<Client, ClientError> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ClientError::Io(std::io::Error::other(
                "the child has no piped stdin/stdout",
            )));
        };
        let conn = match Connection::new(Box::new(stdout), Box::new(stdin), options.max_line_bytes)
        {
            Ok(conn) => conn,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        match Self::handshake(&conn, &options) {
            Ok(info) => Ok(Client {
                conn,
                http: None,
                child: Mutex::new(Some(child)),
                info,
                options,
            }),
            Err(e) => {
                conn.close_writer();
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// Connects over an existing pair: `reader` carries the server's output, `writer` its
    /// input (a socket pair, a pipe to a process the caller manages, an in-memory fake).
    /// Closing or dropping the client drops `writer`; its reader thread ends when `reader`
    /// reaches end of file.
    ///
    /// # Errors
    ///
    /// The errors of `server/discover` (modern) or `initialize` (legacy); under
    /// [`EraChoice::Probe`] only the legacy fallback's errors.
    pub fn attach(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let conn = Connection::new(Box::new(reader), Box::new(writer), options.max_line_bytes)?;
        let info = Self::handshake(&conn, &options)?;
        Ok(Client {
            conn,
            http: None,
            child: Mutex::new(None),
            info,
            options,
        })
    }

    /// Connects to a Streamable HTTP endpoint (`http://HOST:PORT/mcp`) in the 2026-07-28 era:
    /// each request is one stateless `POST` carrying `Mcp-Method` (and `Mcp-Name`), with
    /// `Authorization: Bearer TOKEN` when `token` is given; a `tasks/stream` is read from its
    /// `text/event-stream` response, and cancelling it closes that response (the task runs on).
    /// Everything else (routing, deadlines, [`EventStream`], resuming) is as on stdio.
    ///
    /// A request that cannot be sent (the server unreachable) fails with [`ClientError::Io`];
    /// a failure after it was sent (a response cut short) ends the client as a broken pipe
    /// ends a stdio one: make a new client to reconnect.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unsupported`] for a URL other than `http://…`, a token with spaces, or
    /// [`EraChoice::Legacy`] (2025-11-25 sessions are not spoken here); the errors of
    /// `server/discover`, [`ClientError::Io`] when the server cannot be reached.
    pub fn connect_http(
        url: &str,
        token: Option<&str>,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        if options.era == EraChoice::Legacy {
            return Err(ClientError::Unsupported {
                what: "the HTTP transport speaks 2026-07-28 only (no 2025-11-25 sessions)".into(),
            });
        }
        let (inbox, writer, link) =
            http::open(url, token, options.request_timeout, options.max_line_bytes)?;
        let conn = Connection::new(Box::new(inbox), Box::new(writer), options.max_line_bytes)?;
        let info = Self::discover(&conn, &options, options.request_timeout)?;
        Ok(Client {
            conn,
            http: Some(link),
            child: Mutex::new(None),
            info,
            options,
        })
    }

    /// Cuts an HTTP client's connection as a network failure would: every open response
    /// (streams included) is closed without cancelling anything, and every waiter, now and
    /// later, gets [`ClientError::Closed`]. The server is not told; its tasks run on. For
    /// exercising reconnects (make a new client and resume with the persisted cursor).
    ///
    /// # Errors
    ///
    /// [`ClientError::Unsupported`] for a stdio client (closing a stdio server's pipes ends it).
    pub fn sever(&self) -> Result<(), ClientError> {
        let Some(link) = &self.http else {
            return Err(ClientError::Unsupported {
                what: "sever: only an HTTP client can lose its connection and keep its server"
                    .into(),
            });
        };
        link.sever();
        self.conn.wait_reader(self.options.exit_grace);
        Ok(())
    }

    fn handshake(conn: &Connection, options: &ClientOptions) -> Result<ServerInfo, ClientError> {
        match options.era {
            EraChoice::Modern => Self::discover(conn, options, options.request_timeout),
            EraChoice::Legacy => Self::initialize(conn, options),
            EraChoice::Probe => match Self::discover(conn, options, options.probe_timeout) {
                Ok(info) => Ok(info),
                // A closed connection will not answer `initialize` either.
                Err(e @ ClientError::Closed { .. }) => Err(e),
                // A recognised modern refusal: the server is modern but not for our version.
                Err(ClientError::Rpc { error, .. }) if error.code == -32022 => {
                    Err(ClientError::Unsupported {
                        what: format!("protocol version {MODERN_PROTOCOL_VERSION}: {error}"),
                    })
                }
                Err(_) => Self::initialize(conn, options),
            },
        }
    }

    fn modern_meta(options: &ClientOptions, declare_tasks: bool) -> Value {
        let capabilities = if declare_tasks {
            json!({"extensions": {TASKS_EXTENSION: {}}})
        } else {
            json!({})
        };
        json!({
            "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo":
                {"name": options.client_name, "version": env!("CARGO_PKG_VERSION")},
        })
    }

    fn discover(
        conn: &Connection,
        options: &ClientOptions,
        timeout: Duration,
    ) -> Result<ServerInfo, ClientError> {
        let params = json!({"_meta": Self::modern_meta(options, true)});
        let result = conn.request("server/discover", params, timeout)?;
        let supported = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .ok_or_else(|| Violation::BadResult {
                method: "server/discover".into(),
                detail: "no supportedVersions array".into(),
            })?;
        if !supported
            .iter()
            .any(|v| v.as_str() == Some(MODERN_PROTOCOL_VERSION))
        {
            return Err(ClientError::Unsupported {
                what: format!("server supports {supported:?}, not {MODERN_PROTOCOL_VERSION}"),
            });
        }
        let capabilities = result.get("capabilities").cloned().unwrap_or(json!({}));
        // Inside the Tasks extension (as SEP-2694 words it) or beside it, as taskstream does.
        let extensions = capabilities.get("extensions");
        let event_streams = extensions
            .and_then(|e| e.get(TASKS_EXTENSION))
            .and_then(|t| t.get("eventStreams"))
            .is_some()
            || extensions
                .and_then(|e| e.get("dev.taskstream/event-streams"))
                .is_some();
        let name = result
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
            .and_then(|s| s.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(ServerInfo {
            era: Era::Modern,
            protocol_version: MODERN_PROTOCOL_VERSION.into(),
            name,
            capabilities,
            event_streams,
        })
    }

    fn initialize(conn: &Connection, options: &ClientOptions) -> Result<ServerInfo, ClientError> {
        let params = json!({
            "protocolVersion": LEGACY_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": options.client_name, "version": env!("CARGO_PKG_VERSION")},
        });
        let result = conn.request("initialize", params, options.request_timeout)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| Violation::BadResult {
                method: "initialize".into(),
                detail: "no protocolVersion".into(),
            })?;
        if version != LEGACY_PROTOCOL_VERSION && version != "2025-06-18" {
            return Err(ClientError::Unsupported {
                what: format!("server answered protocol version {version}"),
            });
        }
        conn.notify("notifications/initialized", json!({}))?;
        let capabilities = result.get("capabilities").cloned().unwrap_or(json!({}));
        let event_streams = capabilities
            .get("tasks")
            .and_then(|t| t.get("eventStreams"))
            .is_some();
        Ok(ServerInfo {
            era: Era::Legacy,
            protocol_version: version.to_owned(),
            name: result
                .get("serverInfo")
                .and_then(|s| s.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            capabilities,
            event_streams,
        })
    }

    /// The era of this connection.
    #[must_use]
    pub fn era(&self) -> Era {
        self.info.era
    }

    /// What the server said about itself.
    #[must_use]
    pub fn server_info(&self) -> &ServerInfo {
        &self.info
    }

    /// The options this client was made with.
    #[must_use]
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Params with the era's required members: in a modern connection `_meta` gets the
    /// protocol version, the client capabilities (declaring the Tasks extension when
    /// `declare_tasks`) and the client info.
    fn params(&self, params: Value, declare_tasks: bool) -> Value {
        let mut map = match params {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        if self.info.era == Era::Modern {
            let meta = Self::modern_meta(&self.options, declare_tasks);
            match map.get_mut("_meta") {
                Some(Value::Object(existing)) => {
                    if let Value::Object(required) = meta {
                        existing.extend(required);
                    }
                }
                _ => {
                    map.insert("_meta".into(), meta);
                }
            }
        }
        Value::Object(map)
    }

    /// Sends any request, with the era's `_meta` added (declaring the Tasks extension), and
    /// waits up to the request timeout.
    ///
    /// # Errors
    ///
    /// [`ClientError::Rpc`] for an error answer, [`ClientError::Timeout`], [`ClientError::Closed`].
    pub fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.request_with(method, params, true, self.options.request_timeout)
    }

    fn request_with(
        &self,
        method: &str,
        params: Value,
        declare_tasks: bool,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let params = self.params(params, declare_tasks);
        self.conn.request(method, params, timeout)
    }

    /// Sends a notification as is.
    ///
    /// # Errors
    ///
    /// [`ClientError::Io`] or [`ClientError::Closed`] if it cannot be written.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        self.conn.notify(method, params)
    }

    /// `tools/list`, following `nextCursor` (at most 100 pages).
    ///
    /// # Errors
    ///
    /// The request's errors; [`Violation::BadResult`] without a `tools` array.
    pub fn list_tools(&self) -> Result<Vec<ToolInfo>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result =
                self.request_with("tools/list", params, false, self.options.request_timeout)?;
            let list = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| Violation::BadResult {
                    method: "tools/list".into(),
                    detail: "no tools array".into(),
                })?;
            for tool in list {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                tools.push(ToolInfo {
                    name: name.to_owned(),
                    description: tool
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    raw: tool.clone(),
                });
            }
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(tools),
            }
        }
        Ok(tools)
    }

    /// Calls a tool plainly (no task): modern without declaring the Tasks extension, legacy
    /// without `params.task`. Returns the `CallToolResult`.
    ///
    /// # Errors
    ///
    /// The request's errors; [`Violation::BadResult`] if the server created a task anyway.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        let params = json!({"name": name, "arguments": arguments});
        let result =
            self.request_with("tools/call", params, false, self.options.request_timeout)?;
        match classify_call(&result)? {
            CallOutcome::Complete(value) => Ok(value),
            CallOutcome::Task(_) => Err(Violation::BadResult {
                method: "tools/call".into(),
                detail: "a task was created although the client did not ask for one".into(),
            }
            .into()),
        }
    }

    /// Calls a tool allowing a task: modern declares the Tasks extension (the server decides),
    /// legacy sends `params.task: {}` (SEP-1686 opt-in).
    ///
    /// # Errors
    ///
    /// The request's errors.
    pub fn call_tool_task(&self, name: &str, arguments: Value) -> Result<CallOutcome, ClientError> {
        let mut params = json!({"name": name, "arguments": arguments});
        if self.info.era == Era::Legacy {
            params["task"] = json!({});
        }
        let result = self.request_with("tools/call", params, true, self.options.request_timeout)?;
        classify_call(&result)
    }

    /// Calls a tool as a task and returns the created task.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unsupported`] if the server ran it without a task; the request's errors.
    pub fn start_task(&self, name: &str, arguments: Value) -> Result<TaskInfo, ClientError> {
        match self.call_tool_task(name, arguments)? {
            CallOutcome::Task(task) => Ok(task),
            CallOutcome::Complete(_) => Err(ClientError::Unsupported {
                what: format!("tool {name} answered without creating a task"),
            }),
        }
    }

    /// `tasks/get`, including taskstream's `_meta["dev.taskstream/events"]` range when the
    /// server sends it: the task's status and its earliest and latest seq, without replaying
    /// any event.
    ///
    /// # Errors
    ///
    /// The request's errors (`-32602` for an unknown task).
    pub fn task_info(&self, task_id: &str) -> Result<TaskInfo, ClientError> {
        let result = self.request("tasks/get", json!({"taskId": task_id}))?;
        Ok(TaskInfo::parse("tasks/get", &result)?)
    }

    /// `tasks/cancel`. Legacy servers answer with the task (returned); modern ones with an ack.
    ///
    /// # Errors
    ///
    /// The request's errors (`-32602` for an unknown or, legacy, terminal task).
    pub fn cancel_task(&self, task_id: &str) -> Result<Option<TaskInfo>, ClientError> {
        let result = self.request("tasks/cancel", json!({"taskId": task_id}))?;
        Ok(TaskInfo::parse("tasks/cancel", &result).ok())
    }

    /// The final result of a task, waiting up to `timeout`. Legacy: `tasks/result` (blocking on
    /// the server). Modern: `tasks/get` until the task is terminal, at its `pollIntervalMs`
    /// (clamped to 20..=1000 ms); returns `result`, or the `error` as [`ClientError::Rpc`].
    ///
    /// # Errors
    ///
    /// [`ClientError::Timeout`]; the task's error; the requests' errors.
    pub fn task_result(&self, task_id: &str, timeout: Duration) -> Result<Value, ClientError> {
        if self.info.era == Era::Legacy {
            return self.request_with("tasks/result", json!({"taskId": task_id}), true, timeout);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let task = self.task_info(task_id)?;
            if task.status.is_terminal() {
                if let Some(error) = task.error {
                    return Err(ClientError::Rpc {
                        method: "tasks/get".into(),
                        error: crate::error::RpcError::from_value(&error),
                    });
                }
                return task.result.ok_or_else(|| {
                    Violation::BadResult {
                        method: "tasks/get".into(),
                        detail: format!("terminal task ({}) without result or error", task.status),
                    }
                    .into()
                });
            }
            let interval = task
                .raw
                .get("pollIntervalMs")
                .and_then(Value::as_u64)
                .unwrap_or(100)
                .clamp(20, 1000);
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    waiting_for: format!("task {task_id} to finish"),
                    after: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(interval).min(deadline - now));
        }
    }

    /// Opens `tasks/stream` for `task_id`: with `after`, the server sends events with a higher
    /// seq; without, from the earliest retained one. This is the raw stream: no cursor, no
    /// de-duplication; see [`ResumableStream`](crate::ResumableStream) for those.
    ///
    /// # Errors
    ///
    /// [`ClientError::StreamActive`] if this connection already streams the task (TS-05);
    /// a write error; after a cancelled stream of the same task, the barrier request's
    /// timeout or a closed connection. Errors of the request itself (such as `events_gone`) come from
    /// [`EventStream::next`].
    pub fn open_stream(
        &self,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<EventStream<'_>, ClientError> {
        if self.conn.is_draining(task_id) {
            // The barrier after a cancelled stream of this task (see `Connection::is_draining`).
            match self.request("tasks/get", json!({"taskId": task_id})) {
                Ok(_) | Err(ClientError::Rpc { .. }) => self.conn.clear_draining(task_id),
                Err(e) => return Err(e),
            }
        }
        let mut params = json!({"taskId": task_id});
        if let Some(after) = after {
            params["after"] = json!(after);
        }
        let params = self.params(params, true);
        let id = self.conn.next_id();
        let rx = self
            .conn
            .start_request(id, "tasks/stream", params, Some(task_id))?;
        Ok(EventStream::new(self, id, task_id.to_owned(), rx))
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Takes the unsolicited messages kept so far: notifications with no open stream (such as
    /// `notifications/tasks/status` or late events after a cancel), responses to no pending
    /// request, unparsable lines. At most the latest 1024 are kept.
    #[must_use]
    pub fn take_unsolicited(&self) -> Vec<Value> {
        self.conn.take_unsolicited()
    }

    /// How many unsolicited messages have arrived in total.
    #[must_use]
    pub fn unsolicited_count(&self) -> u64 {
        self.conn.unsolicited_total()
    }

    /// Whether the connection is still open (the reader has not seen EOF or an error).
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.conn.closed_reason().is_none()
    }

    /// The spawned server's process id, if this client spawned one that is still held.
    #[must_use]
    pub fn server_pid(&self) -> Option<u32> {
        lock_child(&self.child).as_ref().map(Child::id)
    }

    /// Whether a spawned server is still running. `None` when the client attached.
    ///
    /// # Errors
    ///
    /// [`ClientError::Io`] if the process state cannot be read.
    pub fn server_running(&self) -> Result<Option<bool>, ClientError> {
        match lock_child(&self.child).as_mut() {
            Some(child) => Ok(Some(child.try_wait()?.is_none())),
            None => Ok(None),
        }
    }

    /// Kills the spawned server with SIGKILL (a crash, not a shutdown), reaps it and waits up
    /// to `timeout` for the reader to see the connection close.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unsupported`] when the client attached to a pair; kill or wait errors.
    pub fn kill_server(&self, timeout: Duration) -> Result<ExitStatus, ClientError> {
        let mut guard = lock_child(&self.child);
        let Some(child) = guard.as_mut() else {
            return Err(ClientError::Unsupported {
                what: "kill: this client did not spawn its server".into(),
            });
        };
        child.kill()?;
        let status = child.wait()?;
        guard.take();
        drop(guard);
        self.conn.wait_reader(timeout);
        Ok(status)
    }

    /// Closes the connection: closes the server's stdin, waits up to the exit grace for it to
    /// exit (MCP stdio shutdown), then kills it if it is still running.
    ///
    /// # Errors
    ///
    /// Wait or kill errors. Returns `None` when the client attached rather than spawned.
    pub fn close(self) -> Result<Option<ExitStatus>, ClientError> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<Option<ExitStatus>, ClientError> {
        self.conn.close_writer();
        let mut guard = lock_child(&self.child);
        let Some(mut child) = guard.take() else {
            return Ok(None);
        };
        drop(guard);
        let exited = self.conn.wait_reader(self.options.exit_grace);
        if exited {
            // stdout closed; the process exits at about the same time.
            let deadline = Instant::now() + self.options.exit_grace;
            while Instant::now() < deadline {
                if let Some(status) = child.try_wait()? {
                    return Ok(Some(status));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        child.kill()?;
        Ok(Some(child.wait()?))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("info", &self.info)
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}

fn lock_child(m: &Mutex<Option<Child>>) -> std::sync::MutexGuard<'_, Option<Child>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Tells a `CreateTaskResult` (modern flat `resultType: "task"`, legacy nested `task`) from a
/// plain tool result.
fn classify_call(result: &Value) -> Result<CallOutcome, ClientError> {
    let is_task = result.get("resultType").and_then(Value::as_str) == Some("task")
        || result.get("task").is_some_and(Value::is_object);
    if is_task {
        Ok(CallOutcome::Task(TaskInfo::parse("tools/call", result)?))
    } else {
        Ok(CallOutcome::Complete(result.clone()))
    }
}

/// Waits for one message of a route (shared with the stream module).
pub(crate) fn wait_inbound(
    rx: &std::sync::mpsc::Receiver<Inbound>,
    timeout: Duration,
    what: &str,
) -> Result<Inbound, ClientError> {
    conn::wait(rx, timeout, what)
}
