//! How the PostgreSQL store packs a run of one task's events into one row of
//! `taskstream_chunks` (schema 3): one heap tuple, one key and one protocol message per run
//! instead of per event, which is what bounds a database's insert and read rates.
//!
//! A chunk's `events` column is one byte saying how the rest is stored, then the rest:
//!
//! | first byte | the rest |
//! | ---: | --- |
//! | 0 | the packed events |
//! | 1 | the packed events' length (4 bytes, big-endian), then the packed events as one LZ4 block ([`lz4_flex`]) |
//!
//! A run is compressed here, not by the database, so that it crosses the wire compressed both
//! ways: a replica reading a task it never saw (its cache cold) was bounded by the bytes the
//! database sends, not by the database's work. The column is stored `EXTERNAL` (the database
//! does not compress it again). A run that LZ4 does not shrink is stored as it is.
//!
//! The packed events are the events in seq order, each as
//!
//! | bytes | field |
//! | ---: | --- |
//! | 8 | `at`: milliseconds since the Unix epoch, signed, big-endian |
//! | 2 | the type's length in bytes, big-endian |
//! | 4 | the payload's length in bytes, big-endian |
//! | … | the type (UTF-8), then the compact payload (UTF-8 JSON) |
//!
//! Big-endian so that SQL writes it with `int8send` and friends (the schema 2 to 3 migration
//! packs the old rows in SQL, uncompressed). The reader checks the stored length against the
//! block and [`MAX_DECODED`], every length against the bytes that are there and both strings
//! for UTF-8: a damaged row is [`StoreError::Corrupt`], never a panic, an allocation of what a
//! damaged length claims, or a wrong split.

use taskstream_core::Millis;

use super::error::StoreError;
use super::pg_cache::Cached;

/// The bytes of an event's fixed header in a chunk.
pub(crate) const HEADER: usize = 14;

/// The most events one chunk row holds (a reader that starts inside a chunk unpacks at
/// most this many events it skips).
pub(crate) const MAX_EVENTS: usize = 1024;

/// The most bytes of events one chunk row holds (beyond its last event's).
pub(crate) const MAX_BYTES: usize = 256 << 10;

/// The most bytes a compressed chunk unpacks to (a longer run is stored uncompressed), so a
/// damaged length never makes a reader allocate more.
pub(crate) const MAX_DECODED: usize = 64 << 20;

/// The first byte of a stored chunk: packed events as they are.
const RAW: u8 = 0;

/// The first byte of a stored chunk: the packed events' length, then one LZ4 block.
const LZ4: u8 = 1;

/// Runs shorter than this are stored as they are (LZ4 gains nothing on a few events).
const MIN_COMPRESSED: usize = 128;

/// A chunk being filled: a run of consecutive seqs of one task.
pub(crate) struct ChunkWriter {
    /// The seq of its first event.
    pub(crate) first: i64,
    /// The seq after its last event.
    pub(crate) end: i64,
    /// The time of its first event.
    pub(crate) first_at: i64,
    /// The latest time of its events.
    pub(crate) last_at: i64,
    /// The packed events.
    pub(crate) bytes: Vec<u8>,
}

impl ChunkWriter {
    /// An empty chunk whose first event will be `first`.
    pub(crate) fn new(first: i64) -> ChunkWriter {
        ChunkWriter {
            first,
            end: first,
            first_at: 0,
            last_at: 0,
            bytes: Vec::new(),
        }
    }

    /// Adds the event of seq [`end`](Self::end).
    pub(crate) fn push(&mut self, at: i64, event_type: &str, payload: &[u8]) {
        if self.is_empty() {
            self.first_at = at;
            self.last_at = at;
        } else {
            self.last_at = self.last_at.max(at);
        }
        // Neither saturates: types are at most `MAX_EVENT_TYPE_BYTES` (128) and payloads at
        // most the retention policy's `max_payload_bytes` (a u32), checked before they get
        // here.
        let type_len = u16::try_from(event_type.len()).unwrap_or(u16::MAX);
        let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        self.bytes
            .reserve(HEADER + event_type.len() + payload.len());
        self.bytes.extend_from_slice(&at.to_be_bytes());
        self.bytes.extend_from_slice(&type_len.to_be_bytes());
        self.bytes.extend_from_slice(&payload_len.to_be_bytes());
        self.bytes.extend_from_slice(event_type.as_bytes());
        self.bytes.extend_from_slice(payload);
        self.end += 1;
    }

    /// The `events` column of its row: compressed where that makes it smaller.
    pub(crate) fn encode(&self) -> Vec<u8> {
        if self.bytes.len() >= MIN_COMPRESSED && self.bytes.len() <= MAX_DECODED {
            if let Ok(len) = u32::try_from(self.bytes.len()) {
                let block = lz4_flex::block::compress(&self.bytes);
                if block.len() + 4 < self.bytes.len() {
                    let mut out = Vec::with_capacity(5 + block.len());
                    out.push(LZ4);
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(&block);
                    return out;
                }
            }
        }
        self.raw()
    }

    /// The `events` column of its row, uncompressed.
    fn raw(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.bytes.len());
        out.push(RAW);
        out.extend_from_slice(&self.bytes);
        out
    }

    /// Whether it holds no event.
    pub(crate) fn is_empty(&self) -> bool {
        self.end == self.first
    }

    /// Whether it holds as much as a row should.
    pub(crate) fn is_full(&self) -> bool {
        usize::try_from(self.end - self.first).unwrap_or(usize::MAX) >= MAX_EVENTS
            || self.bytes.len() >= MAX_BYTES
    }
}

/// The packed events of a chunk's `events` column (see the module docs).
///
/// # Errors
/// [`StoreError::Corrupt`] for an unknown first byte, a length above [`MAX_DECODED`] or one
/// the block does not unpack to, a damaged block.
pub(crate) fn decode(stored: &[u8]) -> Result<bytes::Bytes, StoreError> {
    let corrupt = |why: &str| StoreError::Corrupt(format!("event chunk: {why}"));
    match stored.split_first() {
        Some((&RAW, packed)) => Ok(bytes::Bytes::copy_from_slice(packed)),
        Some((&LZ4, rest)) => {
            let (len, block) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| corrupt("its length is cut"))?;
            let len = usize::try_from(u32::from_be_bytes(*len)).unwrap_or(usize::MAX);
            if len > MAX_DECODED {
                return Err(corrupt("its length is past the bound"));
            }
            let packed = lz4_flex::block::decompress(block, len)
                .map_err(|e| corrupt(&format!("a damaged block ({e})")))?;
            if packed.len() != len {
                return Err(corrupt("its block is not its length"));
            }
            Ok(bytes::Bytes::from(packed))
        }
        Some(_) => Err(corrupt("an unknown encoding")),
        None => Err(corrupt("empty")),
    }
}

/// Reads the header of the event at `off` and moves `off` past the event: its time, where
/// its type starts, its type's length and where the event ends.
fn take(bytes: &[u8], off: &mut usize) -> Result<(i64, usize, usize, usize), StoreError> {
    let at_off = *off;
    let corrupt = || StoreError::Corrupt(format!("event chunk: a damaged event at byte {at_off}"));
    let head: &[u8; HEADER] = bytes
        .get(at_off..at_off.saturating_add(HEADER))
        .and_then(|h| h.try_into().ok())
        .ok_or_else(corrupt)?;
    let [a0, a1, a2, a3, a4, a5, a6, a7, t0, t1, p0, p1, p2, p3] = *head;
    let at = i64::from_be_bytes([a0, a1, a2, a3, a4, a5, a6, a7]);
    let type_len = usize::from(u16::from_be_bytes([t0, t1]));
    let payload_len =
        usize::try_from(u32::from_be_bytes([p0, p1, p2, p3])).map_err(|_| corrupt())?;
    let start = at_off + HEADER;
    let end = start
        .checked_add(type_len)
        .and_then(|e| e.checked_add(payload_len))
        .filter(|e| *e <= bytes.len())
        .ok_or_else(corrupt)?;
    *off = end;
    Ok((at, start, type_len, end))
}

/// Unpacks a chunk whose first event is seq `first`, handing each event of seq `from` or
/// later (with its seq) to `each` until it returns `false`; the events share `chunk`'s
/// buffer. Returns the seq after the last event looked at.
///
/// # Errors
/// [`StoreError::Corrupt`] if a length runs past the row or a string is not UTF-8.
pub(crate) fn unpack(
    chunk: &bytes::Bytes,
    first: i64,
    from: i64,
    mut each: impl FnMut(i64, Cached) -> bool,
) -> Result<i64, StoreError> {
    let mut off = 0;
    let mut seq = first;
    while off < chunk.len() {
        let (at, start, type_len, end) = take(chunk, &mut off)?;
        if seq >= from {
            let body = &chunk[start..end];
            let (t, p) = body.split_at(type_len);
            if std::str::from_utf8(t).is_err() || std::str::from_utf8(p).is_err() {
                return Err(StoreError::Corrupt(format!(
                    "event chunk: event {seq} is not UTF-8"
                )));
            }
            let c = Cached {
                at: Millis(u64::try_from(at).unwrap_or(0)),
                bytes: chunk.slice(start..end),
                type_len,
            };
            if !each(seq, c) {
                return Ok(seq + 1);
            }
        }
        seq += 1;
    }
    Ok(seq)
}

/// The seq of the first event of seq `from` or later appended at `cutoff` or later, if the
/// chunk (first event `first`) holds one.
///
/// # Errors
/// As [`unpack`].
pub(crate) fn first_at_or_after(
    chunk: &[u8],
    first: i64,
    from: i64,
    cutoff: i64,
) -> Result<Option<i64>, StoreError> {
    let mut off = 0;
    let mut seq = first;
    while off < chunk.len() {
        let (at, ..) = take(chunk, &mut off)?;
        if seq >= from && at >= cutoff {
            return Ok(Some(seq));
        }
        seq += 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(events: &[(i64, &str, &str)]) -> ChunkWriter {
        let mut w = ChunkWriter::new(7);
        for (at, t, p) in events {
            w.push(*at, t, p.as_bytes());
        }
        w
    }

    fn all(bytes: &[u8], first: i64, from: i64) -> Result<Vec<(i64, u64, String)>, StoreError> {
        let b = bytes::Bytes::copy_from_slice(bytes);
        let mut out = Vec::new();
        unpack(&b, first, from, |seq, c| {
            out.push((seq, c.at.0, String::from_utf8_lossy(&c.bytes).into_owned()));
            true
        })?;
        Ok(out)
    }

    #[test]
    fn a_chunk_unpacks_to_the_events_packed_from_any_seq() {
        let w = chunk(&[(5, "a.b", "{}"), (6, "c", r#"{"x":"é"}"#), (6, "d.e", "{}")]);
        assert_eq!((w.first, w.end, w.first_at, w.last_at), (7, 10, 5, 6));
        assert_eq!(
            all(&w.bytes, 7, 0).expect("unpack"),
            [
                (7, 5, "a.b{}".to_owned()),
                (8, 6, r#"c{"x":"é"}"#.to_owned()),
                (9, 6, "d.e{}".to_owned())
            ]
        );
        assert_eq!(all(&w.bytes, 7, 9).expect("unpack").len(), 1);
        assert!(all(&w.bytes, 7, 10).expect("unpack").is_empty());
        // The type's length splits type from payload.
        let b = bytes::Bytes::copy_from_slice(&w.bytes);
        let mut types = Vec::new();
        unpack(&b, 7, 0, |_, c| {
            types.push(c.type_len);
            true
        })
        .expect("unpack");
        assert_eq!(types, [3, 1, 3]);
    }

    #[test]
    fn unpacking_stops_when_asked() {
        let w = chunk(&[(1, "a", "{}"), (2, "a", "{}"), (3, "a", "{}")]);
        let b = bytes::Bytes::copy_from_slice(&w.bytes);
        let mut n = 0;
        let after = unpack(&b, 0, 0, |_, _| {
            n += 1;
            n < 2
        })
        .expect("unpack");
        assert_eq!((n, after), (2, 2));
    }

    #[test]
    fn a_damaged_chunk_is_an_error_never_a_wrong_event() {
        let w = chunk(&[(1, "a.b", "{}"), (2, "a.b", r#"{"k":1}"#)]);
        // Every truncation but the whole and the end of the first event.
        let first_len = HEADER + 5;
        for cut in 1..w.bytes.len() {
            let r = all(&w.bytes[..cut], 0, 0);
            if cut == first_len {
                assert_eq!(r.expect("one whole event").len(), 1);
            } else {
                assert!(matches!(r, Err(StoreError::Corrupt(_))), "cut at {cut}");
            }
        }
        // A length past the end.
        let mut long = w.bytes.clone();
        long[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(all(&long, 0, 0), Err(StoreError::Corrupt(_))));
        // Bytes that are not UTF-8, in the type and in the payload.
        for at in [HEADER, HEADER + 3] {
            let mut bad = w.bytes.clone();
            bad[at] = 0xff;
            assert!(
                matches!(all(&bad, 0, 0), Err(StoreError::Corrupt(_))),
                "{at}"
            );
        }
        // Skipped events are still checked for their lengths.
        assert!(matches!(all(&long, 0, 5), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn the_first_event_at_or_after_a_time_is_found_from_a_seq() {
        let w = chunk(&[(10, "a", "{}"), (20, "a", "{}"), (30, "a", "{}")]);
        assert_eq!(first_at_or_after(&w.bytes, 7, 0, 15).expect("ok"), Some(8));
        assert_eq!(first_at_or_after(&w.bytes, 7, 9, 15).expect("ok"), Some(9));
        assert_eq!(first_at_or_after(&w.bytes, 7, 0, 5).expect("ok"), Some(7));
        assert_eq!(first_at_or_after(&w.bytes, 7, 0, 31).expect("ok"), None);
    }

    #[test]
    fn a_chunk_is_stored_compressed_when_that_is_smaller_and_reads_back_either_way() {
        let mut many = ChunkWriter::new(0);
        for i in 0..100 {
            many.push(
                i,
                "dev.taskstream.tick",
                format!(r#"{{"i":{i},"text":"the same words again"}}"#).as_bytes(),
            );
        }
        let stored = many.encode();
        assert_eq!(stored[0], LZ4);
        assert!(
            stored.len() * 4 < many.bytes.len(),
            "{} of {}",
            stored.len(),
            many.bytes.len()
        );
        assert_eq!(decode(&stored).expect("decode"), many.bytes);
        // A single short event, and bytes LZ4 cannot shrink, are stored as they are.
        let one = chunk(&[(1, "a.b", "{}")]);
        assert_eq!(one.encode()[0], RAW);
        assert_eq!(decode(&one.encode()).expect("decode"), one.bytes);
        let mut noise = ChunkWriter::new(0);
        let mut x = 0x9e37_79b9_u32;
        let text: String = (0..400)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                char::from(b'!' + u8::try_from(x % 90).unwrap_or(0))
            })
            .filter(|c| *c != '"' && *c != '\\')
            .collect();
        noise.push(0, "a", format!(r#"{{"t":"{text}"}}"#).as_bytes());
        assert_eq!(noise.encode()[0], RAW);
        assert_eq!(decode(&noise.encode()).expect("decode"), noise.bytes);
    }

    #[test]
    fn a_damaged_stored_chunk_is_an_error() {
        let mut many = ChunkWriter::new(0);
        for i in 0..100 {
            many.push(i, "a", br#"{"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}"#);
        }
        let stored = many.encode();
        assert_eq!(stored[0], LZ4);
        let bad = |s: &[u8]| matches!(decode(s), Err(StoreError::Corrupt(_)));
        assert!(bad(&[]), "empty");
        assert!(bad(&[7, 1, 2]), "an unknown encoding");
        assert!(bad(&stored[..3]), "a cut length");
        for cut in 5..stored.len() {
            assert!(bad(&stored[..cut]), "a block cut at {cut}");
        }
        // A length that is not the block's, or past the bound (never allocated).
        for len in [
            many.bytes.len() - 1,
            many.bytes.len() + 1,
            MAX_DECODED + 1,
            u32::MAX as usize,
        ] {
            let mut s = stored.clone();
            s[1..5].copy_from_slice(&u32::try_from(len).expect("u32").to_be_bytes());
            assert!(bad(&s), "length {len}");
        }
    }

    #[test]
    fn a_chunk_is_full_at_its_event_or_byte_bound() {
        let mut w = ChunkWriter::new(0);
        assert!(w.is_empty());
        for _ in 0..MAX_EVENTS - 1 {
            w.push(0, "a", b"{}");
        }
        assert!(!w.is_full());
        w.push(0, "a", b"{}");
        assert!(w.is_full());
        let mut big = ChunkWriter::new(0);
        big.push(0, "a", &vec![b' '; MAX_BYTES]);
        assert!(big.is_full() && !big.is_empty());
    }
}
