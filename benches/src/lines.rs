//! Newline splitting over raw bytes, with as little work per line as possible: one large
//! `read` at a time, `memchr` for the newline, and a borrowed slice out. The measuring clients
//! use it for every server alike, so none is favoured by its reader.

use std::io::{self, Read};
use std::sync::LazyLock;

use memchr::memmem::Finder;

/// Built once: constructing a substring finder costs more than searching 96 bytes.
static EVENT_METHOD: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(br#""method":"notifications/tasks/event""#));
static SEQ_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(br#""seq":"#));

/// Splits what a reader yields into lines (without the `\n`).
pub struct Lines<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes read so far.
    pub bytes: u64,
}

impl<R: Read> Lines<R> {
    /// Wraps `inner` with a 1 MiB buffer (grown for longer lines).
    pub fn new(inner: R) -> Self {
        Lines {
            inner,
            buf: vec![0; 1 << 20],
            start: 0,
            end: 0,
            bytes: 0,
        }
    }

    /// The next line, or `None` at the end of the input (a last line without a newline is
    /// returned first).
    ///
    /// # Errors
    /// The reader's error.
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            let pending = &self.buf[self.start..self.end];
            if let Some(i) = memchr::memchr(b'\n', pending) {
                let s = self.start;
                self.start += i + 1;
                return Ok(Some(&self.buf[s..s + i]));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                if self.end == 0 {
                    return Ok(None);
                }
                let e = self.end;
                self.end = 0;
                return Ok(Some(&self.buf[..e]));
            }
            self.end += n;
            self.bytes += n as u64;
        }
    }

    /// The wrapped reader.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

/// Whether a JSON-RPC line is a `notifications/tasks/event` notification, by a look at its first
/// bytes (taskstream writes `"jsonrpc"` first, the TypeScript SDK `"method"` first).
#[must_use]
pub fn is_event(line: &[u8]) -> bool {
    let head = &line[..line.len().min(96)];
    EVENT_METHOD.find(head).is_some()
}

/// The `"seq":N` of an event line (the first occurrence), without parsing the rest.
#[must_use]
pub fn seq_of(line: &[u8]) -> Option<u64> {
    let at = SEQ_KEY.find(line)? + 6;
    let digits = line.get(at..)?;
    let mut n: u64 = 0;
    let mut any = false;
    for &b in digits.iter().take(20) {
        if !b.is_ascii_digit() {
            break;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        any = true;
    }
    any.then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out `step` bytes at a time, to split lines anywhere.
    struct Chunked<'a>(&'a [u8], usize);

    impl Read for Chunked<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn splits_lines_across_reads() {
        for step in [1, 2, 3, 7, 100] {
            let mut lines = Lines::new(Chunked(b"ab\n\ncde\nf", step));
            let mut got = Vec::new();
            while let Some(l) = lines.next_line().expect("read") {
                got.push(String::from_utf8(l.to_vec()).expect("utf8"));
            }
            assert_eq!(got, ["ab", "", "cde", "f"], "step {step}");
        }
    }

    #[test]
    fn recognises_events_of_both_servers() {
        let ours = br#"{"jsonrpc":"2.0","method":"notifications/tasks/event","params":{"seq":41,"taskId":"t"}}"#;
        let sdk = br#"{"method":"notifications/tasks/event","params":{"seq":7,"taskId":"t"},"jsonrpc":"2.0"}"#;
        assert_eq!((is_event(ours), seq_of(ours)), (true, Some(41)));
        assert_eq!((is_event(sdk), seq_of(sdk)), (true, Some(7)));
        assert!(!is_event(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
    }
}
