//! The PostgreSQL store's chunk rows (`std-host/store/src/pg_chunk.rs`, compiled here as it
//! is) read from arbitrary bytes and from damaged chunks: reading never panics, hands out only
//! whole events of valid UTF-8 inside the row, in seq order, and reads back exactly what was
//! packed.
//!
//! The first byte chooses the mode:
//! - even: the rest is a chunk's `events` column as the database might return it (decoded,
//!   then unpacked);
//! - odd: the rest describes events (time, type, payload) to pack, then a truncation: the
//!   stored column (compressed or not) must decode to the packed events, and the whole chunk
//!   read back as packed, from any seq; a truncated one must read as an error, or as the
//!   events before the cut when it falls between two events.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// What `pg_chunk` takes from the store's crate, the same types.
mod error {
    pub(crate) use taskstream_store::StoreError;
}

/// The store's cached event, as `pg_chunk` fills it.
mod pg_cache {
    pub(crate) struct Cached {
        pub(crate) at: taskstream_core::Millis,
        pub(crate) bytes: bytes::Bytes,
        pub(crate) type_len: usize,
    }
}

#[path = "../../std-host/store/src/pg_chunk.rs"]
#[allow(dead_code)]
mod pg_chunk;

type Event = (i64, String, String);

fn read(chunk: &[u8], first: i64, from: i64) -> Result<Vec<Event>, error::StoreError> {
    let b = bytes::Bytes::copy_from_slice(chunk);
    let mut out = Vec::new();
    let mut last = None;
    pg_chunk::unpack(&b, first, from, |seq, c| {
        assert!(seq >= from && last.is_none_or(|l| seq == l + 1), "seq {seq} after {last:?}");
        last = Some(seq);
        let (t, p) = c.bytes.split_at(c.type_len);
        let t = std::str::from_utf8(t).expect("a type handed out is UTF-8");
        let p = std::str::from_utf8(p).expect("a payload handed out is UTF-8");
        out.push((i64::try_from(c.at.0).unwrap_or(-1), t.to_owned(), p.to_owned()));
        true
    })?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(packed) = pg_chunk::decode(rest) {
            let _ = read(&packed, 5, i64::from(mode / 2) % 8);
        }
        let _ = read(rest, 5, i64::from(mode / 2) % 8);
        let _ = pg_chunk::first_at_or_after(rest, 0, 0, i64::from(mode));
        return;
    }
    // Events: a byte of time, a type length (0..16) and a payload length (0..64) of the
    // input's bytes (made UTF-8 lossily), until the input runs out; the last byte cuts.
    let mut w = pg_chunk::ChunkWriter::new(3);
    let mut packed: Vec<Event> = Vec::new();
    let mut bounds = vec![0];
    let mut input = rest;
    while let [at, tl, pl, more @ ..] = input {
        let (tl, pl) = (usize::from(*tl % 16), usize::from(*pl % 64));
        if more.len() < tl + pl {
            break;
        }
        let t = String::from_utf8_lossy(&more[..tl]).into_owned();
        let p = String::from_utf8_lossy(&more[tl..tl + pl]).into_owned();
        w.push(i64::from(*at), &t, p.as_bytes());
        packed.push((i64::from(*at), t, p));
        bounds.push(w.bytes.len());
        input = &more[tl + pl..];
    }
    let stored = w.encode();
    assert_eq!(pg_chunk::decode(&stored).expect("a stored chunk decodes"), w.bytes);
    let _ = pg_chunk::decode(&stored[..stored.len() / 2]);
    for from in [0, 3, 4, 3 + packed.len() as i64] {
        let skip = usize::try_from((from - 3).max(0)).unwrap_or(0).min(packed.len());
        assert_eq!(read(&w.bytes, 3, from).expect("a whole chunk reads"), packed[skip..]);
    }
    let cut = usize::from(*rest.last().unwrap_or(&0)) * w.bytes.len() / 256;
    match read(&w.bytes[..cut], 3, 0) {
        Ok(events) => {
            let whole = bounds.iter().position(|b| *b == cut);
            assert_eq!(Some(events.len()), whole, "a cut at {cut} inside an event read");
            assert_eq!(events, packed[..events.len()]);
        }
        Err(_) => assert!(!bounds.contains(&cut), "a cut at {cut} between events refused"),
    }
});
