//! The signals that stop a long-lived server (`serve --http`, `serve --socket`): SIGTERM and
//! SIGINT, as a future on the tokio runtime the transport runs.

use crate::error::ServeError;

/// SIGTERM or SIGINT. The handlers are installed when this is called (not when the future is
/// first polled), so a signal right after the listening line is not lost.
pub(crate) fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, ServeError> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind| {
        signal(kind).map_err(|e| ServeError::Http(format!("installing a signal handler: {e}")))
    };
    let mut term = install(SignalKind::terminate())?;
    let mut int = install(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
