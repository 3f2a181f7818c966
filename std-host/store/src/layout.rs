//! Which sled directory of a data dir is the index: `index/` (generation 0, as every data dir
//! starts) or `index.<generation>/`, named by the pointer file `INDEX`.
//!
//! An index rebuild writes a new generation beside the current one and then switches to it by
//! replacing `INDEX` atomically (write `INDEX.tmp`, `fdatasync` it, rename it over `INDEX`,
//! `fsync` the data dir). Whatever a crash interrupts, `INDEX` names exactly one complete
//! directory: the old one until the rename is durable, the new one after it. [`open`] deletes
//! every other index directory (a half-built new one, or the old one the switch did not get to
//! delete), so no removed payload outlives a restart in a stale copy. A data dir without
//! `INDEX` uses `index/`, which keeps every data dir laid out before rebuilds openable.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::fsutil;
use super::storage::StdStorage;

/// The pointer file naming the current index directory.
const POINTER: &str = "INDEX";
/// The pointer's replacement while it is written.
const POINTER_TMP: &str = "INDEX.tmp";
/// The directory of generation 0 and the prefix of every later one.
const BASE: &str = "index";

/// The index directory in use: its generation and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Generation {
    /// 0 for `index/`, `n` for `index.<n>/`.
    pub(crate) number: u64,
    /// The directory.
    pub(crate) dir: PathBuf,
}

impl Generation {
    /// The generation after this one, in the same data dir.
    pub(crate) fn next(&self, data_dir: &Path) -> Generation {
        let number = self.number.saturating_add(1);
        Generation {
            number,
            dir: data_dir.join(dir_name(number)),
        }
    }
}

fn dir_name(number: u64) -> String {
    if number == 0 {
        BASE.to_owned()
    } else {
        format!("{BASE}.{number}")
    }
}

/// The generation a directory name stands for, if it is an index directory's name.
fn parse_name(name: &str) -> Option<u64> {
    if name == BASE {
        return Some(0);
    }
    let digits = name.strip_prefix(BASE)?.strip_prefix('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Only the canonical spelling counts, so that one generation has one directory.
    digits
        .parse()
        .ok()
        .filter(|n| *n > 0 && dir_name(*n) == name)
}

/// Finds the current index directory of `data_dir` and deletes every other one, and a pointer
/// replacement a crash left behind; returns it and how many directories were deleted. `sync`
/// makes those deletions durable.
///
/// # Errors
/// [`StoreError::Corrupt`] if `INDEX` names no index directory or one that does not exist;
/// [`StoreError::Io`] if the data dir cannot be read or a stale directory not deleted.
pub(crate) fn open(data_dir: &Path, sync: bool) -> Result<(Generation, usize), StoreError> {
    let pointer = data_dir.join(POINTER);
    let current = match fs::read_to_string(&pointer) {
        Ok(text) => {
            let name = text.trim_end_matches('\n');
            let number = parse_name(name).ok_or_else(|| {
                StoreError::Corrupt(format!("{} names no index directory", pointer.display()))
            })?;
            let dir = data_dir.join(dir_name(number));
            if !dir.is_dir() {
                return Err(StoreError::Corrupt(format!(
                    "{} names {}, which does not exist",
                    pointer.display(),
                    dir.display()
                )));
            }
            Generation { number, dir }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Generation {
            number: 0,
            dir: data_dir.join(BASE),
        },
        Err(e) => return Err(StoreError::io("reading", &pointer)(e)),
    };
    let mut changed = false;
    let mut deleted = 0;
    let tmp = data_dir.join(POINTER_TMP);
    match fs::remove_file(&tmp) {
        Ok(()) => changed = true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("deleting", &tmp)(e)),
    }
    for stale in stale_dirs(data_dir, &current)? {
        fs::remove_dir_all(&stale).map_err(StoreError::io("deleting", &stale))?;
        changed = true;
        deleted += 1;
    }
    if changed && sync {
        fsutil::sync_dir(data_dir).map_err(StoreError::io("fsync of", data_dir))?;
    }
    Ok((current, deleted))
}

/// The index directories of `data_dir` other than `current`.
pub(crate) fn stale_dirs(
    data_dir: &Path,
    current: &Generation,
) -> Result<Vec<PathBuf>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(data_dir).map_err(StoreError::io("listing", data_dir))? {
        let entry = entry.map_err(StoreError::io("listing", data_dir))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let number = entry.file_name().to_str().and_then(parse_name);
        if is_dir && number.is_some_and(|n| n != current.number) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Makes `next` the current index directory, atomically and (with `sync`) durably: once this
/// returns, a restart opens `next`.
///
/// # Errors
/// [`StoreError::Io`] if the pointer cannot be written, synced or renamed; the previous
/// pointer then still holds (the rename is the switch).
pub(crate) fn switch(data_dir: &Path, next: &Generation, sync: bool) -> Result<(), StoreError> {
    let tmp = data_dir.join(POINTER_TMP);
    let pointer = data_dir.join(POINTER);
    let bytes = format!("{}\n", dir_name(next.number));
    crate::storage::replace(
        &StdStorage,
        data_dir,
        &tmp,
        &pointer,
        bytes.as_bytes(),
        sync,
    )
    .map_err(|(context, path, e)| StoreError::io(context, &path)(e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nothing_else_is_an_index_dir() {
        for n in [0, 1, 2, 10, u64::MAX] {
            assert_eq!(parse_name(&dir_name(n)), Some(n));
        }
        for bad in [
            "", "index.", "index.0", "index.x", "index.-1", "index.01", "index1", "wal", "INDEX",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
