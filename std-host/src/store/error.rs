//! [`StoreError`]: why storage failed.

use std::io;
use std::path::{Path, PathBuf};

use taskstream_core::record::RecordError;

use super::wal::WalError;

/// A storage failure (I/O, corruption, a locked data dir).
///
/// Failures of the log or of sled while appending are fail-stop: the store refuses every later
/// write with [`StoreError::Failed`], since what reached the disk is no longer known.
#[derive(Debug)]
pub enum StoreError {
    /// The data dir is held by another running server.
    Locked {
        /// The data dir.
        dir: PathBuf,
    },
    /// A file operation failed.
    Io {
        /// What was being done.
        context: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The write-ahead log failed.
    Wal(WalError),
    /// sled failed.
    Index {
        /// What was being done.
        context: &'static str,
        /// sled's error.
        source: sled::Error,
    },
    /// A record could not be encoded, or a stored one did not decode.
    Record(RecordError),
    /// Stored data is not what this version of taskstream wrote.
    Corrupt(String),
    /// The data dir is damaged (not by a torn write): what is wrong and what the operator can
    /// do. No log record was changed.
    Damaged(String),
    /// A task with this id exists already.
    DuplicateTask(String),
    /// Every seq of the task has been used (2^53 events).
    SeqExhausted,
    /// The PostgreSQL store could not do what was asked: the database is unreachable, refused
    /// a statement, or is not set up as this server needs (the text names the cause, for the
    /// operator; clients are told only that the store cannot be reached).
    Database(String),
    /// An earlier failure stopped the store; it refuses every write (fail-stop).
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

    pub(crate) fn index(context: &'static str, source: sled::Error) -> StoreError {
        StoreError::Index { context, source }
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

    /// Whether this is damage a repair may go past.
    #[must_use]
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            StoreError::Damaged(_) | StoreError::Wal(WalError::Damaged(_))
        )
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Locked { dir } => write!(
                f,
                "data dir {} is in use by another taskstream server (its LOCK file is locked); \
                 stop that server or choose another --data-dir",
                dir.display()
            ),
            StoreError::Io {
                context,
                path,
                source,
            } => write!(f, "{context} {}: {source}", path.display()),
            StoreError::Wal(e) => e.fmt(f),
            StoreError::Index { context, source } => write!(f, "sled: {context}: {source}"),
            StoreError::Record(e) => write!(f, "log record: {e}"),
            StoreError::Corrupt(what) => write!(f, "stored data is corrupt: {what}"),
            StoreError::Damaged(what) => write!(f, "the data dir is damaged: {what}"),
            StoreError::DuplicateTask(id) => write!(f, "task {id:?} exists already"),
            StoreError::SeqExhausted => f.write_str("the task has used every sequence number"),
            StoreError::Database(what) => write!(f, "PostgreSQL store: {what}"),
            StoreError::Failed => f.write_str(
                "storage stopped after an earlier write failure; restart the server to recover",
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::Wal(e) => Some(e),
            StoreError::Index { source, .. } => Some(source),
            StoreError::Record(e) => Some(e),
            _ => None,
        }
    }
}

impl From<WalError> for StoreError {
    fn from(e: WalError) -> Self {
        StoreError::Wal(e)
    }
}
