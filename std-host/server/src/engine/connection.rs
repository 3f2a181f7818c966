//! [`Connection`]: one client connection of the server, as the public API shows it. The
//! transports hand it lines; it owns the connection's state and its delivery thread, and,
//! when started with a process of its own, that process.

use std::io::Write;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use taskstream_core::rpc;

use super::delivery;
use super::state::ConnectionState;
use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::io;
use crate::process::Process;
use crate::wire::era::Session;
use crate::wire::ServerError;
use taskstream_store::TaskStore;

/// One client connection of the server, without the framing: hand it one incoming line at a
/// time with [`handle_line`](Self::handle_line); everything it answers or streams is written to
/// the output given to [`start`](Self::start), one JSON-RPC message per line, from this thread
/// (immediate answers) and from the server's own threads (stream frames, deferred answers, the
/// results of tool calls).
///
/// Requests are answered exactly once, except a request cancelled with
/// `notifications/cancelled` (no answer, DX-04) and those still open when the connection is
/// closed (streams, plain calls, `tasks/result` waiting for a running task).
///
/// [`start`](Self::start) gives the connection a [`Process`] of its own (stdio: one process,
/// one connection); [`attach`](Self::attach) joins an existing one.
///
/// ```no_run
/// use std::sync::Arc;
/// use taskstream_server::config::ServeConfig;
/// use taskstream_server::Connection;
/// use taskstream_store::{Store, StoreConfig};
///
/// let config = ServeConfig::in_memory();
/// let store = Store::open(
///     StoreConfig {
///         data_dir: None,
///         durability: config.durability,
///         retention: config.retention,
///         max_store_bytes: config.max_store_bytes,
///         index_cache_bytes: config.index_cache_bytes,
///     },
///     taskstream_store::clock::now(),
/// )?;
/// let mut conn = Connection::start(config, Arc::new(store), Box::new(std::io::sink()))?;
/// conn.handle_line(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// conn.close();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Connection {
    shared: Arc<ConnectionState>,
    session: Session,
    delivery: Option<JoinHandle<()>>,
    /// The process, when this connection owns it (and so stops it when closed).
    owned: Option<Arc<Process>>,
}

impl Connection {
    /// Starts a connection with a process of its own: its delivery thread and the process's
    /// retention sweep run until [`close`](Self::close) (or drop), which also stops the
    /// process's tasks.
    ///
    /// # Errors
    /// [`ServeError::Thread`] if a helper thread cannot start.
    pub fn start(
        config: ServeConfig,
        store: Arc<dyn TaskStore>,
        output: Box<dyn Write + Send>,
    ) -> Result<Connection, ServeError> {
        let process = Process::start(config, store).map_err(ServeError::Thread)?;
        let principal = process.config.principal.clone();
        let mut conn = Connection::attach(&process, &principal, output)?;
        conn.owned = Some(process);
        Ok(conn)
    }

    /// A connection of `process`'s own principal that owns `process` (stopping it when
    /// closed) and, once storage failed and its client was told, exits the process
    /// (`taskstream serve` on stdio).
    ///
    /// # Errors
    /// [`ServeError::Thread`] if the delivery thread cannot start.
    pub(crate) fn owning(
        process: Arc<Process>,
        output: Box<dyn Write + Send>,
    ) -> Result<Connection, ServeError> {
        let principal = process.config.principal.clone();
        let mut conn = Connection::attach(&process, &principal, output)?;
        conn.shared
            .exit_on_storage_failure
            .store(true, Ordering::Relaxed);
        conn.owned = Some(process);
        Ok(conn)
    }

    /// Starts a connection of `process` acting as `principal`, with its own delivery thread.
    /// Closing it ends only its own streams and calls; the tasks are the process's.
    ///
    /// # Errors
    /// [`ServeError::Thread`] if the delivery thread cannot start.
    pub fn attach(
        process: &Arc<Process>,
        principal: &str,
        output: Box<dyn Write + Send>,
    ) -> Result<Connection, ServeError> {
        let shared = Arc::new(ConnectionState::new(
            process,
            principal,
            io::Output::new(output),
            None,
            true,
            process.config.max_streams,
        ));
        process.register(&shared);
        let delivery = std::thread::Builder::new()
            .name("delivery".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || delivery::run(&shared)
            })
            .map_err(ServeError::Thread)?;
        Ok(Connection {
            shared,
            session: Session::default(),
            delivery: Some(delivery),
            owned: None,
        })
    }

    /// Handles one incoming message: `line` is one line of input without its newline. A line
    /// longer than `--max-message-bytes` is answered as
    /// [`handle_overlong_line`](Self::handle_overlong_line) would.
    pub fn handle_line(&mut self, line: &[u8]) {
        if line.len() > self.shared.process.config.max_message_bytes {
            return self.handle_overlong_line();
        }
        self.shared.handle_line(&mut self.session, line);
    }

    /// Answers a line that was longer than `--max-message-bytes` (and was skipped): -32600 with
    /// `data.reason` `message_too_long` and `id: null`.
    pub fn handle_overlong_line(&mut self) {
        let e = ServerError::Core(rpc::RpcError::MESSAGE_TOO_LONG);
        self.shared.out.send(&e.line(None));
    }

    /// Whether writing the output failed (the client is gone); the caller stops reading.
    pub fn is_output_broken(&self) -> bool {
        self.shared.out.is_broken()
    }

    /// Reads `input` to its end (or until the output breaks), one line per message, as the
    /// line transports (stdio, the Unix socket) do: a line over `--max-message-bytes` is
    /// skipped and answered as [`handle_overlong_line`](Self::handle_overlong_line).
    ///
    /// # Errors
    /// The read error of `input`.
    pub(crate) fn read_from(&mut self, input: impl std::io::Read) -> std::io::Result<()> {
        let max_line = self.shared.process.config.max_message_bytes;
        io::read_lines(input, max_line, |line| {
            match line {
                io::Line::Message(bytes) => self.handle_line(bytes),
                io::Line::TooLong => self.handle_overlong_line(),
            }
            if self.is_output_broken() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// Ends the connection (the input ended): stops its plain calls, lets the delivery thread
    /// finish its batch, flushes the output and waits for it. When the connection owns its
    /// process, the process's running tasks stop too (they end as they would at a crash:
    /// failed after a restart). Open streams and waiting `tasks/result` requests are not
    /// answered: nobody is left to read them.
    pub fn close(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let shared = &self.shared;
        shared.close();
        if let Some(process) = &self.owned {
            // Stop the tasks' threads first, so the delivery thread has nothing left to wait for.
            process.shut_down();
        }
        shared.process.store.changes().notify();
        // The delivery thread finishes its batch and stops; a batch stuck on a reader that no
        // longer reads is not waited for.
        if let Some(delivery) = self.delivery.take() {
            if !shared.out.is_broken() {
                let _ = delivery.join();
            }
        }
        shared.out.batch();
        self.owned = None;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.delivery.is_some() || self.owned.is_some() {
            self.shut_down();
        }
    }
}
