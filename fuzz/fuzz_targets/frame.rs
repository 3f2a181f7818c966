//! The newline framer on arbitrary byte streams split at arbitrary points: the lines it yields
//! are exactly the input's lines (blank ones skipped, one trailing `\r` stripped), over-long
//! ones are reported once with their length and skipped, and nothing else comes out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taskstream_core::frame::{FeedResult, LineReader};

/// What a reference splitter expects for `input` with a `cap`-byte line buffer.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    Line(Vec<u8>),
    TooLong(usize),
}

fn reference(input: &[u8], cap: usize) -> Vec<Out> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    let ends_with_newline = input.last() == Some(&b'\n');
    if ends_with_newline {
        parts.pop();
    }
    for part in parts {
        if part.len() > cap {
            out.push(Out::TooLong(part.len()));
            continue;
        }
        let line = part.strip_suffix(b"\r").unwrap_or(part);
        if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            continue;
        }
        out.push(Out::Line(line.to_vec()));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else {
        return;
    };
    let Some((&cuts, input)) = rest.split_first() else {
        return;
    };
    let cap = usize::from(cfg % 32) + 1;
    let mut buf = vec![0u8; cap];
    let mut reader = LineReader::new(&mut buf);
    let mut got = Vec::new();
    // Split the input into chunks whose sizes come from the data itself.
    let mut pos = 0;
    let mut k = usize::from(cuts);
    while pos < input.len() {
        let len = (k % 7) + 1;
        k = k.wrapping_mul(31).wrapping_add(7);
        let end = (pos + len).min(input.len());
        let mut chunk = &input[pos..end];
        pos = end;
        loop {
            match reader.feed(chunk) {
                FeedResult::Line { line, remaining } => {
                    got.push(Out::Line(line.to_vec()));
                    chunk = remaining;
                }
                FeedResult::TooLong { skipped, remaining } => {
                    got.push(Out::TooLong(skipped));
                    chunk = remaining;
                }
                FeedResult::NeedMore => break,
            }
        }
    }
    match reader.finish() {
        FeedResult::Line { line, .. } => got.push(Out::Line(line.to_vec())),
        FeedResult::TooLong { skipped, .. } => got.push(Out::TooLong(skipped)),
        FeedResult::NeedMore => {}
    }
    assert_eq!(got, reference(input, cap), "cap {cap}");
});
