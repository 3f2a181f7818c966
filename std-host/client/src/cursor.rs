//! Cursor stores: where a client keeps, per task, the seq of the last event it fully processed
//! (RS-08), to pass as `after` on reconnect (RS-09).
//!
//! [`FileCursorStore`] survives a crash of the client: each save writes a temporary file,
//! syncs it, renames it over the cursor file and syncs the directory, so a reader sees either
//! the old cursor or the new one, never a torn write. [`MemoryCursorStore`] is for tests and
//! for hosts that keep the cursor elsewhere.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::error::CursorError;
use crate::types::{seq_of, MAX_SEQ};

/// Where a client persists, per task, the last fully processed seq.
pub trait CursorStore {
    /// The persisted cursor of `task_id`, `None` if none was saved.
    ///
    /// # Errors
    ///
    /// I/O errors, or a cursor that cannot be read back.
    fn load(&self, task_id: &str) -> Result<Option<u64>, CursorError>;

    /// Persists `seq` as the cursor of `task_id`. When this returns `Ok`, a later
    /// [`load`](Self::load), also after a crash of this process, returns `seq`.
    ///
    /// # Errors
    ///
    /// I/O errors; the previous cursor stays in place.
    fn save(&mut self, task_id: &str, seq: u64) -> Result<(), CursorError>;

    /// Forgets the cursor of `task_id`.
    ///
    /// # Errors
    ///
    /// I/O errors.
    fn clear(&mut self, task_id: &str) -> Result<(), CursorError>;
}

impl<S: CursorStore + ?Sized> CursorStore for &mut S {
    fn load(&self, task_id: &str) -> Result<Option<u64>, CursorError> {
        (**self).load(task_id)
    }
    fn save(&mut self, task_id: &str, seq: u64) -> Result<(), CursorError> {
        (**self).save(task_id, seq)
    }
    fn clear(&mut self, task_id: &str) -> Result<(), CursorError> {
        (**self).clear(task_id)
    }
}

/// Cursors in memory: lost with the process.
#[derive(Clone, Debug, Default)]
pub struct MemoryCursorStore {
    cursors: HashMap<String, u64>,
    saves: u64,
}

impl MemoryCursorStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many saves succeeded so far.
    #[must_use]
    pub fn saves(&self) -> u64 {
        self.saves
    }
}

impl CursorStore for MemoryCursorStore {
    fn load(&self, task_id: &str) -> Result<Option<u64>, CursorError> {
        Ok(self.cursors.get(task_id).copied())
    }

    fn save(&mut self, task_id: &str, seq: u64) -> Result<(), CursorError> {
        if seq > MAX_SEQ {
            return Err(CursorError::InvalidSeq { seq });
        }
        self.cursors.insert(task_id.to_owned(), seq);
        self.saves += 1;
        Ok(())
    }

    fn clear(&mut self, task_id: &str) -> Result<(), CursorError> {
        self.cursors.remove(task_id);
        Ok(())
    }
}

/// The longest task id a [`FileCursorStore`] accepts (its hex form names the file).
pub const MAX_FILE_TASK_ID_BYTES: usize = 100;

/// Cursors in a directory, one small JSON file per task (`{"taskId": …, "seq": N}`), each
/// replaced atomically and durably on save.
#[derive(Debug)]
pub struct FileCursorStore {
    dir: PathBuf,
    sync: bool,
}

/// Distinguishes temporary files of concurrent saves within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl FileCursorStore {
    /// Opens (creating it if needed) a store in `dir`. Temporary files left by a crash in the
    /// middle of a save are ignored (and removed by the next save of the same task).
    ///
    /// # Errors
    ///
    /// If the directory cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CursorError> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(FileCursorStore { dir, sync: true })
    }

    /// Turns the `fsync`s off (tests only: the write stays atomic, not durable).
    #[must_use]
    pub fn without_sync(mut self) -> Self {
        self.sync = false;
        self
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds the cursor of `task_id`.
    ///
    /// # Errors
    ///
    /// [`CursorError::InvalidTaskId`] for an empty or too long task id.
    pub fn path_of(&self, task_id: &str) -> Result<PathBuf, CursorError> {
        if task_id.is_empty() || task_id.len() > MAX_FILE_TASK_ID_BYTES {
            return Err(CursorError::InvalidTaskId {
                task_id: task_id.chars().take(40).collect(),
            });
        }
        let hex: String = task_id.bytes().map(|b| format!("{b:02x}")).collect();
        Ok(self.dir.join(format!("{hex}.cursor")))
    }

    fn sync_dir(&self) -> Result<(), CursorError> {
        if self.sync {
            // Makes the rename durable. Directories can be opened for reading on Unix.
            File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl CursorStore for FileCursorStore {
    fn load(&self, task_id: &str) -> Result<Option<u64>, CursorError> {
        let path = self.path_of(task_id)?;
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let corrupt = |detail: &str| CursorError::Corrupt {
            path: path.display().to_string(),
            detail: detail.to_owned(),
        };
        let value: Value = serde_json::from_str(&text).map_err(|e| corrupt(&e.to_string()))?;
        if value.get("taskId").and_then(Value::as_str) != Some(task_id) {
            return Err(corrupt("the file names another task"));
        }
        let seq = value
            .get("seq")
            .and_then(seq_of)
            .ok_or_else(|| corrupt("no valid seq"))?;
        Ok(Some(seq))
    }

    fn save(&mut self, task_id: &str, seq: u64) -> Result<(), CursorError> {
        if seq > MAX_SEQ {
            return Err(CursorError::InvalidSeq { seq });
        }
        let path = self.path_of(task_id)?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
        let mut body = serde_json::to_vec(&json!({"taskId": task_id, "seq": seq}))
            .map_err(|e| CursorError::Io(std::io::Error::other(e)))?;
        body.push(b'\n');
        let written = (|| -> Result<(), CursorError> {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            file.write_all(&body)?;
            if self.sync {
                file.sync_all()?;
            }
            fs::rename(&temp, &path)?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        self.sync_dir()
    }

    fn clear(&mut self, task_id: &str) -> Result<(), CursorError> {
        let path = self.path_of(task_id)?;
        match fs::remove_file(&path) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_round_trip() {
        let mut store = MemoryCursorStore::new();
        assert_eq!(store.load("t").expect("load"), None);
        store.save("t", 4).expect("save");
        assert_eq!(store.load("t").expect("load"), Some(4));
        assert!(matches!(
            store.save("t", MAX_SEQ + 1),
            Err(CursorError::InvalidSeq { .. })
        ));
        store.clear("t").expect("clear");
        assert_eq!(store.load("t").expect("load"), None);
    }

    #[test]
    fn file_names_are_hex_and_bounded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FileCursorStore::open(dir.path()).expect("open");
        let path = store.path_of("a/../b").expect("valid id");
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some("612f2e2e2f62.cursor")
        );
        assert!(store.path_of("").is_err());
        assert!(store.path_of(&"x".repeat(101)).is_err());
    }
}
