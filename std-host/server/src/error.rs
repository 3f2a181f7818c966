//! Why serving stopped: [`ServeError`], shared by every transport.

/// Why the server stopped other than at the end of its input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Reading stdin failed.
    #[error("reading stdin: {0}")]
    Input(#[source] std::io::Error),
    /// A helper thread could not be started.
    #[error("starting a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// `serve --http` could not start (address, token file, runtime).
    #[error("{0}")]
    Http(String),
    /// The server could not start (the store could not be opened, a thread not started).
    #[error("{0}")]
    Start(String),
}
