//! The typed params of `tasks/stream` (SEP-2694, "tasks/stream") and of
//! `notifications/cancelled` (MCP-DIGEST a.6), read strictly from their raw JSON text.
//!
//! `after` is the delicate one. SEP-2694 wants a non-negative integer (RS-01) and -32602 for
//! anything else (RS-02); on the wire a seq is a JSON number, so it must also stay within
//! `0 ..= 2^53 - 1` ([`Seq`]). The rule is applied to the literal as written: `1.0` and `1e2`
//! are refused although their values are integers, and `null` is refused rather than read as
//! "omitted" (MCP-DIGEST A-02; serde's `Option<u64>` would silently do the latter). Members
//! other than `taskId` and `after` (`_meta`, `task`, …) are ignored.

use core::fmt;

use crate::id::RequestId;
use crate::json::{self, Found, Kind};
use crate::seq::Seq;

use super::envelope::{string_contents, IdProblem, RawId};

/// The longest task id accepted, in bytes once decoded. Longer ids cannot name a task of ours.
pub const MAX_TASK_ID_BYTES: usize = 256;

/// The params of a `tasks/stream` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamParams {
    /// The task whose events to stream, escapes decoded.
    pub task_id: heapless::String<MAX_TASK_ID_BYTES>,
    /// The exclusive resume cursor; `None` when omitted (RS-05).
    pub after: Option<Seq>,
}

/// Why `tasks/stream` params were refused. Every variant is answered with -32602; see
/// [`StreamParamsError::rule`] for the requirement each one enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamParamsError {
    /// The params are not well-formed JSON (only when not taken from a parsed line).
    Malformed,
    /// The params are not an object (absent params count as `{}`: no task id).
    NotAnObject,
    /// `taskId` or `after` appears twice.
    DuplicateMember,
    /// No `taskId`.
    MissingTaskId,
    /// `taskId` is not a string.
    TaskIdNotString,
    /// `taskId` is longer than [`MAX_TASK_ID_BYTES`]: no such task (answered as unknown, DX-02).
    TaskIdTooLong,
    /// `after` is `null` (MCP-DIGEST A-02): omit it instead.
    AfterNull,
    /// `after` is negative, including `-0` (RS-01).
    AfterNegative,
    /// `after` has a fraction or an exponent, even `1.0` or `1e2` (RS-02, A-02).
    AfterNotInteger,
    /// `after` is a string, a boolean, an object or an array (RS-02).
    AfterNotNumber,
    /// `after` is above 2^53 - 1, the largest seq (RS-02).
    AfterTooLarge,
}

impl StreamParamsError {
    /// A one-line description, used as the error message.
    #[must_use]
    pub const fn message(self) -> &'static str {
        match self {
            StreamParamsError::Malformed => "Invalid params: not valid JSON",
            StreamParamsError::NotAnObject => "Invalid params: params must be an object",
            StreamParamsError::DuplicateMember => "Invalid params: taskId or after given twice",
            StreamParamsError::MissingTaskId => "Invalid params: taskId is required",
            StreamParamsError::TaskIdNotString => "Invalid params: taskId must be a string",
            StreamParamsError::TaskIdTooLong => "Invalid params: unknown task",
            StreamParamsError::AfterNull => {
                "Invalid params: after must be a non-negative integer, not null; omit it instead"
            }
            StreamParamsError::AfterNegative => {
                "Invalid params: after must be a non-negative integer"
            }
            StreamParamsError::AfterNotInteger => {
                "Invalid params: after must be an integer literal, without fraction or exponent"
            }
            StreamParamsError::AfterNotNumber => {
                "Invalid params: after must be a number, not a string, boolean, object or array"
            }
            StreamParamsError::AfterTooLarge => {
                "Invalid params: after must not exceed 9007199254740991"
            }
        }
    }

    /// The requirement (an ID of `docs/specification/requirements.md`: a SEP requirement or a recorded decision) this refusal enforces.
    #[must_use]
    pub const fn rule(self) -> &'static str {
        match self {
            StreamParamsError::AfterNegative => "RS-01",
            StreamParamsError::AfterNotInteger
            | StreamParamsError::AfterNotNumber
            | StreamParamsError::AfterTooLarge => "RS-02",
            StreamParamsError::AfterNull => "A-02",
            StreamParamsError::TaskIdTooLong => "DX-02",
            StreamParamsError::Malformed
            | StreamParamsError::NotAnObject
            | StreamParamsError::DuplicateMember
            | StreamParamsError::MissingTaskId
            | StreamParamsError::TaskIdNotString => "TS-03",
        }
    }

    /// Whether the refusal is about `after` (answered with `data.reason` `invalid_after`).
    #[must_use]
    pub const fn is_about_after(self) -> bool {
        matches!(
            self,
            StreamParamsError::AfterNull
                | StreamParamsError::AfterNegative
                | StreamParamsError::AfterNotInteger
                | StreamParamsError::AfterNotNumber
                | StreamParamsError::AfterTooLarge
        )
    }
}

impl fmt::Display for StreamParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for StreamParamsError {}

/// Finds the members named in `names` in the object `params`: the first of each, and whether
/// it appears again (as [`json::walk`] finds them).
fn pick<'a, const N: usize>(params: &'a [u8], names: [&str; N]) -> [Found<'a>; N] {
    let mut found = [Found::default(); N];
    for m in json::members(params) {
        for (name, slot) in names.iter().zip(found.iter_mut()) {
            if json::unescaped_eq(m.key, name) {
                if slot.member.is_some() {
                    slot.duplicate = true;
                } else {
                    slot.member = Some(m);
                }
                break;
            }
        }
    }
    found
}

/// Checks that `params` is one JSON object.
fn object(params: &[u8]) -> Result<(), Kind> {
    match json::validate(params) {
        Ok(v) if v.kind == Kind::Object => Ok(()),
        Ok(v) => Err(v.kind),
        // Only reachable for params not taken from a parsed line.
        Err(_) => Err(Kind::Null),
    }
}

/// Reads the params of a `tasks/stream` request from their raw JSON text
/// ([`super::Request::params`]; pass `b"{}"` when they are absent).
///
/// # Errors
/// [`StreamParamsError`] naming the rule broken; every one is answered with -32602.
pub fn parse_stream_params(params: &[u8]) -> Result<StreamParams, StreamParamsError> {
    match json::validate(params) {
        Ok(v) if v.kind == Kind::Object => {}
        Ok(_) => return Err(StreamParamsError::NotAnObject),
        Err(_) => return Err(StreamParamsError::Malformed),
    }
    let [task_id, after] = pick(params, ["taskId", "after"]);
    let raw = read_stream_params(Some(Kind::Object), task_id, after)?;
    let mut buf = [0u8; MAX_TASK_ID_BYTES];
    let task_id = match json::unescape(raw.task_id, &mut buf) {
        Ok(s) => heapless::String::try_from(s).map_err(|_| StreamParamsError::TaskIdTooLong)?,
        Err(json::JsonError::BufferTooSmall) => return Err(StreamParamsError::TaskIdTooLong),
        Err(_) => return Err(StreamParamsError::Malformed),
    };
    Ok(StreamParams {
        task_id,
        after: raw.after,
    })
}

/// The params of a `tasks/stream` request as [`read_stream_params`] reads them: the task id left
/// as the raw contents of its string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawStreamParams<'a> {
    /// The task id's raw contents, escapes not decoded (compare with [`json::unescaped_eq`]);
    /// at most [`MAX_TASK_ID_BYTES`] once decoded.
    pub task_id: &'a [u8],
    /// The exclusive resume cursor; `None` when omitted (RS-05).
    pub after: Option<Seq>,
}

/// [`parse_stream_params`] from members already found in a validated line (by
/// [`super::parse_walked`]): `params` is the kind of the params (`None` when absent, read as
/// `{}`), `task_id` and `after` what was found of `taskId` and `after` in them. The same rules
/// in the same order and the same errors; the task id is left raw.
///
/// # Errors
/// [`StreamParamsError`], as [`parse_stream_params`].
pub fn read_stream_params<'a>(
    params: Option<Kind>,
    task_id: Found<'a>,
    after: Found<'a>,
) -> Result<RawStreamParams<'a>, StreamParamsError> {
    if !matches!(params, None | Some(Kind::Object)) {
        return Err(StreamParamsError::NotAnObject);
    }
    if task_id.duplicate || after.duplicate {
        return Err(StreamParamsError::DuplicateMember);
    }
    let task_id = task_id.member.ok_or(StreamParamsError::MissingTaskId)?;
    let raw = match (task_id.kind, string_contents(task_id.value)) {
        (Kind::String, Some(raw)) => raw,
        _ => return Err(StreamParamsError::TaskIdNotString),
    };
    if json::unescaped(raw).count() > MAX_TASK_ID_BYTES {
        return Err(StreamParamsError::TaskIdTooLong);
    }
    let after = match after.member {
        None => None,
        Some(m) => Some(parse_after(m.value, m.kind)?),
    };
    Ok(RawStreamParams {
        task_id: raw,
        after,
    })
}

/// Reads `after` from its literal: `0` or `[1-9][0-9]*`, at most 2^53 - 1 (RS-01, RS-02, A-02).
fn parse_after(text: &[u8], kind: Kind) -> Result<Seq, StreamParamsError> {
    match kind {
        Kind::Number => {}
        Kind::Null => return Err(StreamParamsError::AfterNull),
        Kind::String | Kind::Bool | Kind::Object | Kind::Array => {
            return Err(StreamParamsError::AfterNotNumber)
        }
    }
    if text.first() == Some(&b'-') {
        return Err(StreamParamsError::AfterNegative);
    }
    if !text.iter().all(u8::is_ascii_digit) || text.is_empty() {
        return Err(StreamParamsError::AfterNotInteger);
    }
    // 2^53 - 1 has 16 digits; JSON forbids leading zeros, so more digits mean a larger value.
    if text.len() > 16 {
        return Err(StreamParamsError::AfterTooLarge);
    }
    let value = text.iter().fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
    Seq::new(value).ok_or(StreamParamsError::AfterTooLarge)
}

/// Why `notifications/cancelled` params were refused. Notifications are never answered: the
/// receiver ignores such a cancellation (and may log it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelledParamsError {
    /// The params are not a well-formed JSON object.
    NotAnObject,
    /// `requestId` appears twice.
    DuplicateMember,
    /// No `requestId`.
    MissingRequestId,
    /// `requestId` is neither a string nor an integer that fits an `i64`.
    RequestIdType,
    /// A string `requestId` longer than [`crate::id::MAX_REQUEST_ID_BYTES`]: it cannot name a
    /// request of ours.
    RequestIdTooLong,
}

impl CancelledParamsError {
    /// A one-line description.
    #[must_use]
    pub const fn message(self) -> &'static str {
        match self {
            CancelledParamsError::NotAnObject => "cancelled: params must be an object",
            CancelledParamsError::DuplicateMember => "cancelled: requestId given twice",
            CancelledParamsError::MissingRequestId => "cancelled: requestId is required",
            CancelledParamsError::RequestIdType => {
                "cancelled: requestId must be a string or an integer (not -0)"
            }
            CancelledParamsError::RequestIdTooLong => "cancelled: requestId is too long",
        }
    }
}

impl fmt::Display for CancelledParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for CancelledParamsError {}

/// Reads the `requestId` of `notifications/cancelled` params `{requestId, reason?}`
/// (MCP-DIGEST a.6). `reason` and unknown members are ignored.
///
/// # Errors
/// [`CancelledParamsError`]; the receiver then ignores the notification.
pub fn parse_cancelled_params(params: &[u8]) -> Result<RequestId, CancelledParamsError> {
    object(params).map_err(|_| CancelledParamsError::NotAnObject)?;
    let [request_id] = pick(params, ["requestId"]);
    read_cancelled_params(Some(Kind::Object), request_id)?
        .decode()
        .ok_or(CancelledParamsError::RequestIdType)
}

/// [`parse_cancelled_params`] from the member already found in a validated line (by
/// [`super::parse_walked`]): `params` is the kind of the params (`None` when absent, read as
/// `{}`), `request_id` what was found of `requestId` in them. The same rules and errors; the
/// id is left raw ([`RawId::decode`] decodes it).
///
/// # Errors
/// [`CancelledParamsError`], as [`parse_cancelled_params`].
pub fn read_cancelled_params(
    params: Option<Kind>,
    request_id: Found<'_>,
) -> Result<RawId<'_>, CancelledParamsError> {
    if !matches!(params, None | Some(Kind::Object)) {
        return Err(CancelledParamsError::NotAnObject);
    }
    if request_id.duplicate {
        return Err(CancelledParamsError::DuplicateMember);
    }
    let m = request_id
        .member
        .ok_or(CancelledParamsError::MissingRequestId)?;
    RawId::read(m.value, m.kind).map_err(|p| match p {
        IdProblem::TooLong => CancelledParamsError::RequestIdTooLong,
        IdProblem::Null | IdProblem::Type => CancelledParamsError::RequestIdType,
    })
}

#[cfg(test)]
mod tests;
