//! The machine's bounds, measured the plainest way: small appends to a plain file made durable
//! with `fdatasync` (one per event, or one per batch written with one `write`), and
//! newline-delimited lines written to a pipe one `write` each (pre-serialised, or serialised
//! per line by the core's splice writer).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use taskstream_core::{rpc, Seq};

/// Appends `events` copies of `record` to a fresh file in `dir`, `batch` per `write` and one
/// `fdatasync` per batch; returns the time taken (file creation excluded).
///
/// # Errors
/// Any file error.
pub fn fsync_appends(
    dir: &Path,
    record: &[u8],
    events: usize,
    batch: usize,
) -> io::Result<Duration> {
    let path = dir.join(format!("raw-fsync-{}-{batch}.log", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)?;
    file.sync_all()?;
    let batch = batch.max(1);
    let buf: Vec<u8> = record.repeat(batch);
    let rounds = events.div_ceil(batch);
    let start = Instant::now();
    for _ in 0..rounds {
        file.write_all(&buf)?;
        file.sync_data()?;
    }
    let took = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(took)
}

/// The scheduler's bound on group commit with waiting appenders: `threads` threads each park
/// until woken; one coordinator waits until all are parked, then wakes every one
/// (`Thread::unpark`, one futex wake each), `cycles` times. Returns the time taken: per cycle,
/// what a flush that releases `threads` waiting appenders costs on top of the device, with
/// no appending at all.
///
/// # Panics
/// If a thread cannot be spawned.
#[must_use]
pub fn wake_parked(threads: usize, cycles: u64) -> Duration {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = threads.max(1);
    let generation = AtomicU64::new(0);
    let parked = AtomicUsize::new(0);
    let handles: Mutex<Vec<std::thread::Thread>> = Mutex::new(Vec::with_capacity(threads));
    let coordinator = std::thread::current();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (generation, parked, handles, coordinator) =
                (&generation, &parked, &handles, &coordinator);
            s.spawn(move || {
                let mut seen = 0;
                while seen <= cycles {
                    handles
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(std::thread::current());
                    if parked.fetch_add(1, Ordering::AcqRel) + 1 == threads {
                        coordinator.unpark();
                    }
                    loop {
                        let g = generation.load(Ordering::Acquire);
                        if g != seen {
                            seen = g;
                            break;
                        }
                        std::thread::park();
                    }
                }
            });
        }
        let mut start = Instant::now();
        for cycle in 0..=cycles {
            while parked.load(Ordering::Acquire) < threads {
                std::thread::park();
            }
            if cycle == 0 {
                // Every thread spawned and parked once: the measured cycles start here.
                start = Instant::now();
            }
            parked.store(0, Ordering::Release);
            let woken = std::mem::take(
                &mut *handles
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            generation.store(cycle + 1, Ordering::Release);
            for t in woken {
                t.unpark();
            }
        }
        start.elapsed()
    })
}

/// How a pipe writer produces its lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeMode {
    /// The same pre-serialised line each time: one `write` per line.
    Line,
    /// Each line serialised by `rpc::write_event` (seq = its index), then one `write`.
    Serialise,
}

/// The `notifications/tasks/event` line (with its `\n`) for event `seq` of `task_id` with a
/// payload of `payload_bytes`.
///
/// # Panics
/// If `seq` is out of range (> 2^53 − 1).
#[must_use]
pub fn event_line(task_id: &str, seq: u64, payload: &[u8]) -> Vec<u8> {
    let ev = rpc::EventNotification {
        task_id,
        seq: Seq::new(seq).expect("seq in range"),
        event_type: crate::TICK,
        payload,
    };
    let mut out = vec![0; rpc::event_len(&ev) + 1];
    let n = rpc::write_event(&ev, &mut out).expect("sized by event_len");
    out[n] = b'\n';
    out
}

/// The writing side of the pipe bound: writes `events` lines to stdout, one `write(2)` each
/// (stdout is reopened unbuffered).
///
/// # Errors
/// Any write error.
pub fn pipe_writer(mode: PipeMode, events: u64, payload_bytes: usize) -> io::Result<()> {
    // The pipe itself, unbuffered (one write per line); by its descriptor's path, which holds
    // even where `/dev/stdout` is not the usual link to it.
    let mut out: File = OpenOptions::new().write(true).open("/proc/self/fd/1")?;
    let task_id = "0f9e8d7c6b5a49382716051423324150";
    let payload = crate::payload_of(payload_bytes);
    match mode {
        PipeMode::Line => {
            let line = event_line(task_id, 12_345, &payload);
            for _ in 0..events {
                out.write_all(&line)?;
            }
        }
        PipeMode::Serialise => {
            let mut buf = vec![0u8; 64 * 1024];
            for seq in 0..events {
                let ev = rpc::EventNotification {
                    task_id,
                    seq: Seq::new(seq).ok_or_else(|| io::Error::other("seq out of range"))?,
                    event_type: crate::TICK,
                    payload: &payload,
                };
                let n = rpc::write_event(&ev, &mut buf).map_err(|_| io::Error::other("too big"))?;
                buf[n] = b'\n';
                out.write_all(&buf[..=n])?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_line_is_one_line_of_the_event() {
        let line = event_line("t1", 7, br#"{"i":0}"#);
        assert_eq!(
            line,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/event\",\"params\":{\"seq\":7,\"taskId\":\"t1\",\"type\":\"dev.taskstream.tick\",\"payload\":{\"i\":0},\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"t1\"}}}}\n"
        );
    }

    #[test]
    fn fsync_appends_leave_nothing_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let took = fsync_appends(dir.path(), b"0123456789\n", 10, 4).expect("appends");
        assert!(took > Duration::ZERO);
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
    }
}
