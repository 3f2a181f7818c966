//! Files of a data dir, for the tests that look inside one: every path under a directory, the
//! files that hold a byte string, and a recursive copy. Shared by test binaries through
//! `#[path]`; each uses what it needs.
#![allow(dead_code)]

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Every path under `dir` (files and directories), depth first.
pub(crate) fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        out.push(path.clone());
        if path.is_dir() {
            walk(&path, out);
        }
    }
}

/// Every file under `dir` that contains `needle`. A file that a running server deleted between
/// the listing and the read holds nothing; any other read failure fails the test.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut all = Vec::new();
    walk(dir, &mut all);
    all.into_iter()
        .filter(|p| p.is_file())
        .filter(|p| match std::fs::read(p) {
            Ok(bytes) => bytes.windows(needle.len()).any(|w| w == needle),
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => panic!("reading {}: {e}", p.display()),
        })
        .collect()
}

/// Copies the tree at `from` to `to`, creating `to`.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create_dir_all");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file_type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
