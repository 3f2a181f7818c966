//! The log record format: one stored operation on a task's event log, postcard-encoded inside a
//! versioned, length-prefixed, checksummed frame, so that a torn or corrupted record is detected
//! and never misread as another valid record.
//!
//! ```text
//! offset  size  field
//! 0       2     MAGIC            0xC5 0x7A
//! 2       1     VERSION          1
//! 3       4     body length L    u32, little endian, at most MAX_BODY_BYTES
//! 7       L     body             postcard encoding of `Record`
//! 7+L     4     CRC-32C          little endian, over bytes 0 .. 7+L (header and body)
//! ```
//!
//! A reader finds the record length in the header, so records can be laid end to end in a log
//! file; the first record that does not decode ([`RecordError`]) marks the end of the valid log
//! (a torn tail after a crash reads as [`RecordError::Truncated`], [`RecordError::BadMagic`] or
//! [`RecordError::BadChecksum`]). CRC-32C detects every single-bit error and every burst of up
//! to 32 bits in the covered bytes; a flip in the length field makes the checksum land elsewhere.
//!
//! Decoding also validates what can be validated without context: the seq range (through
//! [`Seq`]'s serde `try_from`), the event type ([`EventType::new`]), the payload (one JSON object
//! in compact form, [`json::validate_object`]) and the task id. [`encode`] applies the same
//! checks, so what is written always reads back.
//!
//! This module neither allocates nor does I/O; the host owns files, fsync and recovery.

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::event::{EventType, EventTypeError};
use crate::json::{self, JsonError};
use crate::seq::Seq;
use crate::time::Millis;

/// The first two bytes of every record.
pub const MAGIC: [u8; 2] = [0xC5, 0x7A];
/// The frame and body format version this module writes and reads.
pub const VERSION: u8 = 1;
/// Bytes before the body: magic, version, body length.
pub const HEADER_BYTES: usize = 7;
/// Bytes after the body: the CRC-32C.
pub const TRAILER_BYTES: usize = 4;
/// Frame bytes around a body.
pub const OVERHEAD_BYTES: usize = HEADER_BYTES + TRAILER_BYTES;
/// The largest body accepted (256 MiB); a longer length field is corruption.
pub const MAX_BODY_BYTES: usize = 1 << 28;
/// The longest task id a record carries, in bytes.
pub const MAX_TASK_ID_BYTES: usize = 255;

/// One event of a task, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord<'a> {
    /// The task the event belongs to.
    pub task_id: &'a str,
    /// Its seq within the task.
    pub seq: Seq,
    /// When it was appended, on the host's clock.
    pub at: Millis,
    /// Its vendor-prefixed type (EV-06, EV-07).
    pub event_type: &'a str,
    /// Its payload: one JSON object in compact form (EV-05).
    #[serde(serialize_with = "as_bytes")]
    pub payload: &'a [u8],
}

/// One operation on the log of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record<'a> {
    /// An event appended to a task.
    Event(#[serde(borrow)] EventRecord<'a>),
    /// An event that changes the task's own state (its creation, its terminal status), together
    /// with that state, so that both are applied or neither is.
    Transition {
        /// The event.
        #[serde(borrow)]
        event: EventRecord<'a>,
        /// The host's record of the task as of this event: one JSON object.
        #[serde(serialize_with = "as_bytes")]
        state: &'a [u8],
    },
    /// Retention dropped every event of the task before `before`.
    Truncate {
        /// The task.
        task_id: &'a str,
        /// The earliest seq retained from now on.
        before: Seq,
    },
    /// The task and all its events were removed (terminal retention).
    Remove {
        /// The task.
        task_id: &'a str,
    },
}

impl<'a> Record<'a> {
    /// The task the record is about.
    #[must_use]
    pub const fn task_id(&self) -> &'a str {
        match self {
            Record::Event(e) | Record::Transition { event: e, .. } => e.task_id,
            Record::Truncate { task_id, .. } | Record::Remove { task_id } => task_id,
        }
    }

    /// The event the record carries, if any.
    #[must_use]
    pub const fn event(&self) -> Option<&EventRecord<'a>> {
        match self {
            Record::Event(e) | Record::Transition { event: e, .. } => Some(e),
            Record::Truncate { .. } | Record::Remove { .. } => None,
        }
    }
}

fn as_bytes<S: serde::Serializer>(bytes: &&[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes)
}

/// Why a record cannot be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The input ends before the record does; `needed` bytes would be required to go on.
    Truncated {
        /// The length the input would need (at least).
        needed: usize,
    },
    /// The input does not start with [`MAGIC`]: not a record (or zeroed space after a log end).
    BadMagic,
    /// A record of another format version.
    BadVersion(u8),
    /// The length field exceeds [`MAX_BODY_BYTES`].
    TooLarge {
        /// The body length found.
        len: usize,
    },
    /// The checksum does not match: a torn or corrupted record.
    BadChecksum {
        /// The checksum stored in the record.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The checksum matches but the body is not a well-formed postcard [`Record`] (this
    /// includes a seq beyond 2^53 - 1, which [`Seq`]'s serde `try_from` refuses).
    Malformed,
    /// The task id is empty, longer than [`MAX_TASK_ID_BYTES`] or holds a control character.
    InvalidTaskId,
    /// The event type is not vendor-prefixed.
    InvalidEventType(EventTypeError),
    /// The payload or the task state is not one JSON object.
    InvalidJson(JsonError),
    /// The payload holds insignificant white space; records store the compact form only.
    PayloadNotCompact,
    /// The output buffer is too small; [`encoded_len`] tells the size needed.
    BufferTooSmall,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Truncated { needed } => {
                write!(f, "record truncated: {needed} bytes needed")
            }
            RecordError::BadMagic => f.write_str("not a record (bad magic)"),
            RecordError::BadVersion(v) => write!(f, "record format version {v} is not supported"),
            RecordError::TooLarge { len } => write!(f, "record body length {len} is too large"),
            RecordError::BadChecksum { stored, computed } => write!(
                f,
                "record checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            RecordError::Malformed => f.write_str("record body is malformed"),
            RecordError::InvalidTaskId => f.write_str("record task id is invalid"),
            RecordError::InvalidEventType(e) => write!(f, "record event type: {e}"),
            RecordError::InvalidJson(e) => write!(f, "record JSON: {e}"),
            RecordError::PayloadNotCompact => f.write_str("record payload is not compact JSON"),
            RecordError::BufferTooSmall => f.write_str("record buffer too small"),
        }
    }
}

impl core::error::Error for RecordError {}

/// The exact number of bytes [`encode`] writes for `record`.
///
/// # Errors
/// [`RecordError::TooLarge`] if the body would exceed [`MAX_BODY_BYTES`].
pub fn encoded_len(record: &Record<'_>) -> Result<usize, RecordError> {
    let body = postcard::serialize_with_flavor(record, postcard::ser_flavors::Size::default())
        .map_err(|_| RecordError::Malformed)?;
    if body > MAX_BODY_BYTES {
        return Err(RecordError::TooLarge { len: body });
    }
    Ok(body + OVERHEAD_BYTES)
}

/// Validates `record` and writes its frame at the start of `buf`; returns the bytes written.
///
/// # Errors
/// The validation errors of [`decode`], or [`RecordError::BufferTooSmall`].
pub fn encode<'b>(record: &Record<'_>, buf: &'b mut [u8]) -> Result<&'b [u8], RecordError> {
    encode_with(record, buf, crc32c)
}

/// [`encode`] with the caller's CRC-32C, as for [`decode_written_with`] (it must compute
/// exactly [`crc32c`]).
///
/// # Errors
/// As [`encode`].
pub fn encode_with<'b>(
    record: &Record<'_>,
    buf: &'b mut [u8],
    crc32c: impl FnOnce(&[u8]) -> u32,
) -> Result<&'b [u8], RecordError> {
    validate(record)?;
    write_frame(record, buf, crc32c)
}

/// [`encode`] for a record whose event type and payload the caller has validated already:
/// `checked` holds them as an [`EventType`] and a compact [`crate::event::Payload`] over the
/// very bytes the record's event refers to, and the JSON is not scanned a second time (the
/// task id, and a transition's state, still are). With any other `checked` — other bytes, a
/// payload not in compact form, a record without an event — the record is validated in full,
/// so a wrong proof costs time, never a bad record. `crc32c` is the caller's CRC-32C, as for
/// [`decode_written_with`] (it must compute exactly [`crc32c`]).
///
/// # Errors
/// As [`encode`].
pub fn encode_checked<'b>(
    record: &Record<'_>,
    checked: (EventType<'_>, crate::event::Payload<'_>),
    buf: &'b mut [u8],
    crc32c: impl FnOnce(&[u8]) -> u32,
) -> Result<&'b [u8], RecordError> {
    let (ty, payload) = checked;
    let proven = record.event().is_some_and(|e| {
        same_bytes(e.event_type.as_bytes(), ty.as_str().as_bytes())
            && payload
                .as_compact()
                .is_some_and(|c| same_bytes(c, e.payload))
    });
    if proven {
        validate_task_id(record.task_id())?;
        if let Record::Transition { state, .. } = record {
            json::validate_object(state).map_err(RecordError::InvalidJson)?;
        }
    } else {
        validate(record)?;
    }
    write_frame(record, buf, crc32c)
}

/// Whether `a` and `b` are the same bytes in memory (not merely equal).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    core::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
}

/// An upper bound of [`encoded_len`] found without serialising: the strings' lengths plus
/// the most every length prefix, integer and tag can take. For sizing a buffer once.
#[must_use]
pub fn max_encoded_len(record: &Record<'_>) -> usize {
    // A tag, three length prefixes (5 bytes each at most, for lengths below 2^32) and two
    // 64-bit varints (10 each) cover every variant's fixed fields.
    const FIXED: usize = 5 + 3 * 5 + 2 * 10;
    let strings = match record {
        Record::Event(e) => e.task_id.len() + e.event_type.len() + e.payload.len(),
        Record::Transition { event: e, state } => {
            e.task_id.len() + e.event_type.len() + e.payload.len() + state.len() + 5
        }
        Record::Truncate { task_id, .. } | Record::Remove { task_id } => task_id.len(),
    };
    OVERHEAD_BYTES + FIXED + strings
}

/// Writes the frame of a validated `record` at the start of `buf`.
fn write_frame<'b>(
    record: &Record<'_>,
    buf: &'b mut [u8],
    crc32c: impl FnOnce(&[u8]) -> u32,
) -> Result<&'b [u8], RecordError> {
    if buf.len() < OVERHEAD_BYTES {
        return Err(RecordError::BufferTooSmall);
    }
    let (header, rest) = buf.split_at_mut(HEADER_BYTES);
    let body_len = postcard::to_slice(record, rest)
        .map_err(|e| match e {
            postcard::Error::SerializeBufferFull => RecordError::BufferTooSmall,
            _ => RecordError::Malformed,
        })?
        .len();
    if body_len > MAX_BODY_BYTES {
        return Err(RecordError::TooLarge { len: body_len });
    }
    let len = u32::try_from(body_len).map_err(|_| RecordError::TooLarge { len: body_len })?;
    // `header` is exactly `HEADER_BYTES` long; postcard wrote the body within `buf`, so
    // `end <= buf.len()`, and `total` is checked below.
    header[..2].copy_from_slice(&MAGIC);
    header[2] = VERSION;
    header[3..].copy_from_slice(&len.to_le_bytes());
    let end = HEADER_BYTES + body_len;
    let total = end + TRAILER_BYTES;
    if buf.len() < total {
        return Err(RecordError::BufferTooSmall);
    }
    let crc = crc32c(&buf[..end]);
    buf[end..total].copy_from_slice(&crc.to_le_bytes());
    Ok(&buf[..total])
}

/// Decodes the record at the start of `bytes`; returns it and the number of bytes it occupies.
/// Bytes after the record are not looked at.
///
/// # Errors
/// [`RecordError`]: the frame is truncated or corrupt, the body is malformed, or a field breaks
/// a rule (seq range, event type, JSON payload, task id).
pub fn decode(bytes: &[u8]) -> Result<(Record<'_>, usize), RecordError> {
    let (body, total) = checked_body(bytes, crc32c)?;
    Ok((decode_body(body)?, total))
}

/// The total length (header, body and trailer) the frame header at the start of `bytes`
/// claims, when its magic and version are right and the header is whole; `None` otherwise.
/// Neither the length's bound ([`MAX_BODY_BYTES`]) nor whether `bytes` holds the whole frame
/// is checked: a log's recovery uses this to judge a record that did not [`decode`].
#[must_use]
pub fn peek_frame_len(bytes: &[u8]) -> Option<usize> {
    let header = bytes.get(..HEADER_BYTES)?;
    if header[..2] != MAGIC || header[2] != VERSION {
        return None;
    }
    let len = u32::from_le_bytes([header[3], header[4], header[5], header[6]]);
    Some(
        usize::try_from(len)
            .unwrap_or(usize::MAX)
            .saturating_add(OVERHEAD_BYTES),
    )
}

/// Checks the frame at the start of `bytes` (magic, version, length, checksum) and returns the
/// body and the frame's total length.
fn checked_body(
    bytes: &[u8],
    crc32c: impl FnOnce(&[u8]) -> u32,
) -> Result<(&[u8], usize), RecordError> {
    let magic_seen = bytes.len().min(MAGIC.len());
    if bytes.get(..magic_seen) != MAGIC.get(..magic_seen) {
        return Err(RecordError::BadMagic);
    }
    let Some(header) = bytes.get(..HEADER_BYTES) else {
        return Err(RecordError::Truncated {
            needed: HEADER_BYTES,
        });
    };
    if header[2] != VERSION {
        return Err(RecordError::BadVersion(header[2]));
    }
    let len = u32::from_le_bytes([header[3], header[4], header[5], header[6]]);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > MAX_BODY_BYTES {
        return Err(RecordError::TooLarge { len });
    }
    let end = HEADER_BYTES + len;
    let total = end + TRAILER_BYTES;
    let (Some(covered), Some(trailer)) = (bytes.get(..end), bytes.get(end..total)) else {
        return Err(RecordError::Truncated { needed: total });
    };
    let stored = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let computed = crc32c(covered);
    if stored != computed {
        return Err(RecordError::BadChecksum { stored, computed });
    }
    let body = covered.get(HEADER_BYTES..).ok_or(RecordError::Malformed)?;
    Ok((body, total))
}

/// Decodes a record this process's own store wrote and keyed, checking its frame and checksum
/// but not re-validating its fields (event type, JSON payload), which [`encode`] validated
/// before it was written. Corruption is still detected (the CRC-32C covers every byte), never
/// misread; what is skipped is only the second proof of what the first already proved. Use
/// [`decode`] for anything read from a log whose writer is not known.
///
/// # Errors
/// As [`decode`], except the field-validation errors.
pub fn decode_written(bytes: &[u8]) -> Result<(Record<'_>, usize), RecordError> {
    decode_written_with(bytes, crc32c)
}

/// [`decode_written`] with the caller's CRC-32C (Castagnoli) in place of the core's portable
/// one: a host with a CRC instruction (SSE4.2, ARMv8) checks a record several times faster.
/// `crc32c` must compute exactly [`crc32c`] (its tests should say so); a wrong one only makes
/// records fail their check, never misread.
///
/// # Errors
/// As [`decode_written`].
pub fn decode_written_with(
    bytes: &[u8],
    crc32c: impl FnOnce(&[u8]) -> u32,
) -> Result<(Record<'_>, usize), RecordError> {
    let (body, total) = checked_body(bytes, crc32c)?;
    let (record, rest) =
        postcard::take_from_bytes::<Record<'_>>(body).map_err(|_| RecordError::Malformed)?;
    if !rest.is_empty() {
        return Err(RecordError::Malformed);
    }
    Ok((record, total))
}

/// Decodes and validates a record body (the bytes between header and checksum) without any
/// frame check. [`decode`] is what readers of a log want; this is the parser alone, for fuzzing.
///
/// # Errors
/// [`RecordError::Malformed`] if `body` is not exactly one postcard [`Record`], or the
/// validation errors of [`decode`].
pub fn decode_body(body: &[u8]) -> Result<Record<'_>, RecordError> {
    let (record, rest) =
        postcard::take_from_bytes::<Record<'_>>(body).map_err(|_| RecordError::Malformed)?;
    if !rest.is_empty() {
        return Err(RecordError::Malformed);
    }
    validate(&record)?;
    Ok(record)
}

fn validate(record: &Record<'_>) -> Result<(), RecordError> {
    validate_task_id(record.task_id())?;
    if let Some(event) = record.event() {
        EventType::new(event.event_type).map_err(RecordError::InvalidEventType)?;
        let compact = json::validate_object(event.payload).map_err(RecordError::InvalidJson)?;
        if compact != event.payload.len() {
            return Err(RecordError::PayloadNotCompact);
        }
    }
    if let Record::Transition { state, .. } = record {
        json::validate_object(state).map_err(RecordError::InvalidJson)?;
    }
    Ok(())
}

fn validate_task_id(id: &str) -> Result<(), RecordError> {
    if id.is_empty() || id.len() > MAX_TASK_ID_BYTES || id.chars().any(char::is_control) {
        return Err(RecordError::InvalidTaskId);
    }
    Ok(())
}

/// CRC-32C (Castagnoli, reflected polynomial `0x82F63B78`) of `data`; the check value of
/// `b"123456789"` is `0xE3069283`.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// Continues a CRC-32C over `data` from a raw (pre-inverted) state: eight bytes a step
/// ("slicing-by-8", eight table lookups per step instead of one per byte), then byte-wise.
fn crc32c_update(mut crc: u32, data: &[u8]) -> u32 {
    let t = &CRC32C_TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

/// The slicing-by-8 lookup tables (8 KiB), computed at compile time: table 0 is the byte-wise
/// table; table k advances a byte's contribution by k more zero bytes.
static CRC32C_TABLES: [[u32; 256]; 8] = crc32c_tables();

const fn crc32c_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    tables[0] = crc32c_table();
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
}

const fn crc32c_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

#[cfg(test)]
mod tests;
