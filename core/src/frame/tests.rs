use super::*;
use core::convert::Infallible;
use proptest::prelude::*;
use std::vec;
use std::vec::Vec;

/// What a reader reports, owned, so that runs can be compared.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Line(Vec<u8>),
    TooLong(usize),
}

/// Feeds `chunks` in order, draining each one, then finishes the input.
fn feed_all(cap: usize, chunks: &[&[u8]]) -> Vec<Ev> {
    let mut buf = vec![0u8; cap];
    let mut reader = LineReader::new(&mut buf);
    let mut out = Vec::new();
    for chunk in chunks {
        let mut input = *chunk;
        loop {
            match reader.feed(input) {
                FeedResult::Line { line, remaining } => {
                    assert!(line.len() <= cap);
                    out.push(Ev::Line(line.to_vec()));
                    input = remaining;
                }
                FeedResult::TooLong { skipped, remaining } => {
                    out.push(Ev::TooLong(skipped));
                    input = remaining;
                }
                FeedResult::NeedMore => break,
            }
        }
    }
    loop {
        match reader.finish() {
            FeedResult::Line { line, .. } => out.push(Ev::Line(line.to_vec())),
            FeedResult::TooLong { skipped, .. } => out.push(Ev::TooLong(skipped)),
            FeedResult::NeedMore => break,
        }
    }
    assert!(!reader.is_mid_line());
    out
}

/// The specification, written as plainly as possible: split at `\n`, and for each line
/// (including an unterminated last one) report it as the module documentation says.
fn model(cap: usize, input: &[u8]) -> Vec<Ev> {
    let mut out = Vec::new();
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    // The text after the last newline is a line only if it is not empty.
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    for raw in pieces {
        if raw.len() > cap {
            out.push(Ev::TooLong(raw.len()));
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if !line.iter().all(|b| b" \t\r".contains(b)) {
            out.push(Ev::Line(line.to_vec()));
        }
    }
    out
}

/// A reader that hands out its data in the given chunk sizes (cycled), like a serial port.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
}

impl embedded_io::ErrorType for Chunked<'_> {
    type Error = Infallible;
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        let size = self.sizes[self.next % self.sizes.len()].max(1);
        self.next += 1;
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn read_all(cap: usize, data: &[u8], sizes: Vec<usize>) -> Vec<Ev> {
    let mut buf = vec![0u8; cap];
    let mut lines = LineReader::new(&mut buf);
    let mut reader = Chunked {
        data,
        sizes,
        next: 0,
    };
    let mut out = Vec::new();
    loop {
        match read_line(&mut reader, &mut lines) {
            Ok(Line::Message(line)) => out.push(Ev::Line(line.to_vec())),
            Ok(Line::TooLong { skipped }) => out.push(Ev::TooLong(skipped)),
            Err(ReadLineError::Eof) => break,
            Err(ReadLineError::Io(e)) => match e {},
        }
    }
    out
}

fn line(s: &str) -> Ev {
    Ev::Line(s.as_bytes().to_vec())
}

#[test]
fn lines_crlf_and_blank_lines() {
    let input = b"{\"a\":1}\n\r\n{\"b\":2}\r\n\n   \n\t\r\nlast";
    let expected = vec![line("{\"a\":1}"), line("{\"b\":2}"), line("last")];
    assert_eq!(feed_all(64, &[input]), expected);
    assert_eq!(read_all(64, input, vec![64]), expected);
    assert_eq!(model(64, input), expected);
    // Only one trailing \r is removed; one inside a line is kept.
    assert_eq!(feed_all(8, &[b"a\rb\r\r\n"]), vec![line("a\rb\r")]);
}

#[test]
fn too_long_lines_are_reported_once_and_skipped() {
    let input = b"12345\n123456\n1234567890123\nabc\n";
    let expected = vec![line("12345"), line("123456"), Ev::TooLong(13), line("abc")];
    assert_eq!(model(6, input), expected);
    // Fed whole, byte by byte, and read in several chunkings.
    assert_eq!(feed_all(6, &[input]), expected);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(feed_all(6, &bytes), expected);
    for size in 1..=input.len() {
        assert_eq!(read_all(6, input, vec![size]), expected, "chunks of {size}");
    }
    // A line exactly as long as the buffer is accepted, one more byte is not; a \r counts.
    assert_eq!(
        feed_all(3, &[b"abc\nabcd\nab\r\n"]),
        vec![line("abc"), Ev::TooLong(4), line("ab")]
    );
    assert_eq!(
        read_all(3, b"abc\nabcd\nabc\r\n", vec![1]),
        vec![line("abc"), Ev::TooLong(4), Ev::TooLong(4)]
    );
    // An over-long last line without newline is still reported, once.
    assert_eq!(
        feed_all(3, &[b"ab\nabcdef"]),
        vec![line("ab"), Ev::TooLong(6)]
    );
    assert_eq!(
        read_all(3, b"ab\nabcdef", vec![2]),
        vec![line("ab"), Ev::TooLong(6)]
    );
    // A zero-length buffer takes no line at all, but still frames.
    assert_eq!(
        feed_all(0, &[b"a\n\nbc\n"]),
        vec![Ev::TooLong(1), Ev::TooLong(2)]
    );
    assert_eq!(
        read_all(0, b"a\n\nbc\n", vec![3]),
        vec![Ev::TooLong(1), Ev::TooLong(2)]
    );
}

#[test]
fn an_over_long_line_is_never_buffered_whole() {
    // 1 MiB without newline through an 8-byte buffer: counted, not stored.
    let big = vec![b'x'; 1 << 20];
    let mut buf = [0u8; 8];
    let mut reader = LineReader::new(&mut buf);
    for chunk in big.chunks(4096) {
        assert_eq!(reader.feed(chunk), FeedResult::NeedMore);
    }
    assert_eq!(
        reader.feed(b"\n{}\n"),
        FeedResult::TooLong {
            skipped: 1 << 20,
            remaining: b"{}\n"
        }
    );
    assert_eq!(
        reader.feed(b"{}\n"),
        FeedResult::Line {
            line: b"{}",
            remaining: b""
        }
    );
}

#[test]
fn whole_lines_are_returned_without_a_copy() {
    let mut buf = [0u8; 16];
    let mut reader = LineReader::new(&mut buf);
    let input = b"{\"a\":1}\n{\"b\"";
    let FeedResult::Line { line, remaining } = reader.feed(input) else {
        panic!()
    };
    assert_eq!(line.as_ptr(), input.as_ptr());
    assert_eq!(remaining, b"{\"b\"");
    assert_eq!(reader.feed(remaining), FeedResult::NeedMore);
    assert!(reader.is_mid_line());
    assert_eq!(
        reader.feed(b":2}\n"),
        FeedResult::Line {
            line: b"{\"b\":2}",
            remaining: b""
        }
    );
}

#[test]
fn split_at_every_byte_offset() {
    let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1}\r\n\nxx\r\n0123456789abcdef0123\nend\n";
    for cap in [4, 16, 25, 64] {
        let expected = model(cap, input);
        for i in 0..=input.len() {
            let (a, b) = input.split_at(i);
            assert_eq!(feed_all(cap, &[a, b]), expected, "cap {cap}, split at {i}");
            for j in i..=input.len() {
                let (b1, b2) = input[i..].split_at(j - i);
                assert_eq!(
                    feed_all(cap, &[a, b1, b2]),
                    expected,
                    "cap {cap}, split {i} {j}"
                );
            }
        }
        for size in 1..=input.len() {
            assert_eq!(
                read_all(cap, input, vec![size]),
                expected,
                "cap {cap}, read {size}"
            );
        }
    }
}

#[test]
fn feed_after_read_line_drains_the_read_ahead_first() {
    let mut buf = [0u8; 32];
    let mut lines = LineReader::new(&mut buf);
    let mut reader = Chunked {
        data: b"a\nb\nc",
        sizes: vec![32],
        next: 0,
    };
    assert_eq!(read_line(&mut reader, &mut lines), Ok(Line::Message(b"a")));
    assert_eq!(
        lines.feed(b"d\n"),
        FeedResult::Line {
            line: b"b",
            remaining: b"d\n"
        }
    );
    assert_eq!(
        lines.feed(b"d\n"),
        FeedResult::Line {
            line: b"cd",
            remaining: b""
        }
    );
}

/// Lines for the property tests: short, over a small alphabet rich in \r, blanks and
/// braces, so blank, CR-ended and over-long lines all occur.
fn lines() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let byte = prop_oneof![
        Just(b'\r'),
        Just(b' '),
        Just(b'\t'),
        Just(b'{'),
        Just(b'x'),
        any::<u8>().prop_filter("no newline", |b| *b != b'\n')
    ];
    proptest::collection::vec(proptest::collection::vec(byte, 0..24), 0..12)
}

fn join(lines: &[Vec<u8>], terminated: bool) -> Vec<u8> {
    let mut input = lines.join(&b'\n');
    if terminated && !lines.is_empty() {
        input.push(b'\n');
    }
    input
}

proptest! {
    #[test]
    fn arbitrary_chunking_yields_exactly_the_lines(
        lines in lines(),
        terminated in any::<bool>(),
        cap in 0usize..20,
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let input = join(&lines, terminated);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in cuts.into_iter().chain([input.len()]) {
            chunks.push(&input[last..c]);
            last = c;
        }
        let got = feed_all(cap, &chunks);
        prop_assert_eq!(&got, &model(cap, &input));
        // Every over-long line is reported exactly once, with its length.
        let too_long: Vec<Ev> = lines.iter().filter(|l| l.len() > cap).map(|l| Ev::TooLong(l.len())).collect();
        let reported: Vec<Ev> = got.into_iter().filter(|e| matches!(e, Ev::TooLong(_))).collect();
        prop_assert_eq!(reported, too_long);
    }

    #[test]
    fn arbitrary_reads_yield_exactly_the_lines(
        lines in lines(),
        terminated in any::<bool>(),
        cap in 0usize..20,
        sizes in proptest::collection::vec(1usize..40, 1..6),
    ) {
        let input = join(&lines, terminated);
        prop_assert_eq!(read_all(cap, &input, sizes), model(cap, &input));
    }
}

/// A writer that collects into a Vec.
#[derive(Default)]
struct Sink(Vec<u8>);

impl embedded_io::ErrorType for Sink {
    type Error = Infallible;
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

#[test]
fn line_writer_adds_one_newline_and_refuses_embedded_ones() {
    let mut w = LineWriter::new(Sink::default());
    w.write_line(br#"{"a":1}"#).unwrap();
    w.write_line(b"{}").unwrap();
    assert_eq!(
        w.write_line(b"{\"a\":\n1}"),
        Err(WriteLineError::EmbeddedNewline { at: 5 })
    );
    assert_eq!(
        w.write_line(b"\n"),
        Err(WriteLineError::EmbeddedNewline { at: 0 })
    );
    w.flush().unwrap();
    assert_eq!(w.into_inner().0, b"{\"a\":1}\n{}\n");
}

#[test]
fn compaction_moves_a_partial_line_longer_or_shorter_than_the_gap() {
    // `read_line` fills the whole buffer, takes the lines in it and moves the partial line to
    // the front before the next read: in pieces no longer than the consumed prefix, which is
    // shorter than what is moved in the first case (2 bytes before a 6-byte partial), longer
    // in the second (7 bytes before a 1-byte one), and a byte short in the third.
    let cases: [(&[u8], &[Ev]); 3] = [
        (b"a\nbcdefgh\n", &[line("a"), line("bcdefgh")]),
        (b"abcdef\ngh\n", &[line("abcdef"), line("gh")]),
        (b"abc\ndefgh\n", &[line("abc"), line("defgh")]),
    ];
    for (input, expected) in cases {
        assert_eq!(read_all(8, input, vec![8, 8]), expected, "{input:?}");
        assert_eq!(model(8, input), expected);
    }
}
