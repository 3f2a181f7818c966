//! Files and directories readable by their owner only, directory fsync, and the data dir lock.
//!
//! Every file the store writes is 0600 and every directory 0700: the store's own files are
//! created so, and [`restrict_umask`] makes the process's file-creation mask 077 before the
//! store opens, so that files a library creates (sled's blobs and snapshots) are too. At open
//! [`check_data_dir`] puts back any mode someone loosened and warns about a data dir others
//! may write to and about files another user owns.

use std::fs::{self, DirBuilder, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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

/// Makes the process's file-creation mask 077 (keeping any stricter bits it had), so that
/// every file and directory created from now on, by the store or by a library it uses, is
/// its owner's only.
pub(crate) fn restrict_umask() {
    let mode = |bits| rustix::fs::Mode::from_bits_truncate(bits);
    let old = rustix::process::umask(mode(0o077));
    let _ = rustix::process::umask(mode(old.bits() | 0o077));
}

/// Checks the data dir `dir` at open: puts back 0700/0600 on every directory and file in it
/// whose mode was loosened (one warning per repaired entry), and warns if `dir` itself may be
/// written by others (group or world-writable: its entries can be replaced) or if it or
/// anything in it is owned by another user than this process's (a server once run as root
/// leaves files the owner's server cannot write).
pub(crate) fn check_data_dir(dir: &Path, warnings: &mut Vec<String>) -> io::Result<()> {
    let me = rustix::process::geteuid().as_raw();
    let meta = fs::symlink_metadata(dir)?;
    if meta.mode() & 0o022 != 0 {
        warnings.push(format!(
            "data dir {} is writable by its group or by everyone (mode {:04o}): others can \
             replace its files; make it 0700",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    if meta.uid() != me {
        warnings.push(format!(
            "data dir {} is owned by uid {}, but this server runs as uid {me}",
            dir.display(),
            meta.uid()
        ));
    }
    let mut foreign = 0usize;
    check_tree(dir, me, warnings, &mut foreign)?;
    if foreign > 0 {
        warnings.push(format!(
            "{foreign} entries in data dir {} are owned by another user than this server's \
             (uid {me}), perhaps by a server once run as root: it may fail to write them; \
             give them back with chown",
            dir.display()
        ));
    }
    Ok(())
}

fn check_tree(
    dir: &Path,
    me: u32,
    warnings: &mut Vec<String>,
    foreign: &mut usize,
) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // Not followed: a symlink is left alone (and never written through: the store opens
        // its files by name in directories it created).
        let meta = fs::symlink_metadata(&path)?;
        let kind = meta.file_type();
        let want = if kind.is_dir() {
            DIR_MODE
        } else if kind.is_file() {
            FILE_MODE
        } else {
            continue;
        };
        if meta.uid() != me {
            *foreign += 1;
        } else if meta.mode() & 0o777 & !want != 0 {
            fs::set_permissions(&path, fs::Permissions::from_mode(want))?;
            warnings.push(format!(
                "{} had mode {:04o}; set to {want:04o}",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        if kind.is_dir() {
            check_tree(&path, me, warnings, foreign)?;
        }
    }
    Ok(())
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

/// Takes an exclusive advisory lock (`flock`) on `path`, held until the file is closed. A
/// symlink there is refused (`O_NOFOLLOW`), so the lock never creates or opens a file outside
/// the data dir.
pub(crate) fn lock_file(path: &Path) -> Result<File, LockError> {
    let nofollow = i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0);
    let file = private_file()
        .truncate(false)
        .custom_flags(nofollow)
        .open(path)
        .map_err(LockError::Io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(LockError::Held),
        Err(TryLockError::Error(e)) => Err(LockError::Io(e)),
    }
}
