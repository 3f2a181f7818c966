//! Newline framing for MCP's stdio transport: one JSON-RPC message per line, no embedded
//! newlines (MCP-DIGEST a.5).
//!
//! [`LineReader`] is a feed-style accumulator in the manner of postcard's `CobsAccumulator`:
//! give it bytes as they arrive, chunked any way at all, and it hands back whole lines. It owns
//! no memory; the caller lends the buffer (the host a `Vec` of `--max-message-bytes`, firmware a
//! static array), and the buffer's length is the longest line accepted. A longer line is never
//! buffered whole: it is reported once, as [`FeedResult::TooLong`], when its newline arrives,
//! and the bytes in between are counted and dropped. Blank lines are skipped.
//!
//! [`read_line`] and [`LineWriter`] are thin `embedded-io` adapters over the same logic. What
//! this module deliberately does not do: look inside a line (that is [`crate::rpc`]).
//!
//! # Lines
//!
//! A line is the bytes before a `\n`, without one trailing `\r` (so CRLF input works). A line
//! made only of spaces, tabs and `\r` is blank and skipped. The limit counts the bytes before
//! the `\n` (a trailing `\r` included): a buffer of `n` bytes accepts lines of up to `n` bytes.

use core::fmt;

use embedded_io::{Read, Write};

/// What one call to [`LineReader::feed`] produced.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a line that is not handled is lost"]
pub enum FeedResult<'r, 'i> {
    /// All input was consumed and no line is complete yet.
    NeedMore,
    /// A complete line (without `\n` and a trailing `\r`); `remaining` is the input after its
    /// newline, to be fed next.
    Line {
        /// The line.
        line: &'r [u8],
        /// The unconsumed rest of the input.
        remaining: &'i [u8],
    },
    /// A line longer than the buffer ended; it was dropped (reported once, here).
    TooLong {
        /// The length of the dropped line, without its `\n`.
        skipped: usize,
        /// The unconsumed rest of the input.
        remaining: &'i [u8],
    },
}

/// What [`read_line`] returns.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a line that is not handled is lost"]
pub enum Line<'r> {
    /// A complete line.
    Message(&'r [u8]),
    /// A line longer than the buffer; it was dropped. Answer -32600 and read on.
    TooLong {
        /// The length of the dropped line, without its `\n`.
        skipped: usize,
    },
}

/// A step found in the buffer, as indices (so that no borrow outlives a decision).
enum Step {
    Line(usize, usize),
    TooLong(usize),
}

/// Splits a byte stream into lines, in a buffer the caller lends. See the module documentation.
pub struct LineReader<'buf> {
    buf: &'buf mut [u8],
    /// The first byte of the current partial line.
    start: usize,
    /// `buf[start..scanned]` is known to hold no `\n`.
    scanned: usize,
    /// `buf[scanned..end]` was read ahead by [`read_line`] and not yet scanned.
    end: usize,
    /// `Some(n)`: dropping an over-long line of which `n` bytes were seen so far.
    skipping: Option<usize>,
}

impl fmt::Debug for LineReader<'_> {
    /// The state, not the (possibly megabyte) buffer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineReader")
            .field("capacity", &self.buf.len())
            .field("start", &self.start)
            .field("scanned", &self.scanned)
            .field("end", &self.end)
            .field("skipping", &self.skipping)
            .finish()
    }
}

/// `line` without one trailing `\r`, or `None` if that leaves a blank line.
fn trim(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r')) {
        None
    } else {
        Some(line)
    }
}

/// The bounds of `buf[a..b]` once trimmed like [`trim`], or `None` if blank.
fn trim_range(buf: &[u8], a: usize, b: usize) -> Option<(usize, usize)> {
    let line = buf.get(a..b)?;
    trim(line).map(|t| (a, a + t.len()))
}

impl<'buf> LineReader<'buf> {
    /// A reader whose longest accepted line is `buf.len()` bytes.
    #[must_use]
    pub fn new(buf: &'buf mut [u8]) -> Self {
        LineReader {
            buf,
            start: 0,
            scanned: 0,
            end: 0,
            skipping: None,
        }
    }

    /// The longest line accepted, in bytes (the length of the lent buffer).
    #[must_use]
    pub fn max_line_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Whether part of a line is buffered (or an over-long line is being dropped): if the
    /// input ends now, [`finish`](Self::finish) has something to report.
    #[must_use]
    pub fn is_mid_line(&self) -> bool {
        self.end > self.start || self.skipping.is_some()
    }

    fn clear(&mut self) {
        self.start = 0;
        self.scanned = 0;
        self.end = 0;
    }

    /// Looks for the next line in the buffered read-ahead.
    fn scan(&mut self) -> Option<Step> {
        loop {
            let unscanned = self.buf.get(self.scanned..self.end)?;
            let Some(i) = unscanned.iter().position(|&b| b == b'\n') else {
                self.scanned = self.end;
                if let Some(n) = &mut self.skipping {
                    *n = n.saturating_add(self.end - self.start);
                    self.clear();
                }
                return None;
            };
            let newline = self.scanned + i;
            let line_start = self.start;
            self.start = newline + 1;
            self.scanned = newline + 1;
            if let Some(n) = self.skipping.take() {
                return Some(Step::TooLong(n.saturating_add(newline - line_start)));
            }
            if let Some((a, b)) = trim_range(self.buf, line_start, newline) {
                return Some(Step::Line(a, b));
            }
        }
    }

    /// Appends input that holds no newline to the partial line, or starts or continues
    /// dropping it if it gets too long.
    fn absorb(&mut self, input: &[u8]) {
        if let Some(n) = &mut self.skipping {
            *n = n.saturating_add(input.len());
            return;
        }
        let pending = self.end - self.start;
        let total = pending.saturating_add(input.len());
        if total > self.buf.len() {
            self.skipping = Some(total);
            self.clear();
            return;
        }
        if self.end + input.len() > self.buf.len() {
            self.compact();
        }
        let end = self.end + input.len();
        if let Some(dst) = self.buf.get_mut(self.end..end) {
            dst.copy_from_slice(input);
            self.end = end;
            self.scanned = end;
        }
    }

    /// Moves the partial line (and any read-ahead) to the front of the buffer.
    ///
    /// In pieces of at most `start` bytes, each copied from wholly after its destination, so
    /// that every copy is between disjoint slices: a `memcpy`. The overlapping move of
    /// `copy_within` links the general `memmove`, 1.5 KiB of flash on a microcontroller, for
    /// this alone. The bytes moved are the same; the pieces number at most `len / start`, and
    /// a compaction happens at most once per buffer's worth of input.
    fn compact(&mut self) {
        let (start, len) = (self.start, self.end - self.start);
        if start == 0 {
            return;
        }
        let mut done = 0;
        while done < len {
            let n = start.min(len - done);
            let (front, back) = self.buf.split_at_mut(start + done);
            match (front.get_mut(done..done + n), back.get(..n)) {
                (Some(dst), Some(src)) => dst.copy_from_slice(src),
                // Unreachable: `start + len <= buf.len()`.
                _ => break,
            }
            done += n;
        }
        self.end -= start;
        self.scanned -= start;
        self.start = 0;
    }

    /// Feeds bytes in. Call again with `remaining` until it returns [`FeedResult::NeedMore`]:
    ///
    /// ```
    /// # use taskstream_core::frame::{FeedResult, LineReader};
    /// let mut buf = [0u8; 64];
    /// let mut reader = LineReader::new(&mut buf);
    /// let mut lines = 0;
    /// for chunk in [&b"{\"a\":"[..], b"1}\n{\"b\"", b":2}\n"] {
    ///     let mut input = chunk;
    ///     loop {
    ///         match reader.feed(input) {
    ///             FeedResult::Line { line, remaining } => {
    ///                 lines += 1; // handle `line`
    ///                 input = remaining;
    ///             }
    ///             FeedResult::TooLong { remaining, .. } => input = remaining,
    ///             FeedResult::NeedMore => break,
    ///         }
    ///     }
    /// }
    /// assert_eq!(lines, 2);
    /// ```
    ///
    /// A line that arrives whole in `input` while nothing is buffered is returned from `input`
    /// without a copy.
    pub fn feed<'r, 'i: 'r>(&'r mut self, input: &'i [u8]) -> FeedResult<'r, 'i> {
        // Read-ahead left by `read_line` comes first.
        match self.scan() {
            Some(Step::Line(a, b)) => {
                return match self.buf.get(a..b) {
                    Some(line) => FeedResult::Line {
                        line,
                        remaining: input,
                    },
                    None => FeedResult::NeedMore,
                }
            }
            Some(Step::TooLong(skipped)) => {
                return FeedResult::TooLong {
                    skipped,
                    remaining: input,
                }
            }
            None => {}
        }
        let mut input = input;
        loop {
            let Some(i) = input.iter().position(|&b| b == b'\n') else {
                self.absorb(input);
                return FeedResult::NeedMore;
            };
            let (head, rest) = (
                input.get(..i).unwrap_or_default(),
                input.get(i + 1..).unwrap_or_default(),
            );
            if let Some(n) = self.skipping.take() {
                return FeedResult::TooLong {
                    skipped: n.saturating_add(head.len()),
                    remaining: rest,
                };
            }
            let pending = self.end - self.start;
            let total = pending.saturating_add(head.len());
            if total > self.buf.len() {
                self.clear();
                return FeedResult::TooLong {
                    skipped: total,
                    remaining: rest,
                };
            }
            if pending == 0 {
                self.clear();
                if let Some(line) = trim(head) {
                    return FeedResult::Line {
                        line,
                        remaining: rest,
                    };
                }
                input = rest;
                continue;
            }
            self.absorb(head);
            let (a, b) = (self.start, self.end);
            self.clear();
            let Some((a, b)) = trim_range(self.buf, a, b) else {
                input = rest;
                continue;
            };
            return match self.buf.get(a..b) {
                Some(line) => FeedResult::Line {
                    line,
                    remaining: rest,
                },
                None => FeedResult::NeedMore,
            };
        }
    }

    /// Ends the input (EOF): reports a last line that had no newline, or an over-long one being
    /// dropped, and resets the reader. Returns [`FeedResult::NeedMore`] if there is nothing.
    pub fn finish(&mut self) -> FeedResult<'_, 'static> {
        if let Some(step) = self.scan() {
            // A complete line still buffered: hand it out first; call `finish` again after.
            return match step {
                Step::Line(a, b) => match self.buf.get(a..b) {
                    Some(line) => FeedResult::Line {
                        line,
                        remaining: &[],
                    },
                    None => FeedResult::NeedMore,
                },
                Step::TooLong(skipped) => FeedResult::TooLong {
                    skipped,
                    remaining: &[],
                },
            };
        }
        if let Some(skipped) = self.skipping.take() {
            self.clear();
            return FeedResult::TooLong {
                skipped,
                remaining: &[],
            };
        }
        let (a, b) = (self.start, self.end);
        self.clear();
        match trim_range(self.buf, a, b).and_then(|(a, b)| self.buf.get(a..b)) {
            Some(line) => FeedResult::Line {
                line,
                remaining: &[],
            },
            None => FeedResult::NeedMore,
        }
    }
}

/// Why [`read_line`] stopped.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadLineError<E> {
    /// The input ended and every line was returned.
    Eof,
    /// The reader failed.
    Io(E),
}

impl<E: fmt::Debug> fmt::Display for ReadLineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadLineError::Eof => f.write_str("end of input"),
            ReadLineError::Io(e) => write!(f, "read failed: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for ReadLineError<E> {}

/// Reads the next line from `reader`, reading straight into the line buffer (no second copy).
///
/// Bytes read past the line stay in `lines` for the next call. At the end of the input a last
/// line without a newline is still returned, then [`ReadLineError::Eof`].
///
/// # Errors
/// [`ReadLineError::Io`] if the reader fails; [`ReadLineError::Eof`] at the end of the input.
pub fn read_line<'r, R: Read>(
    reader: &mut R,
    lines: &'r mut LineReader<'_>,
) -> Result<Line<'r>, ReadLineError<R::Error>> {
    loop {
        match lines.scan() {
            Some(Step::Line(a, b)) => {
                return lines
                    .buf
                    .get(a..b)
                    .map(Line::Message)
                    .ok_or(ReadLineError::Eof)
            }
            Some(Step::TooLong(skipped)) => return Ok(Line::TooLong { skipped }),
            None => {}
        }
        // Everything buffered is one partial line (or nothing): make room behind it.
        if lines.end == lines.buf.len() {
            lines.compact();
        }
        if lines.end == lines.buf.len() {
            // The buffer holds a whole line's worth without a newline: one more byte decides
            // whether it is exactly full or too long.
            let mut one = [0u8; 1];
            let n = reader.read(&mut one).map_err(ReadLineError::Io)?;
            if n == 0 {
                return finish_line(lines);
            }
            if let Some(skipped) = &mut lines.skipping {
                // Only with an empty buffer: every byte comes through here.
                if one == [b'\n'] {
                    let skipped = *skipped;
                    lines.skipping = None;
                    return Ok(Line::TooLong { skipped });
                }
                *skipped = skipped.saturating_add(1);
            } else if one == [b'\n'] {
                let (a, b) = (lines.start, lines.end);
                lines.clear();
                if let Some((a, b)) = trim_range(lines.buf, a, b) {
                    return lines
                        .buf
                        .get(a..b)
                        .map(Line::Message)
                        .ok_or(ReadLineError::Eof);
                }
            } else {
                lines.skipping = Some(lines.end - lines.start + 1);
                lines.clear();
            }
            continue;
        }
        let end = lines.end;
        let n = match lines.buf.get_mut(end..) {
            Some(free) => reader.read(free).map_err(ReadLineError::Io)?,
            None => 0,
        };
        if n == 0 {
            return finish_line(lines);
        }
        lines.end = end + n.min(lines.buf.len() - end);
    }
}

fn finish_line<'r, E>(lines: &'r mut LineReader<'_>) -> Result<Line<'r>, ReadLineError<E>> {
    match lines.finish() {
        FeedResult::Line { line, .. } => Ok(Line::Message(line)),
        FeedResult::TooLong { skipped, .. } => Ok(Line::TooLong { skipped }),
        FeedResult::NeedMore => Err(ReadLineError::Eof),
    }
}

/// Why [`LineWriter::write_line`] refused or failed.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteLineError<E> {
    /// The message holds a raw `\n` at this offset; nothing was written (MCP-DIGEST a.5).
    EmbeddedNewline {
        /// Offset of the first `\n`.
        at: usize,
    },
    /// The writer failed; part of the line may have been written.
    Io(E),
}

impl<E: fmt::Debug> fmt::Display for WriteLineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteLineError::EmbeddedNewline { at } => {
                write!(f, "message contains a raw newline at byte {at}")
            }
            WriteLineError::Io(e) => write!(f, "write failed: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for WriteLineError<E> {}

/// Writes messages as lines to an `embedded-io` writer.
#[derive(Debug)]
pub struct LineWriter<W> {
    inner: W,
}

impl<W: Write> LineWriter<W> {
    /// A line writer over `inner`.
    pub const fn new(inner: W) -> Self {
        LineWriter { inner }
    }

    /// Writes `message` followed by `\n`.
    ///
    /// # Errors
    /// [`WriteLineError::EmbeddedNewline`] (and nothing written) if `message` contains a raw
    /// `\n`; [`WriteLineError::Io`] if the writer fails.
    pub fn write_line(&mut self, message: &[u8]) -> Result<(), WriteLineError<W::Error>> {
        if let Some(at) = message.iter().position(|&b| b == b'\n') {
            return Err(WriteLineError::EmbeddedNewline { at });
        }
        self.inner.write_all(message).map_err(WriteLineError::Io)?;
        self.inner.write_all(b"\n").map_err(WriteLineError::Io)
    }

    /// Flushes the writer.
    ///
    /// # Errors
    /// The writer's error.
    pub fn flush(&mut self) -> Result<(), W::Error> {
        self.inner.flush()
    }

    /// The writer, by reference.
    pub fn inner_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

#[cfg(test)]
mod tests;
