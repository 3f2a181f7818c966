//! The file operations the write-ahead log stands on, behind one small trait.
//!
//! [`Storage`] is everything the log does to its directory (create, open, list, rename, remove,
//! sync the directory) and [`StorageFile`] everything it does to a file (write at, read at, sync
//! data, length, cut). In production both are [`StdStorage`]: `std::fs`, `pwrite`, `pread`,
//! `fdatasync` and an `fsync` of the directory, nothing added. In tests `sim::SimStorage` stands
//! in: a deterministic, seeded model of a disk and its page cache that keeps, per file, what is
//! durable and which writes are not yet, and per directory which names are durable and which
//! changes are not yet; at a simulated power loss it keeps some of the unsynced ones, and it can
//! fail the Nth write or sync. The log cannot tell the two apart, which is the point: the
//! simulation test (`wal/sim_tests.rs`) runs the real log over the simulated disk.
//!
//! What a sync promises, here as on Linux: [`StorageFile::sync_data`] makes the file's bytes
//! and length durable (not its name); [`Storage::sync_dir`] makes the names in a directory
//! durable (created, renamed and removed entries). Nothing else is durable until one of those
//! succeeded.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(test)]
pub(crate) mod sim;

/// One open file.
pub(crate) trait StorageFile: Send + Sync {
    /// Writes all of `buf` at `offset`, extending the file if it ends before.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Reads into `buf` from `offset`; returns the bytes read, 0 at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Makes the file's bytes and length durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// Cuts (or extends with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// A directory tree of files.
pub(crate) trait Storage: Send + Sync {
    /// Opens `path` for reading and writing, creating it (mode 0600) if it is missing; an
    /// existing file keeps its bytes.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Opens the existing file `path` (for writing too with `write`).
    fn open(&self, path: &Path, write: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// The paths of the entries of `dir`, in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Renames `from` to `to` (replacing it), in the same directory.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// The whole of the file `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = self.open(path, false)?;
        let len = usize::try_from(file.len()?).map_err(|_| io::ErrorKind::OutOfMemory)?;
        let mut buf = vec![0; len];
        let got = read_at_most(&*file, &mut buf, 0)?;
        buf.truncate(got);
        Ok(buf)
    }
}

/// Reads into `buf` from `offset` until it is full or the file ends; returns the bytes read.
pub(crate) fn read_at_most(
    file: &dyn StorageFile,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The real file system: `std::fs`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StdStorage;

impl StdStorage {
    /// The real file system, shared.
    pub(crate) fn shared() -> Arc<dyn Storage> {
        Arc::new(StdStorage)
    }
}

impl StorageFile for File {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

impl Storage for StdStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(crate::fsutil::FILE_MODE)
            .open(path)?;
        Ok(Arc::new(file))
    }
    fn open(&self, path: &Path, write: bool) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).write(write).open(path)?;
        Ok(Arc::new(file))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect()
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        crate::fsutil::sync_dir(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
}

/// Replaces the file `path` with `bytes` through the temporary file `tmp` in the same
/// directory `dir`: written, (with `sync`) synced, renamed over `path`, and (with `sync`) the
/// directory synced. A power loss at any point leaves the old file or the new one, whole
/// (unless `sync` is off). On failure, what was being done and to which file.
pub(crate) fn replace(
    storage: &dyn Storage,
    dir: &Path,
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
    sync: bool,
) -> Result<(), (&'static str, PathBuf, io::Error)> {
    type Failure = (&'static str, PathBuf, io::Error);
    fn at<'p>(context: &'static str, p: &'p Path) -> impl FnOnce(io::Error) -> Failure + 'p {
        move |e| (context, p.to_owned(), e)
    }
    let file = storage.create(tmp).map_err(at("creating", tmp))?;
    file.set_len(0).map_err(at("truncating", tmp))?;
    file.write_at(bytes, 0).map_err(at("writing", tmp))?;
    if sync {
        file.sync_data().map_err(at("fdatasync of", tmp))?;
    }
    storage.rename(tmp, path).map_err(at("renaming", tmp))?;
    if sync {
        storage.sync_dir(dir).map_err(at("fsync of", dir))?;
    }
    Ok(())
}
