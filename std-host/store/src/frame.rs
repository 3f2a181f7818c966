//! A log record's bytes: the core's record format, framed and checksummed (CRC-32C) as the
//! write-ahead log stores it. The bottom of the store: the log, the events table, the index
//! and the engine all encode through it, and it imports none of them.

use taskstream_core::record::{self, Record};
use taskstream_core::{EventType, Payload};

use super::error::StoreError;

/// Appends the encoding of `rec` to `out`.
pub(crate) fn encode_into(rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), StoreError> {
    encode_framed(rec, out, |rec, buf| {
        record::encode_with(rec, buf, crc32c::crc32c)
    })
}

/// [`encode_into`] for a record whose event type and payload `checked` proves validated
/// (see [`record::encode_checked`]), its checksum by the CPU's CRC instruction where there is
/// one.
pub(crate) fn encode_checked_into(
    rec: &Record<'_>,
    checked: (EventType<'_>, Payload<'_>),
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    encode_framed(rec, out, |rec, buf| {
        record::encode_checked(rec, checked, buf, crc32c::crc32c)
    })
}

/// Appends the frame `encode` writes, into room sized once by the format's bound.
fn encode_framed(
    rec: &Record<'_>,
    out: &mut Vec<u8>,
    encode: impl for<'b> FnOnce(&Record<'_>, &'b mut [u8]) -> Result<&'b [u8], record::RecordError>,
) -> Result<(), StoreError> {
    let start = out.len();
    out.resize(start + record::max_encoded_len(rec), 0);
    let n = match encode(rec, &mut out[start..]) {
        Ok(frame) => frame.len(),
        Err(e) => {
            out.truncate(start);
            return Err(StoreError::Record(e));
        }
    };
    out.truncate(start + n);
    Ok(())
}
