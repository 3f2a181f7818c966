//! The log record decoder (`taskstream_core::record`) on arbitrary bytes and on corrupted
//! records: it never panics, and a record is either refused or read back exactly as written,
//! never misread as another one.
//!
//! The first byte chooses the mode:
//! - even: the rest is decoded as it is (`decode` and `decode_body`); whatever decodes must
//!   re-encode and decode to the same record;
//! - odd: the rest describes a valid record (its kind, task id, seq, time, event type,
//!   payload) and then how to damage its encoding: up to three bit flips, one burst of up to 32
//!   bits, and a truncation, as a torn write or a bad sector would. The damaged bytes must
//!   decode to an error, or (if the damage cancelled out) to exactly the original record, by
//!   `decode` and by the read path's `decode_written` alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taskstream_core::record::{self, EventRecord, Record};
use taskstream_core::{Millis, Seq};

/// Reads the fuzz input front to back; an exhausted input reads as zeros.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| (acc << 8) | u64::from(self.u8()))
    }

    /// `n` bytes mapped into `alphabet`.
    fn text(&mut self, n: usize, alphabet: &[u8]) -> String {
        (0..n)
            .map(|_| char::from(alphabet[usize::from(self.u8()) % alphabet.len()]))
            .collect()
    }
}

const HEX: &[u8] = b"0123456789abcdef";
const LABEL: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
/// Characters a JSON string may hold unescaped, plus the two that need escaping.
const STRING: &[u8] = b"abcXYZ 019_-/:{}[],.\"\\";

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn arbitrary(data: &[u8]) {
    let _ = record::decode_body(data);
    let Ok((rec, used)) = record::decode(data) else {
        return;
    };
    assert!(used <= data.len());
    let mut buf = vec![0u8; record::encoded_len(&rec).expect("a decoded record has a length")];
    let bytes = record::encode(&rec, &mut buf).expect("a decoded record re-encodes");
    let (again, n) = record::decode(bytes).expect("a re-encoded record decodes");
    assert_eq!(again, rec);
    assert_eq!(n, bytes.len());
}

fn damaged(data: &[u8]) {
    let mut r = Bytes(data);
    let kind = r.u8() % 4;
    let id_len = usize::from(r.u8() % 40) + 1;
    let task_id = r.text(id_len, HEX);
    let seq = Seq::new(r.u64() & ((1 << 53) - 1)).expect("masked to 53 bits");
    let at = Millis(r.u64());
    let label_len = usize::from(r.u8() % 12) + 1;
    let event_type = format!("dev.a{}.x", r.text(label_len, LABEL));
    let text_len = usize::from(r.u8());
    let payload = format!(
        r#"{{"k":{},"n":{}}}"#,
        json_string(&r.text(text_len, STRING)),
        r.u8()
    );
    let state = format!(r#"{{"s":{}}}"#, r.u8());
    let event = EventRecord {
        task_id: &task_id,
        seq,
        at,
        event_type: &event_type,
        payload: payload.as_bytes(),
    };
    let original = match kind {
        0 => Record::Event(event),
        1 => Record::Transition {
            event,
            state: state.as_bytes(),
        },
        2 => Record::Truncate {
            task_id: &task_id,
            before: seq,
        },
        _ => Record::Remove { task_id: &task_id },
    };
    let len = record::encoded_len(&original).expect("length");
    let mut buf = vec![0u8; len];
    let good = record::encode(&original, &mut buf)
        .expect("a record built from valid parts encodes")
        .to_vec();
    assert_eq!(record::decode(&good), Ok((original, len)));

    // The damage.
    let mut bad = good.clone();
    let bits = bad.len() * 8;
    for _ in 0..r.u8() % 4 {
        let bit = usize::from(u16::from_be_bytes([r.u8(), r.u8()])) % bits;
        bad[bit / 8] ^= 1 << (bit % 8);
    }
    if r.u8() % 2 == 1 {
        let at = usize::from(u16::from_be_bytes([r.u8(), r.u8()])) % bad.len();
        let mask = r.u64().to_be_bytes();
        for (b, m) in bad.iter_mut().skip(at).zip(&mask[..4]) {
            *b ^= m;
        }
    }
    let cut = if r.u8() % 2 == 1 {
        usize::from(u16::from_be_bytes([r.u8(), r.u8()])) % (bad.len() + 1)
    } else {
        bad.len()
    };
    bad.truncate(cut);
    // A neighbour record after it, as in a log file.
    bad.extend_from_slice(&good);
    let damaged = &bad[..];

    // The read path's `decode_written` (frame and checksum, no field validation) must be as
    // strict about damage as `decode`.
    if let Ok((got, used)) = record::decode_written(damaged) {
        assert_eq!(got, original, "misread by decode_written");
        assert_eq!(&damaged[..used], &good[..], "damaged bytes read back as written");
    }
    match record::decode(damaged) {
        Err(_) => {}
        Ok((got, used)) => {
            assert_eq!(
                got, original,
                "misread: damage turned the record into another"
            );
            assert_eq!(used, len);
            assert_eq!(
                &damaged[..used],
                &good[..],
                "damaged bytes read back as the original"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => damaged(rest),
        Some((_, rest)) => arbitrary(rest),
        None => {}
    }
});
