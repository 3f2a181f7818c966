//! [`RawEvent`]: a retained event as the store holds it, for the replay hot path.
//!
//! Reading an event out of sled as a [`StoredEvent`] copies its type and payload into fresh
//! allocations; delivery only splices them into a line. A `RawEvent` keeps sled's reference-
//! counted value (or, for an event from a running task's read cache, one copy of it) and the
//! places of type and payload inside it, found by one decode when it was read.

use std::ops::Range;

use taskstream_core::record::{self, Record};
use taskstream_core::{Millis, Seq};

use super::error::StoreError;
use super::model::StoredEvent;

/// One retained event, read without copying it out of the index.
#[derive(Clone, Debug)]
pub struct RawEvent {
    seq: Seq,
    at: Millis,
    bytes: Bytes,
    event_type: Range<usize>,
    payload: Range<usize>,
}

/// Where the bytes live.
#[derive(Clone, Debug)]
enum Bytes {
    /// The event's framed, checksummed core record, as read from the log (or the index).
    Index(bytes::Bytes),
    /// Type then payload, copied out of a read cache.
    Copied(Box<[u8]>),
    /// Type then payload, shared with a cache that keeps them (a clone is a reference count).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Shared(bytes::Bytes),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Index(v) => v,
            Bytes::Copied(b) => b,
            Bytes::Shared(b) => b,
        }
    }
}

impl RawEvent {
    /// Decodes a stored record, checking that it is the event its key names. The index holds
    /// only records this store encoded (and validated), so the frame and checksum are checked
    /// but the fields are not validated twice (`record::decode_written`), and the checksum is
    /// the CPU's CRC-32C instruction where there is one.
    pub(crate) fn from_index(
        raw: bytes::Bytes,
        task_id: &str,
        seq: Seq,
    ) -> Result<RawEvent, StoreError> {
        let base = raw.as_ptr().addr();
        let place = |s: &[u8]| {
            let start = s.as_ptr().addr() - base;
            start..start + s.len()
        };
        let (at, event_type, payload) = match record::decode_written_with(&raw, crc32c::crc32c) {
            // In the log a status event is read from its task's `Transition` record.
            Ok((Record::Event(e) | Record::Transition { event: e, .. }, _))
                if e.task_id == task_id && e.seq == seq =>
            {
                (e.at, place(e.event_type.as_bytes()), place(e.payload))
            }
            Ok(_) => {
                return Err(StoreError::Corrupt(format!(
                    "event {seq} of task {task_id:?} is not where it should be"
                )))
            }
            Err(e) => return Err(StoreError::Record(e)),
        };
        Ok(RawEvent {
            seq,
            at,
            bytes: Bytes::Index(raw),
            event_type,
            payload,
        })
    }

    /// An event copied out of a read cache.
    pub(crate) fn copied(seq: Seq, at: Millis, event_type: &str, payload: &[u8]) -> RawEvent {
        let mut bytes = Vec::with_capacity(event_type.len() + payload.len());
        bytes.extend_from_slice(event_type.as_bytes());
        bytes.extend_from_slice(payload);
        RawEvent {
            seq,
            at,
            bytes: Bytes::Copied(bytes.into_boxed_slice()),
            event_type: 0..event_type.len(),
            payload: event_type.len()..event_type.len() + payload.len(),
        }
    }

    /// An event whose type then payload are `bytes` (`type_len` bytes of type), shared with
    /// whoever else holds them.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn shared(seq: Seq, at: Millis, bytes: bytes::Bytes, type_len: usize) -> RawEvent {
        let type_len = type_len.min(bytes.len());
        let len = bytes.len();
        RawEvent {
            seq,
            at,
            bytes: Bytes::Shared(bytes),
            event_type: 0..type_len,
            payload: type_len..len,
        }
    }

    /// Its seq.
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// When it was appended (wall clock).
    #[must_use]
    pub fn at(&self) -> Millis {
        self.at
    }

    /// Its vendor-prefixed type.
    #[must_use]
    pub fn event_type(&self) -> &str {
        // The range was cut from a `&str` when the event was read, so this cannot fail.
        let bytes = self.bytes.as_slice().get(self.event_type.clone());
        bytes
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    /// Its payload: one JSON object in compact form.
    #[must_use]
    pub fn payload(&self) -> &[u8] {
        // As for the type: the range is in bounds by construction.
        self.bytes
            .as_slice()
            .get(self.payload.clone())
            .unwrap_or_default()
    }

    /// A copy as a [`StoredEvent`].
    #[must_use]
    pub fn to_stored(&self) -> StoredEvent {
        StoredEvent {
            seq: self.seq,
            event_type: self.event_type().to_owned(),
            payload: self.payload().to_vec(),
            at: self.at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskstream_core::record::{EventRecord, Record};

    #[test]
    fn the_hardware_crc_is_the_cores_crc() {
        // Every length through several 8- and 64-byte strides, and unaligned starts.
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..9 {
            for len in 0..600 {
                let s = &data[start..start + len];
                assert_eq!(
                    crc32c::crc32c(s),
                    record::crc32c(s),
                    "start {start} len {len}"
                );
            }
        }
    }

    fn stored(seq: u64, payload: &[u8]) -> bytes::Bytes {
        let rec = Record::Event(EventRecord {
            task_id: "t1",
            seq: Seq::new(seq).unwrap(),
            at: Millis(7),
            event_type: "dev.taskstream.tick",
            payload,
        });
        let mut buf = vec![0; record::encoded_len(&rec).unwrap()];
        let n = record::encode(&rec, &mut buf).unwrap().len();
        buf.truncate(n);
        bytes::Bytes::from(buf)
    }

    #[test]
    fn reads_type_and_payload_in_place() {
        let raw = stored(3, br#"{"i":3}"#);
        let ev = RawEvent::from_index(raw, "t1", Seq::new(3).unwrap()).unwrap();
        assert_eq!(ev.seq(), Seq::new(3).unwrap());
        assert_eq!(ev.at(), Millis(7));
        assert_eq!(ev.event_type(), "dev.taskstream.tick");
        assert_eq!(ev.payload(), br#"{"i":3}"#);
        assert_eq!(ev.to_stored().payload, br#"{"i":3}"#.to_vec());
    }

    #[test]
    fn refuses_the_wrong_event_and_a_damaged_one() {
        let raw = stored(3, br#"{"i":3}"#);
        assert!(matches!(
            RawEvent::from_index(raw.clone(), "t1", Seq::new(4).unwrap()),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            RawEvent::from_index(raw.clone(), "t2", Seq::new(3).unwrap()),
            Err(StoreError::Corrupt(_))
        ));
        // Every single-bit flip is caught by the frame or the checksum.
        for i in 0..raw.len() * 8 {
            let mut bytes = raw.to_vec();
            bytes[i / 8] ^= 1 << (i % 8);
            let got = RawEvent::from_index(bytes.into(), "t1", Seq::new(3).unwrap());
            assert!(got.is_err(), "bit {i} flipped went unnoticed");
        }
    }

    #[test]
    fn a_copied_event_reads_back() {
        let ev = RawEvent::copied(Seq::ZERO, Millis(1), "dev.taskstream.tick", b"{}");
        assert_eq!(ev.event_type(), "dev.taskstream.tick");
        assert_eq!(ev.payload(), b"{}");
    }
}
