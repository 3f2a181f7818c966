//! [`StoreError`]: why storage failed.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use taskstream_core::record::RecordError;

use super::wal::WalError;

/// A storage failure (I/O, corruption, a locked data dir).
///
/// Failures of the log or of the index while appending are fail-stop: the store refuses every later
/// write with [`StoreError::Failed`], since what reached the disk is no longer known.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The data dir is held by another running server.
    #[error(
        "data dir {} is in use by another taskstream server (its LOCK file is locked); \
         stop that server or choose another --data-dir",
        dir.display()
    )]
    Locked {
        /// The data dir.
        dir: PathBuf,
    },
    /// A file operation failed.
    #[error("{context} {}: {source}", path.display())]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The write-ahead log failed.
    #[error("{0}")]
    Wal(#[source] WalError),
    /// The index (task records, retention floors, where each event is in the log) failed.
    #[error("index: {0}")]
    Index(#[source] IndexError),
    /// A record could not be encoded, or a stored one did not decode.
    #[error("log record: {0}")]
    Record(#[source] RecordError),
    /// Stored data is not what this version of taskstream wrote.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The data dir is damaged (not by a torn write): what is wrong and what the operator can
    /// do. No log record was changed.
    #[error("the data dir is damaged: {0}")]
    Damaged(String),
    /// A task with this id exists already.
    #[error("task {0:?} exists already")]
    DuplicateTask(String),
    /// Every seq of the task has been used (2^53 events).
    #[error("the task has used every sequence number")]
    SeqExhausted,
    /// The PostgreSQL store could not do what was asked: the database is unreachable, refused
    /// a statement, or is not set up as this server needs (the text names the cause, for the
    /// operator; clients are told only that the store cannot be reached).
    #[error("PostgreSQL store: {0}")]
    Database(String),
    /// An earlier failure stopped the store; it refuses every write (fail-stop).
    #[error("storage stopped after an earlier write failure; restart the server to recover")]
    Failed,
}

impl StoreError {
    pub(crate) fn io(context: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
        let path = path.to_owned();
        move |source| StoreError::Io {
            context,
            path,
            source,
        }
    }

    pub(crate) fn corrupt(what: String) -> StoreError {
        StoreError::Corrupt(what)
    }

    /// Damage found in `data_dir` at open, with the advice the operator needs.
    pub(crate) fn damaged(data_dir: &Path, what: String) -> StoreError {
        StoreError::Damaged(format!(
            "{what}. No log record was changed. Restore the data dir from a backup, or run \
             `taskstream repair --data-dir {}` to go on with every record that is still valid \
             (tasks that were running end failed, after every seq they may have used)",
            data_dir.display()
        ))
    }

    /// Whether this is an operating system's I/O error (a full disk, a failing device): of a
    /// file of the data dir, of a log segment, or of the index's files. Such an error is not damage.
    pub(crate) fn is_io(&self) -> bool {
        matches!(
            self,
            StoreError::Io { .. }
                | StoreError::Wal(WalError::Io { .. })
                | StoreError::Index(IndexError {
                    kind: IndexErrorKind::Io,
                    ..
                })
        )
    }

    /// Whether this is damage a repair may go past.
    #[must_use]
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            StoreError::Damaged(_) | StoreError::Wal(WalError::Damaged(_))
        )
    }
}

/// A failure of the index: what was being done, what kind of failure, and a message for the
/// operator. The engine the index is built on is not part of the API; its own error stays
/// reachable through [`std::error::Error::source`], for logs.
#[derive(Debug)]
pub struct IndexError {
    context: &'static str,
    kind: IndexErrorKind,
    message: String,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// What kind of failure an [`IndexError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexErrorKind {
    /// The operating system failed a read or write of the index's files (a full disk, a
    /// failing device): not damage.
    Io,
    /// The index's files hold data that does not decode.
    Corrupt,
    /// Any other failure (a misuse or a defect of the index).
    Other,
}

impl IndexError {
    pub(crate) fn new(
        context: &'static str,
        kind: IndexErrorKind,
        message: String,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> IndexError {
        IndexError {
            context,
            kind,
            message,
            source: Box::new(source),
        }
    }

    /// What kind of failure this is.
    #[must_use]
    pub fn kind(&self) -> IndexErrorKind {
        self.kind
    }

    /// What the index was doing ("writing a task", "flushing", …).
    #[must_use]
    pub fn context(&self) -> &'static str {
        self.context
    }
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.message)
    }
}

impl std::error::Error for IndexError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl From<WalError> for StoreError {
    fn from(e: WalError) -> Self {
        StoreError::Wal(e)
    }
}

/// Why an append was refused.
#[derive(Debug)]
pub enum AppendError {
    /// No such task.
    UnknownTask,
    /// The task is terminal; its log is frozen.
    Terminal,
    /// The payload is not a JSON object.
    InvalidPayload(taskstream_core::json::JsonError),
    /// The event type is not vendor-prefixed.
    InvalidType(taskstream_core::event::EventTypeError),
    /// The payload exceeds the retention policy's `max_payload_bytes`.
    PayloadTooLarge {
        /// The payload's compact size.
        size: usize,
        /// The limit.
        limit: u32,
    },
    /// The retained events of all tasks already take the store-wide budget
    /// ([`StoreConfig::max_store_bytes`](crate::StoreConfig::max_store_bytes)); the event
    /// (or the new task) was not stored.
    StoreFull {
        /// The bytes counted when it was refused.
        stored: u64,
        /// The budget.
        limit: u64,
    },
    /// Storage failed; the event was not appended.
    Storage(StoreError),
}
