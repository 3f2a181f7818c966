//! The two ends of the stdio transport (MCP-DIGEST a.5): [`read_lines`] splits stdin into
//! newline-delimited messages with a length limit, and [`Output`] is the single writer of
//! stdout, shared by every thread, with batched flushes.
//!
//! Nothing here parses JSON. An over-long line is reported once (as [`Line::TooLong`]) and
//! skipped to its end, so the server reads on. (The framing itself is the core's.) A write error on stdout (the client went away)
//! marks the output broken; later writes are dropped and the server winds down.

use std::io::{self, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use taskstream_core::frame::{self, FeedResult};

/// One incoming line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A non-blank line without its `\n` (and without a trailing `\r`).
    Message(&'a [u8]),
    /// A line longer than the limit; it was skipped.
    TooLong,
}

/// Reads `input` to its end, handing each line (at most `max` bytes) to `on_line`, which may
/// stop the reading early. Framing is the core's [`frame::LineReader`]; this is only the loop
/// that feeds it.
///
/// # Errors
/// The underlying read error (other than `Interrupted`).
pub(crate) fn read_lines<R: Read>(
    mut input: R,
    max: usize,
    mut on_line: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> io::Result<()> {
    let mut buf = vec![0u8; max.max(1)];
    let mut reader = frame::LineReader::new(&mut buf);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            loop {
                let line = match reader.finish() {
                    FeedResult::Line { line, .. } => Line::Message(line),
                    FeedResult::TooLong { .. } => Line::TooLong,
                    FeedResult::NeedMore => return Ok(()),
                };
                if on_line(line).is_break() {
                    return Ok(());
                }
            }
        }
        let mut rest = chunk.get(..n).unwrap_or_default();
        loop {
            let line = match reader.feed(rest) {
                FeedResult::Line { line, remaining } => {
                    rest = remaining;
                    Line::Message(line)
                }
                FeedResult::TooLong { remaining, .. } => {
                    rest = remaining;
                    Line::TooLong
                }
                FeedResult::NeedMore => break,
            };
            if on_line(line).is_break() {
                return Ok(());
            }
        }
    }
}

/// The write buffer of a stdio or socket connection.
const WRITE_BUFFER: usize = 64 * 1024;

/// The one writer of stdout. Every message is one line; a [`Batch`] holds the lock for several
/// lines and flushes once when dropped.
pub(crate) struct Output {
    inner: Mutex<BufWriter<Box<dyn Write + Send>>>,
    broken: AtomicBool,
}

impl Output {
    /// Wraps the transport's write end, buffered: lines are batched into few `write`s (a
    /// pipe or a socket).
    pub(crate) fn new(w: Box<dyn Write + Send>) -> Self {
        Self::with_buffer(w, WRITE_BUFFER)
    }

    /// Wraps a write end that buffers by itself (an HTTP connection's router, which cuts the
    /// bytes into lines): no buffer of its own, so a connection that lives as long as one
    /// HTTP stream does not hold [`WRITE_BUFFER`] bytes for its whole life.
    pub(crate) fn unbuffered(w: Box<dyn Write + Send>) -> Self {
        Self::with_buffer(w, 0)
    }

    fn with_buffer(w: Box<dyn Write + Send>, capacity: usize) -> Self {
        Self {
            inner: Mutex::new(BufWriter::with_capacity(capacity, w)),
            broken: AtomicBool::new(false),
        }
    }

    /// Locks the output for a batch of lines.
    pub(crate) fn batch(&self) -> Batch<'_> {
        Batch {
            out: self,
            w: self.inner.lock().unwrap_or_else(PoisonError::into_inner),
            dirty: false,
        }
    }

    /// Writes one line and flushes.
    pub(crate) fn send(&self, line: &[u8]) {
        self.batch().line(line);
    }

    /// Whether a write failed (the reading side is gone).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }
}

/// Exclusive access to [`Output`]; flushes on drop.
pub(crate) struct Batch<'a> {
    out: &'a Output,
    w: MutexGuard<'a, BufWriter<Box<dyn Write + Send>>>,
    dirty: bool,
}

impl Batch<'_> {
    /// Writes `line` (which must not contain a newline) and a `\n`.
    pub(crate) fn line(&mut self, line: &[u8]) {
        if self.out.is_broken() {
            return;
        }
        let res = self
            .w
            .write_all(line)
            .and_then(|()| self.w.write_all(b"\n"));
        if res.is_err() {
            self.out.broken.store(true, Ordering::Relaxed);
        }
        self.dirty = true;
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if self.dirty && !self.out.is_broken() && self.w.flush().is_err() {
            self.out.broken.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its input in pieces of `step` bytes, to split lines anywhere.
    struct Chunked {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }

    impl Read for Chunked {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let rest = self.data.get(self.pos..).unwrap_or_default();
            let n = rest.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[track_caller]
    fn check(input: &[u8], max: usize, expected: &[Option<&str>]) {
        for step in 1..=input.len().max(1) {
            let reader = Chunked {
                data: input.to_vec(),
                pos: 0,
                step,
            };
            let mut got = Vec::new();
            let res = read_lines(reader, max, |line| {
                got.push(match line {
                    Line::Message(m) => Some(String::from_utf8_lossy(m).into_owned()),
                    Line::TooLong => None,
                });
                ControlFlow::Continue(())
            });
            assert!(res.is_ok());
            let expected: Vec<Option<String>> =
                expected.iter().map(|e| e.map(str::to_owned)).collect();
            assert_eq!(got, expected, "step {step}");
        }
    }

    #[test]
    fn splits_lines_wherever_reads_end() {
        check(
            b"ab\ncd\r\n\nlast",
            8,
            &[Some("ab"), Some("cd"), Some("last")],
        );
        check(b"", 8, &[]);
    }

    #[test]
    fn over_long_lines_are_reported_once_and_skipped() {
        check(
            b"12345678\n123456789\nok\n123456789012345",
            8,
            &[Some("12345678"), None, Some("ok"), None],
        );
    }

    #[test]
    fn output_writes_whole_lines() {
        #[derive(Clone, Default)]
        struct ConnectionState(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for ConnectionState {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = ConnectionState::default();
        let out = Output::new(Box::new(sink.clone()));
        out.send(b"a");
        {
            let mut b = out.batch();
            b.line(b"b");
            b.line(b"c");
        }
        assert_eq!(sink.0.lock().unwrap().as_slice(), b"a\nb\nc\n");
    }
}
