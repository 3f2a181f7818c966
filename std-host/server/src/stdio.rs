//! `taskstream serve` on stdio: frames stdin into lines and hands each to a [`Connection`];
//! the connection writes to stdout. The thinnest of the transports.

use std::io::{Read, Write};
use std::sync::Arc;

use crate::config::ServeConfig;
use crate::engine::Connection;
use crate::error::ServeError;
use crate::log::log;
use crate::process::Process;
use taskstream_store::TaskStore;

/// Serves one connection: reads `input` until its end, writes to `output`, with tasks and
/// their events in `store`. Returns at the end of the input (after flushing), or when the
/// output is gone.
///
/// This is the stdio loop of `taskstream serve` (with stdin and stdout); it frames lines with
/// the core's `LineReader` (at most `--max-message-bytes` each) and hands each to a
/// [`Connection`]. The process serves only this connection, so the end of the input ends the
/// process's tasks too (they end `failed` at the next start).
///
/// # Errors
/// [`ServeError`] if stdin fails or a helper thread cannot start.
pub fn serve(
    config: ServeConfig,
    store: Arc<dyn TaskStore>,
    input: impl Read,
    output: Box<dyn Write + Send>,
) -> Result<(), ServeError> {
    let process = Process::start(config, store).map_err(ServeError::Thread)?;
    serve_process(process, input, output)
}

/// [`serve`] with a process of the caller's (its tools): the process serves only this
/// connection and stops at the end of the input.
///
/// # Errors
/// [`ServeError`] if stdin fails or a helper thread cannot start.
pub(crate) fn serve_process(
    process: Arc<Process>,
    input: impl Read,
    output: Box<dyn Write + Send>,
) -> Result<(), ServeError> {
    let serving = format!(
        "serving on stdio (principal {:?}, {})",
        process.config.principal,
        match (&process.config.data_dir, process.config.store_url.is_some()) {
            (_, true) => "PostgreSQL store".to_owned(),
            (Some(d), false) => format!("data dir {}", d.display()),
            (None, false) => "in memory".to_owned(),
        }
    );
    let mut conn = Connection::owning(process, output)?;
    log!(Info, "{serving}");
    let read = conn.read_from(input);
    log!(Info, "end of input; shutting down");
    conn.close();
    read.map_err(ServeError::Input)
}
