//! The checkpoint record `CHECKPOINT`: what the index held at its last durable checkpoint, so
//! that an index that lost data (damaged, truncated, zeroed, deleted) is detected at open
//! instead of serving a silently smaller store.
//!
//! It is written after the index is durable at the checkpoint's LSN and before the log before
//! that LSN is deleted (write `CHECKPOINT.tmp`, `fdatasync`, rename, `fsync` the data dir), so
//! on disk its LSN is never later than the index's own checkpoint LSN, and the log from its LSN
//! on is always there. It names, for every task the index held, the task's next seq then
//! (seqs only grow; a task goes away only by a `Remove` record, which is in the log after the
//! checkpoint). Text, one line each, ending with a CRC-32C of everything before it:
//!
//! ```text
//! taskstream-checkpoint 1
//! lsn 4096
//! task 0123456789abcdef0123456789abcdef 302
//! crc 1a2b3c4d
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::error::StoreError;
use super::storage::StdStorage;

/// The file's name in the data dir.
pub(crate) const FILE: &str = "CHECKPOINT";
/// Its replacement while it is written.
const TMP: &str = "CHECKPOINT.tmp";
/// The first line.
const MAGIC: &str = "taskstream-checkpoint 1";

/// What the index held at its last checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// The LSN of the checkpoint.
    pub(crate) lsn: u64,
    /// Every task's next seq at the checkpoint.
    pub(crate) tasks: HashMap<String, u64>,
}

/// Encodes a checkpoint record.
fn encode(lsn: u64, tasks: &[(String, u64)]) -> String {
    let mut text = format!("{MAGIC}\nlsn {lsn}\n");
    for (id, next) in tasks {
        // Task ids are record-checked: no control characters, so no newline; a space would
        // make the line ambiguous, so ids are written last-but-one and split from the right.
        let _ = writeln!(text, "task {id} {next}");
    }
    let crc = crc32c::crc32c(text.as_bytes());
    let _ = writeln!(text, "crc {crc:08x}");
    text
}

/// Decodes a checkpoint record; `None` if it is not a whole, intact one.
fn decode(text: &str) -> Option<Checkpoint> {
    let text = text.strip_suffix('\n')?;
    let body_end = text.rfind('\n')? + 1;
    let (body, trailer) = text.split_at(body_end);
    let hex = trailer.strip_prefix("crc ")?;
    if hex.len() != 8 {
        return None;
    }
    let crc = u32::from_str_radix(hex, 16).ok()?;
    if crc != crc32c::crc32c(body.as_bytes()) {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let lsn = lines.next()?.strip_prefix("lsn ")?.parse().ok()?;
    let mut tasks = HashMap::new();
    for line in lines {
        let rest = line.strip_prefix("task ")?;
        let (id, next) = rest.rsplit_once(' ')?;
        tasks.insert(id.to_owned(), next.parse().ok()?);
    }
    Some(Checkpoint { lsn, tasks })
}

/// Reads the checkpoint record of `data_dir`: `Ok(None)` if there is none (a new data dir, or
/// one written before this record existed).
///
/// # Errors
/// [`StoreError::Corrupt`] if it is there but not intact; [`StoreError::Io`] if it cannot be
/// read.
pub(crate) fn read(data_dir: &Path) -> Result<Option<Checkpoint>, StoreError> {
    let path = data_dir.join(FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("reading", &path)(e)),
    };
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(decode)
        .map(Some)
        .ok_or_else(|| {
            StoreError::damaged(
                data_dir,
                format!(
                    "the checkpoint record {} is damaged (its checksum or format does not \
                     match), so the index cannot be checked against it",
                    path.display()
                ),
            )
        })
}

/// Replaces the checkpoint record of `data_dir`, atomically and (with `sync`) durably.
///
/// # Errors
/// [`StoreError::Io`] if it cannot be written, synced or renamed.
pub(crate) fn write(
    data_dir: &Path,
    lsn: u64,
    tasks: &[(String, u64)],
    sync: bool,
) -> Result<(), StoreError> {
    let tmp = data_dir.join(TMP);
    let path = data_dir.join(FILE);
    let bytes = encode(lsn, tasks);
    crate::storage::replace(&StdStorage, data_dir, &tmp, &path, bytes.as_bytes(), sync)
        .map_err(|(context, path, e)| StoreError::io(context, &path)(e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_any_changed_byte_is_refused() {
        let tasks = vec![("a b".to_owned(), 3), ("0123".to_owned(), 302)];
        let text = encode(4096, &tasks);
        let got = decode(&text).expect("decodes");
        assert_eq!(got.lsn, 4096);
        assert_eq!(got.tasks.get("a b"), Some(&3));
        assert_eq!(got.tasks.get("0123"), Some(&302));
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[i] ^= 0x01;
            let decoded = std::str::from_utf8(&bad).ok().and_then(decode);
            assert_ne!(decoded.as_ref(), Some(&got), "flipped byte {i}");
        }
        for cut in 0..bytes.len() {
            let decoded = std::str::from_utf8(&bytes[..cut]).ok().and_then(decode);
            assert!(decoded.is_none(), "cut at {cut}");
        }
    }
}
