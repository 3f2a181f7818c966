//! Writing the stream messages into a caller's buffer: `notifications/tasks/event`, the
//! `tasks/stream` result and error responses. Each message is compact JSON on one line
//! (MCP-DIGEST a.5): every string is escaped (`"`, `\`, and all control characters, so no raw
//! newline can ever appear), UTF-8 passes through unchanged, and the stored event payload is
//! spliced in verbatim, never re-parsed.
//!
//! Every writer has a length twin (`event_len`, …) that gives the exact number of bytes it
//! writes, so a caller can size its buffer first. Both run the same code over two sinks, one
//! that counts and one that copies, so they cannot disagree.

use core::fmt;

use crate::id::RequestId;
use crate::seq::Seq;

use super::error::{ErrorData, RpcError};

/// The output buffer is too small for the message; nothing useful was written. The message's
/// exact length is given by the matching `*_len` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall;

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("output buffer too small for the message")
    }
}

impl core::error::Error for BufferTooSmall {}

/// The protocol era of the request being answered (MCP-DIGEST a.3, a.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// 2025-06-18 / 2025-11-25, chosen by an `initialize` handshake: results are plain.
    Legacy,
    /// 2026-07-28, stateless: every result carries `resultType`.
    Modern,
}

/// One `notifications/tasks/event` to write (SEP-2694, "notifications/tasks/event").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventNotification<'a> {
    /// The task; written both as `params.taskId` and in the related-task `_meta` (NT-01, NT-02).
    pub task_id: &'a str,
    /// The event's seq.
    pub seq: Seq,
    /// The event type, e.g. `dev.taskstream.tick`.
    pub event_type: &'a str,
    /// The payload as stored: the compact text of one JSON object (EV-05), as produced by
    /// [`crate::event::Payload::write_compact`]. It is spliced verbatim and not checked again;
    /// compact JSON never contains a raw newline.
    pub payload: &'a [u8],
}

/// Where bytes go: a counter or a buffer.
trait Sink {
    fn put(&mut self, bytes: &[u8]) -> Result<(), BufferTooSmall>;
}

/// Counts the bytes instead of writing them.
struct Count(usize);

impl Sink for Count {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> Result<(), BufferTooSmall> {
        self.0 = self.0.saturating_add(bytes.len());
        Ok(())
    }
}

/// Copies the bytes into a buffer.
struct Slice<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Sink for Slice<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> Result<(), BufferTooSmall> {
        let end = self.pos.checked_add(bytes.len()).ok_or(BufferTooSmall)?;
        self.buf
            .get_mut(self.pos..end)
            .ok_or(BufferTooSmall)?
            .copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }
}

fn counted(f: impl FnOnce(&mut Count) -> Result<(), BufferTooSmall>) -> usize {
    let mut count = Count(0);
    // Counting never fails.
    let _ = f(&mut count);
    count.0
}

fn written(
    out: &mut [u8],
    f: impl FnOnce(&mut Slice<'_>) -> Result<(), BufferTooSmall>,
) -> Result<usize, BufferTooSmall> {
    let mut slice = Slice { buf: out, pos: 0 };
    f(&mut slice)?;
    Ok(slice.pos)
}

/// What a byte becomes inside a JSON string: 0 = itself, `b'u'` = `\u00XX`, else `\` + it.
/// The same choices as `serde_json`, so the output is byte-identical to its.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = escape_of(i as u8);
        i += 1;
    }
    t
};

/// One byte's entry of [`ESCAPE`], computed.
const fn escape_of(b: u8) -> u8 {
    match b {
        0x08 => b'b',
        0x09 => b't',
        0x0a => b'n',
        0x0c => b'f',
        0x0d => b'r',
        0..=0x1f => b'u',
        b'"' | b'\\' => b,
        _ => 0,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes in `x` needs an escape: below 0x20, `"` or `\`. The classic
/// SWAR tests ("has less than", "has zero byte") are exact about *whether* such a byte exists.
#[inline]
const fn any_needs_escape(x: u64) -> bool {
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
    let q = x ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q & HIGHS;
    let b = x ^ (ONES * b'\\' as u64);
    let backslash = b.wrapping_sub(ONES) & !b & HIGHS;
    (control | quote | backslash) != 0
}

/// Writes `s` as a JSON string, quotes included.
#[inline]
fn string(sink: &mut impl Sink, s: &str) -> Result<(), BufferTooSmall> {
    sink.put(b"\"")?;
    string_body(sink, s)?;
    sink.put(b"\"")
}

/// Writes the escaped contents of `s` without its quotes (the caller's constant text around
/// it carries them, one copy fewer each side). Runs of bytes that need no escape are copied in
/// one piece, and found 8 bytes at a time.
#[inline]
fn string_body(sink: &mut impl Sink, s: &str) -> Result<(), BufferTooSmall> {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Feature `lean`: byte by byte only, for less code (the same output).
        if let Some(Ok(word)) = bytes
            .get(i..i + 8)
            .filter(|_| !cfg!(feature = "lean"))
            .map(<[u8; 8]>::try_from)
        {
            if !any_needs_escape(u64::from_le_bytes(word)) {
                i += 8;
                continue;
            }
        }
        let block_end = bytes.len().min(i + 8);
        while i < block_end {
            let b = bytes.get(i).copied().unwrap_or(0);
            // Feature `lean`: computed, without the 256-byte table (the same entries).
            let esc = if cfg!(feature = "lean") {
                escape_of(b)
            } else {
                ESCAPE.get(usize::from(b)).copied().unwrap_or(0)
            };
            if esc != 0 {
                sink.put(bytes.get(start..i).unwrap_or_default())?;
                if esc == b'u' {
                    let hi = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
                    let lo = HEX.get(usize::from(b & 0xf)).copied().unwrap_or(b'0');
                    sink.put(&[b'\\', b'u', b'0', b'0', hi, lo])?;
                } else {
                    sink.put(&[b'\\', esc])?;
                }
                start = i + 1;
            }
            i += 1;
        }
    }
    sink.put(bytes.get(start..).unwrap_or_default())
}

/// Writes an unsigned integer in decimal.
///
/// No 64-bit division is used: on a 32-bit microcontroller that is a library routine of about
/// 900 bytes of flash (`__aeabi_uldivmod`), linked for this function alone. Digits of a value
/// above 32 bits are peeled with [`div10`]; the rest (every seq and id a device reaches) is
/// 32-bit arithmetic, which the Cortex-M3 and up divide by 10 with a multiply.
fn unsigned(sink: &mut impl Sink, n: u64) -> Result<(), BufferTooSmall> {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut wide = n;
    while let (false, Some(i_next)) = (u32::try_from(wide).is_ok(), i.checked_sub(1)) {
        let (q, r) = div10(wide);
        i = i_next;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + r;
        }
        wide = q;
    }
    let mut m = u32::try_from(wide).unwrap_or_default();
    while let Some(i_next) = i.checked_sub(1) {
        i = i_next;
        if let Some(d) = digits.get_mut(i) {
            // `m % 10` is below 10.
            *d = b'0' + (m % 10) as u8;
        }
        m /= 10;
        if m == 0 {
            break;
        }
    }
    sink.put(digits.get(i..).unwrap_or_default())
}

/// `(n / 10, n % 10)` with 32-bit divisions only: with `n = hi·2^32 + lo`, divide `hi`, then
/// the remainder joined to the upper and the lower 16 bits of `lo` in turn (each step's
/// dividend is below `10·2^16`, so each quotient fits 16 bits).
const fn div10(n: u64) -> (u64, u8) {
    let hi = (n >> 32) as u32;
    let lo = n as u32;
    let mid = (hi % 10) << 16 | lo >> 16;
    let low = (mid % 10) << 16 | (lo & 0xffff);
    let q = (((hi / 10) as u64) << 32) | (((mid / 10) << 16) | (low / 10)) as u64;
    (q, (low % 10) as u8)
}

fn signed(sink: &mut impl Sink, n: i64) -> Result<(), BufferTooSmall> {
    if n < 0 {
        sink.put(b"-")?;
    }
    unsigned(sink, n.unsigned_abs())
}

fn id(sink: &mut impl Sink, id: Option<&RequestId>) -> Result<(), BufferTooSmall> {
    match id {
        None => sink.put(b"null"),
        Some(RequestId::Number(n)) => signed(sink, *n),
        Some(RequestId::String(s)) => string(sink, s),
    }
}

fn event(sink: &mut impl Sink, ev: &EventNotification<'_>) -> Result<(), BufferTooSmall> {
    sink.put(br#"{"jsonrpc":"2.0","method":"notifications/tasks/event","params":{"seq":"#)?;
    unsigned(sink, ev.seq.get())?;
    sink.put(br#","taskId":""#)?;
    string_body(sink, ev.task_id)?;
    sink.put(br#"","type":""#)?;
    string_body(sink, ev.event_type)?;
    sink.put(br#"","payload":"#)?;
    sink.put(ev.payload)?;
    sink.put(br#","_meta":{"io.modelcontextprotocol/related-task":{"taskId":""#)?;
    string_body(sink, ev.task_id)?;
    sink.put(br#""}}}}"#)
}

/// The exact length of the `notifications/tasks/event` line [`write_event`] writes (without a
/// newline).
#[must_use]
pub fn event_len(event: &EventNotification<'_>) -> usize {
    counted(|c| self::event(c, event))
}

/// Writes one `notifications/tasks/event` (SEP-2694) into `out` and returns its length:
///
/// `{"jsonrpc":"2.0","method":"notifications/tasks/event","params":{"seq":N,"taskId":"…",
/// "type":"…","payload":{…},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"…"}}}}`
///
/// (on one line), with the related-task `_meta` naming the same task (EV-01, NT-01, NT-02).
///
/// # Errors
/// [`BufferTooSmall`] if `out` is shorter than [`event_len`].
pub fn write_event(event: &EventNotification<'_>, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
    written(out, |s| self::event(s, event))
}

fn stream_result(sink: &mut impl Sink, rid: &RequestId, era: Era) -> Result<(), BufferTooSmall> {
    sink.put(br#"{"jsonrpc":"2.0","id":"#)?;
    id(sink, Some(rid))?;
    sink.put(match era {
        Era::Legacy => br#","result":{}}"#.as_slice(),
        Era::Modern => br#","result":{"resultType":"complete"}}"#.as_slice(),
    })
}

/// The exact length of the result [`write_stream_result`] writes.
#[must_use]
pub fn stream_result_len(id: &RequestId, era: Era) -> usize {
    counted(|c| stream_result(c, id, era))
}

/// Writes the result that closes a `tasks/stream` request normally (TS-03, RS-04, RS-06):
/// `{}` in a legacy session, `{"resultType":"complete"}` in a modern request (DX-01).
///
/// # Errors
/// [`BufferTooSmall`] if `out` is shorter than [`stream_result_len`].
pub fn write_stream_result(
    id: &RequestId,
    era: Era,
    out: &mut [u8],
) -> Result<usize, BufferTooSmall> {
    written(out, |s| stream_result(s, id, era))
}

fn error(
    sink: &mut impl Sink,
    rid: Option<&RequestId>,
    err: &RpcError<'_>,
) -> Result<(), BufferTooSmall> {
    sink.put(br#"{"jsonrpc":"2.0","id":"#)?;
    id(sink, rid)?;
    sink.put(br#","error":{"code":"#)?;
    signed(sink, i64::from(err.code.code()))?;
    sink.put(br#","message":"#)?;
    string(sink, err.message)?;
    match err.data {
        ErrorData::None => {}
        ErrorData::Reason(reason) => {
            sink.put(br#","data":{"reason":"#)?;
            string(sink, reason.as_str())?;
            sink.put(b"}")?;
        }
        ErrorData::EventsGone { task_id, earliest } => {
            sink.put(br#","data":{"reason":"#)?;
            string(sink, super::Reason::EventsGone.as_str())?;
            sink.put(br#","taskId":"#)?;
            string(sink, task_id)?;
            sink.put(br#","earliestSeq":"#)?;
            unsigned(sink, earliest.get())?;
            sink.put(b"}")?;
        }
    }
    sink.put(b"}}")
}

/// The exact length of the error response [`write_error`] writes.
#[must_use]
pub fn error_len(id: Option<&RequestId>, error: &RpcError<'_>) -> usize {
    counted(|c| self::error(c, id, error))
}

/// Writes an error response `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data"?:…}}`;
/// `id: None` writes `"id":null` (for a line whose id could not be read).
///
/// # Errors
/// [`BufferTooSmall`] if `out` is shorter than [`error_len`].
pub fn write_error(
    id: Option<&RequestId>,
    error: &RpcError<'_>,
    out: &mut [u8],
) -> Result<usize, BufferTooSmall> {
    written(out, |s| self::error(s, id, error))
}

/// Writes `n` in decimal into `out`, as the other writers write their numbers (`seq`,
/// `earliestSeq`, integer ids), for a caller that writes the rest of its message itself: a
/// firmware then carries one number writer. Returns the number of bytes written.
///
/// # Errors
/// [`BufferTooSmall`] if the digits do not fit; `out` may then hold some of them.
pub fn write_unsigned(n: u64, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
    written(out, |s| unsigned(s, n))
}

#[cfg(test)]
mod tests;
