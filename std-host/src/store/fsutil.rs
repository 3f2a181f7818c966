//! Files and directories readable by their owner only, directory fsync, and the data dir lock.

use std::fs::{self, DirBuilder, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of every directory the store creates.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Options that create a file readable and writable by its owner only.
pub(crate) fn private_file() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).mode(FILE_MODE);
    o
}

/// Creates `dir` (and missing parents) with mode 0700; an existing directory keeps its mode.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Makes the entries of `dir` (created, renamed, deleted files) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Restricts every file under `dir` to 0600 and every directory to 0700 (for files a library
/// created with the process umask).
pub(crate) fn restrict_tree(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            fs::set_permissions(&path, fs::Permissions::from_mode(DIR_MODE))?;
            restrict_tree(&path)?;
        } else if kind.is_file() {
            fs::set_permissions(&path, fs::Permissions::from_mode(FILE_MODE))?;
        }
    }
    Ok(())
}

/// Why the lock file could not be taken.
pub(crate) enum LockError {
    /// Another process holds it.
    Held,
    /// The file could not be opened or locked.
    Io(io::Error),
}

/// Takes an exclusive advisory lock (`flock`) on `path`, held until the file is closed.
pub(crate) fn lock_file(path: &Path) -> Result<File, LockError> {
    let file = private_file()
        .truncate(false)
        .open(path)
        .map_err(LockError::Io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(LockError::Held),
        Err(TryLockError::Error(e)) => Err(LockError::Io(e)),
    }
}
