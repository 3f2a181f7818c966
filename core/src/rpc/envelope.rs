//! Parsing one incoming JSON-RPC line into a typed [`Message`] (MCP-DIGEST a.2).
//!
//! [`parse`] validates the whole line first, then reads only the envelope: `jsonrpc`, `id`,
//! `method` and the raw text of `params` (or `result` / `error` for a response). Params stay
//! text: the stream params are read by [`super::stream`], everything else by the host.
//!
//! Errors are classified so that the caller answers them without further thought:
//! [`ParseError::code`] gives the JSON-RPC code, [`ParseError::id`] the id to echo (`null` when
//! none), and [`ParseError::is_answered`] whether to answer at all.

use core::fmt;

use crate::id::{RequestId, MAX_REQUEST_ID_BYTES};
use crate::json::{self, Found, JsonError, Kind, Member, Path};

use super::error::ErrorCode;

/// The scratch size that decodes every method name up to this many bytes; a method with escapes
/// that does not fit the scratch given to [`parse`] is [`ParseError::MethodTooLong`].
pub const MAX_METHOD_BYTES: usize = 128;

/// One incoming JSON-RPC message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A request: answer it.
    Request(Request<'a>),
    /// A notification: never answered.
    Notification(Notification<'a>),
    /// A response to a request the receiver sent; a server that sends none ignores it.
    Response(Response<'a>),
}

/// A request: a message with an `id` and a `method`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The id to echo in the response.
    pub id: RequestId,
    /// The method, escapes decoded (`"tasks\/stream"` is `tasks/stream`).
    pub method: &'a str,
    /// The raw text of `params`, an object or an array, if present.
    pub params: Option<&'a [u8]>,
}

/// A notification: a message with a `method` and no `id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification<'a> {
    /// The method, escapes decoded.
    pub method: &'a str,
    /// The raw text of `params`, an object or an array, if present.
    pub params: Option<&'a [u8]>,
}

/// A response: a message with an `id` and either `result` or `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    /// The id answered; `None` for an error response with `id: null`.
    pub id: Option<RequestId>,
    /// The result or the error, as raw text.
    pub outcome: Outcome<'a>,
}

/// The body of a [`Response`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// The raw text of `result`.
    Result(&'a [u8]),
    /// The raw text of `error`, an object.
    Error(&'a [u8]),
}

/// Why a well-formed JSON text is not a valid JSON-RPC message (answered with -32600).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidMessage {
    /// An array: a batch. Batching was removed in MCP 2025-06-18 (MCP-DIGEST a.5).
    Batch,
    /// A string, number, boolean or `null` instead of an object.
    NotAnObject,
    /// `jsonrpc` is missing or is not the string `"2.0"`.
    Version,
    /// `id` is `null`: never allowed in a request (MCP-DIGEST a.2).
    IdNull,
    /// `id` is neither a string nor an integer that fits an `i64` (a fraction, an exponent,
    /// a boolean, an object, an array).
    IdType,
    /// A string `id` longer than [`MAX_REQUEST_ID_BYTES`] once decoded.
    IdTooLong,
    /// Neither `method` nor `result` / `error`.
    NoMethod,
    /// `method` is not a string.
    MethodType,
    /// `params` is present but neither an object nor an array.
    ParamsType,
    /// A response without an `id`.
    ResponseId,
    /// Both `method` and `result` / `error`, or both `result` and `error`.
    Ambiguous,
    /// `error` of a response is not an object.
    ErrorType,
    /// A recognised member appears twice (see the module documentation of [`super`]).
    DuplicateMember,
}

impl InvalidMessage {
    /// A one-line description, used as the error message.
    #[must_use]
    pub const fn message(self) -> &'static str {
        match self {
            InvalidMessage::Batch => "Invalid Request: batches are not supported",
            InvalidMessage::NotAnObject => "Invalid Request: not a JSON object",
            InvalidMessage::Version => "Invalid Request: jsonrpc must be \"2.0\"",
            InvalidMessage::IdNull => "Invalid Request: id must not be null",
            InvalidMessage::IdType => "Invalid Request: id must be a string or an integer (not -0)",
            InvalidMessage::IdTooLong => "Invalid Request: id is too long",
            InvalidMessage::NoMethod => "Invalid Request: no method",
            InvalidMessage::MethodType => "Invalid Request: method must be a string",
            InvalidMessage::ParamsType => "Invalid Request: params must be an object or an array",
            InvalidMessage::ResponseId => "Invalid Request: a response needs an id",
            InvalidMessage::Ambiguous => {
                "Invalid Request: exactly one of method, result and error is allowed"
            }
            InvalidMessage::ErrorType => "Invalid Request: error must be an object",
            InvalidMessage::DuplicateMember => "Invalid Request: duplicate member",
        }
    }
}

impl fmt::Display for InvalidMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Why a line is not a message this receiver can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Not JSON: a syntax error, invalid UTF-8, or nesting deeper than [`json::MAX_DEPTH`].
    /// Answered with -32700 and `id: null`.
    NotJson(JsonError),
    /// JSON, but not a valid message. Answered with -32600 and the id if one could be read.
    Invalid {
        /// The request's id, if it could be read.
        id: Option<RequestId>,
        /// What is wrong.
        problem: InvalidMessage,
    },
    /// A method name with escapes whose decoded form does not fit the scratch buffer. No method
    /// that long exists, so this is an unknown method: -32601 for a request, and nothing at all
    /// for a notification (`id` is `None`).
    MethodTooLong {
        /// The request's id; `None` for a notification.
        id: Option<RequestId>,
    },
}

impl ParseError {
    /// The JSON-RPC error code to answer with.
    #[must_use]
    pub fn code(&self) -> ErrorCode {
        ErrorCode::from(self)
    }

    /// The id to echo in the error response; `None` means `id: null`.
    #[must_use]
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            ParseError::NotJson(_) => None,
            ParseError::Invalid { id, .. } | ParseError::MethodTooLong { id } => id.as_ref(),
        }
    }

    /// Whether the error gets a response: always, except an unknown notification
    /// ([`ParseError::MethodTooLong`] without an id), which JSON-RPC never answers.
    #[must_use]
    pub fn is_answered(&self) -> bool {
        !matches!(self, ParseError::MethodTooLong { id: None })
    }

    /// A one-line description, used as the error message.
    #[must_use]
    pub const fn message(&self) -> &'static str {
        match self {
            ParseError::NotJson(_) => "Parse error",
            ParseError::Invalid { problem, .. } => problem.message(),
            ParseError::MethodTooLong { .. } => "Method not found",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotJson(e) => write!(f, "Parse error: {e}"),
            other => f.write_str(other.message()),
        }
    }
}

impl core::error::Error for ParseError {}

/// Why an `id` (or a `requestId`) could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdProblem {
    Null,
    Type,
    TooLong,
}

impl From<IdProblem> for InvalidMessage {
    fn from(p: IdProblem) -> Self {
        match p {
            IdProblem::Null => InvalidMessage::IdNull,
            IdProblem::Type => InvalidMessage::IdType,
            IdProblem::TooLong => InvalidMessage::IdTooLong,
        }
    }
}

/// Reads a JSON-RPC id from a member of a validated text: a string of at most
/// [`MAX_REQUEST_ID_BYTES`] decoded bytes, or an integer literal that fits an `i64` and
/// round-trips (not `-0`). Every accepted id is echoed byte for byte as it was sent.
pub(crate) fn read_id(value: &[u8], kind: Kind) -> Result<RequestId, IdProblem> {
    match kind {
        Kind::Null => Err(IdProblem::Null),
        Kind::Number => integer_i64(value)
            .map(RequestId::Number)
            .ok_or(IdProblem::Type),
        Kind::String => {
            // Character by character into the id: the text was validated, so no
            // `core::str::from_utf8` is needed (nor linked, on a firmware).
            let raw = string_contents(value).ok_or(IdProblem::Type)?;
            let mut id = heapless::String::<MAX_REQUEST_ID_BYTES>::new();
            let mut chars = json::unescaped(raw);
            while let Some(c) = chars.next_char() {
                id.push(c).map_err(|_| IdProblem::TooLong)?;
            }
            if chars.is_malformed() {
                return Err(IdProblem::Type);
            }
            Ok(RequestId::String(id))
        }
        Kind::Bool | Kind::Object | Kind::Array => Err(IdProblem::Type),
    }
}

/// An integer literal (`-?[0-9]+`, no fraction, no exponent) that fits an `i64` and is written
/// the one way the response writes it back: `-0` is refused, since it would be answered as `0`
/// and a client matching ids by their text would never see its answer (leading zeros are not
/// JSON, so every other accepted literal round-trips).
///
/// Read by hand rather than with `str::parse`, whose generic integer parser is 374 bytes of a
/// firmware's flash: at most 19 digits are below 10^19 < 2^64, so they add up in a `u64`
/// without overflow, and the magnitude is then held to `i64`'s range.
fn integer_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    if digits.is_empty()
        || digits.len() > 19
        || !digits.iter().all(u8::is_ascii_digit)
        || text == b"-0"
    {
        return None;
    }
    let magnitude = digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    if negative {
        // 2^63, the magnitude of `i64::MIN`, is the one negative magnitude above `i64::MAX`.
        (magnitude <= 1 << 63).then(|| 0i64.wrapping_sub_unsigned(magnitude))
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// The raw contents of a string value's text: without its quotes.
pub(crate) fn string_contents(value: &[u8]) -> Option<&[u8]> {
    value.strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// The envelope members of one message, each at most once.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Member<'a>>,
    id: Option<Member<'a>>,
    method: Option<Member<'a>>,
    params: Option<Member<'a>>,
    result: Option<Member<'a>>,
    error: Option<Member<'a>>,
    /// A recognised member appeared twice; `true` in `duplicate_id` if it was `id`.
    duplicate: bool,
    duplicate_id: bool,
}

impl<'a> Envelope<'a> {
    fn collect(object: &'a [u8]) -> Self {
        let mut env = Envelope::default();
        for m in json::members(object) {
            let slot = if json::unescaped_eq(m.key, "jsonrpc") {
                &mut env.jsonrpc
            } else if json::unescaped_eq(m.key, "id") {
                if env.id.is_some() {
                    env.duplicate_id = true;
                }
                &mut env.id
            } else if json::unescaped_eq(m.key, "method") {
                &mut env.method
            } else if json::unescaped_eq(m.key, "params") {
                &mut env.params
            } else if json::unescaped_eq(m.key, "result") {
                &mut env.result
            } else if json::unescaped_eq(m.key, "error") {
                &mut env.error
            } else {
                continue;
            };
            if slot.is_some() {
                env.duplicate = true;
            } else {
                *slot = Some(m);
            }
        }
        env
    }
}

/// A request id as it stands in the line: the raw JSON text of an `id` that [`parse_raw`] has
/// checked reads as a [`RequestId`] (a string of at most [`MAX_REQUEST_ID_BYTES`] decoded
/// bytes, or an integer that fits an `i64` and is not `-0`). A few bytes instead of the
/// decoded id's 130-odd, for a receiver that decodes it only where it needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawId<'a> {
    value: &'a [u8],
    kind: Kind,
}

impl<'a> RawId<'a> {
    /// The raw id of a member `value` of a validated text, if it reads as an id.
    pub(crate) fn read(value: &'a [u8], kind: Kind) -> Result<Self, IdProblem> {
        read_id(value, kind).map(|_| RawId { value, kind })
    }

    /// The id, decoded: what [`parse`] gives. Always `Some` for an id from [`parse_raw`].
    #[must_use]
    pub fn decode(self) -> Option<RequestId> {
        read_id(self.value, self.kind).ok()
    }
}

/// One incoming JSON-RPC message as [`parse_raw`] reads it: a [`Message`] whose ids are left
/// as [`RawId`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawMessage<'a> {
    /// A request: answer it.
    Request {
        /// The id to echo in the response.
        id: RawId<'a>,
        /// The method, escapes decoded.
        method: &'a str,
        /// The raw text of `params`, an object or an array, if present.
        params: Option<&'a [u8]>,
    },
    /// A notification: never answered.
    Notification(Notification<'a>),
    /// A response to a request the receiver sent.
    Response {
        /// The id answered; `None` for an error response with `id: null`.
        id: Option<RawId<'a>>,
        /// The result or the error, as raw text.
        outcome: Outcome<'a>,
    },
}

/// A [`ParseError`] whose id is left as a [`RawId`]: the same classification, the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawParseError<'a> {
    /// As [`ParseError::NotJson`].
    NotJson(JsonError),
    /// As [`ParseError::Invalid`].
    Invalid {
        /// The request's id, if it could be read.
        id: Option<RawId<'a>>,
        /// What is wrong.
        problem: InvalidMessage,
    },
    /// As [`ParseError::MethodTooLong`].
    MethodTooLong {
        /// The request's id; `None` for a notification.
        id: Option<RawId<'a>>,
    },
}

impl<'a> RawParseError<'a> {
    /// The JSON-RPC error code to answer with, as [`ParseError::code`].
    #[must_use]
    pub fn code(&self) -> ErrorCode {
        match self {
            RawParseError::NotJson(_) => ErrorCode::ParseError,
            RawParseError::Invalid { .. } => ErrorCode::InvalidRequest,
            RawParseError::MethodTooLong { .. } => ErrorCode::MethodNotFound,
        }
    }

    /// The id to echo in the error response; `None` means `id: null`. As [`ParseError::id`].
    #[must_use]
    pub fn id(&self) -> Option<RawId<'a>> {
        match *self {
            RawParseError::NotJson(_) => None,
            RawParseError::Invalid { id, .. } | RawParseError::MethodTooLong { id } => id,
        }
    }

    /// Whether the error gets a response, as [`ParseError::is_answered`].
    #[must_use]
    pub fn is_answered(&self) -> bool {
        !matches!(self, RawParseError::MethodTooLong { id: None })
    }
}

impl From<RawParseError<'_>> for ParseError {
    fn from(e: RawParseError<'_>) -> Self {
        let decode = |id: Option<RawId<'_>>| id.and_then(RawId::decode);
        match e {
            RawParseError::NotJson(e) => ParseError::NotJson(e),
            RawParseError::Invalid { id, problem } => ParseError::Invalid {
                id: decode(id),
                problem,
            },
            RawParseError::MethodTooLong { id } => ParseError::MethodTooLong { id: decode(id) },
        }
    }
}

/// Parses one line (without its newline) into a [`Message`].
///
/// `scratch` is used only when the method contains escapes: it receives the decoded name,
/// which is what [`Request::method`] then borrows. [`MAX_METHOD_BYTES`] bytes are enough for
/// any method a receiver implements.
///
/// # Errors
/// [`ParseError`], classified as described there. Never panics, whatever the bytes.
// The error carries the request id (up to 128 bytes, inline: there is no heap to box it in),
// exactly as the success value does, so it is no larger than what `parse` returns anyway.
#[allow(clippy::result_large_err)]
pub fn parse<'a>(line: &'a [u8], scratch: &'a mut [u8]) -> Result<Message<'a>, ParseError> {
    // Every id `parse_raw` hands back was read once already and decodes; were one not to, it
    // would be answered as an id of the wrong type rather than dropped.
    let not_an_id = || ParseError::Invalid {
        id: None,
        problem: InvalidMessage::IdType,
    };
    Ok(match parse_raw(line, scratch)? {
        RawMessage::Request { id, method, params } => Message::Request(Request {
            id: id.decode().ok_or_else(not_an_id)?,
            method,
            params,
        }),
        RawMessage::Notification(n) => Message::Notification(n),
        RawMessage::Response { id, outcome } => Message::Response(Response {
            id: match id {
                Some(id) => Some(id.decode().ok_or_else(not_an_id)?),
                None => None,
            },
            outcome,
        }),
    })
}

/// [`parse`], leaving the ids as the raw text they are in the line: the same messages, the
/// same errors with the same ids, but no decoded id (about 130 bytes) is built or moved while
/// the line is read. For a receiver short of code space, which decodes the id
/// ([`RawId::decode`]) only where it answers.
///
/// # Errors
/// [`RawParseError`], classified as [`ParseError`] is. Never panics, whatever the bytes.
pub fn parse_raw<'a>(
    line: &'a [u8],
    scratch: &'a mut [u8],
) -> Result<RawMessage<'a>, RawParseError<'a>> {
    let validated = json::validate(line).map_err(RawParseError::NotJson)?;
    let invalid = |id: Option<RawId<'a>>, problem| RawParseError::Invalid { id, problem };
    match validated.kind {
        Kind::Object => {}
        Kind::Array => return Err(invalid(None, InvalidMessage::Batch)),
        _ => return Err(invalid(None, InvalidMessage::NotAnObject)),
    }
    let env = Envelope::collect(line);

    // Check the id first, so that every later error can echo it.
    let id: Option<Result<RawId<'a>, IdProblem>> = env.id.map(|m| {
        read_id(m.value, m.kind).map(|_| RawId {
            value: m.value,
            kind: m.kind,
        })
    });
    let known_id = match id {
        Some(Ok(id)) if !env.duplicate_id => Some(id),
        _ => None,
    };
    if env.duplicate {
        return Err(invalid(known_id, InvalidMessage::DuplicateMember));
    }
    let version_ok = env
        .jsonrpc
        .filter(|m| m.kind == Kind::String)
        .and_then(|m| string_contents(m.value))
        .is_some_and(|raw| json::unescaped_eq(raw, "2.0"));
    if !version_ok {
        return Err(invalid(known_id, InvalidMessage::Version));
    }

    if let Some(method) = env.method {
        if env.result.is_some() || env.error.is_some() {
            return Err(invalid(known_id, InvalidMessage::Ambiguous));
        }
        let id = match id {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(p)) => return Err(invalid(None, p.into())),
        };
        let raw_method = match (method.kind, string_contents(method.value)) {
            (Kind::String, Some(raw)) => raw,
            _ => return Err(invalid(id, InvalidMessage::MethodType)),
        };
        let params = match env.params {
            None => None,
            Some(p) if matches!(p.kind, Kind::Object | Kind::Array) => Some(p.value),
            Some(_) => return Err(invalid(id, InvalidMessage::ParamsType)),
        };
        let method = if json::has_escape(raw_method) {
            match json::unescape(raw_method, scratch) {
                Ok(m) => m,
                Err(JsonError::BufferTooSmall) => return Err(RawParseError::MethodTooLong { id }),
                Err(_) => return Err(invalid(id, InvalidMessage::MethodType)),
            }
        } else {
            match core::str::from_utf8(raw_method) {
                Ok(m) => m,
                Err(_) => return Err(invalid(id, InvalidMessage::MethodType)),
            }
        };
        return Ok(match id {
            Some(id) => RawMessage::Request { id, method, params },
            None => RawMessage::Notification(Notification { method, params }),
        });
    }

    response(id, known_id, env.result, env.error, |id, outcome| {
        RawMessage::Response { id, outcome }
    })
}

/// A message without a method, classified as a response ([`parse_raw`] and [`parse_walked`]
/// alike): its outcome from the `result` and `error` members found, and the id it answers
/// from `id` as read (`known_id` is the one errors echo, `None` if it is duplicated or does
/// not read). `id: null` is accepted only on an error: JSON-RPC's answer to a request whose
/// id could not be read. `message` builds the caller's message from the id and the outcome.
// Inlined into each caller (one each), so that the message is built in place: returned as a
// pair and then built, it took 216 more bytes in the firmware image.
#[inline(always)]
fn response<'a, M>(
    id: Option<Result<RawId<'a>, IdProblem>>,
    known_id: Option<RawId<'a>>,
    result: Option<Member<'a>>,
    error: Option<Member<'a>>,
    message: impl FnOnce(Option<RawId<'a>>, Outcome<'a>) -> M,
) -> Result<M, RawParseError<'a>> {
    let invalid = |id: Option<RawId<'a>>, problem| RawParseError::Invalid { id, problem };
    let outcome = match (result, error) {
        (Some(r), None) => Outcome::Result(r.value),
        (None, Some(e)) if e.kind == Kind::Object => Outcome::Error(e.value),
        (None, Some(_)) => return Err(invalid(known_id, InvalidMessage::ErrorType)),
        (Some(_), Some(_)) => return Err(invalid(known_id, InvalidMessage::Ambiguous)),
        (None, None) => return Err(invalid(known_id, InvalidMessage::NoMethod)),
    };
    let id = match (id, outcome) {
        (Some(Ok(id)), _) => Some(id),
        (Some(Err(IdProblem::Null)), Outcome::Error(_)) => None,
        (Some(Err(p)), _) => return Err(invalid(None, p.into())),
        (None, _) => return Err(invalid(None, InvalidMessage::ResponseId)),
    };
    Ok(message(id, outcome))
}

/// The envelope's members, the first six paths of every table [`parse_walked`] walks with:
/// `jsonrpc`, `id`, `method`, `params`, `result`, `error`, members of the top-level object.
pub const ENVELOPE_PATHS: [Path<'static>; 6] = [
    Path::top("jsonrpc"),
    Path::top("id"),
    Path::top("method"),
    Path::top("params"),
    Path::top("result"),
    Path::top("error"),
];

/// The index of `params` in [`ENVELOPE_PATHS`].
const PARAMS: u8 = 3;

/// The table of members [`parse_walked`] finds: the envelope's ([`ENVELOPE_PATHS`]), then
/// the caller's members of `params` and below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPaths<'k, const N: usize> {
    table: [Path<'k>; N],
}

impl<'k, const N: usize> RequestPaths<'k, N> {
    /// The table for the members `params` names: a path whose parent is [`Path::TOP`] is a
    /// member of `params`, any other parent an index into `params` itself. `N` is
    /// `params.len() + 6`; anything else fails to compile (in a constant) or panics.
    #[must_use]
    pub const fn new(params: &[Path<'k>]) -> Self {
        assert!(
            N == ENVELOPE_PATHS.len() + params.len() && N < Path::TOP as usize - 1,
            "N must be the number of params paths plus 6, and below 254"
        );
        let mut table = [Path::top(""); N];
        let mut i = 0;
        while i < N {
            table[i] = if i < ENVELOPE_PATHS.len() {
                ENVELOPE_PATHS[i]
            } else {
                let p = params[i - ENVELOPE_PATHS.len()];
                Path {
                    key: p.key,
                    parent: if p.parent == Path::TOP {
                        PARAMS
                    } else {
                        p.parent + ENVELOPE_PATHS.len() as u8
                    },
                }
            };
            i += 1;
        }
        RequestPaths { table }
    }
}

/// What [`parse_walked`] found of a `params` path: `found` as it filled it, `i` an index into
/// the `params` table the [`RequestPaths`] was made from.
#[must_use]
pub fn param<'a>(found: &[Found<'a>], i: usize) -> Found<'a> {
    found
        .get(ENVELOPE_PATHS.len() + i)
        .copied()
        .unwrap_or_default()
}

/// One incoming JSON-RPC message as [`parse_walked`] reads it: a [`RawMessage`] whose method
/// is left as the raw contents of its string (escapes not decoded; compare it with
/// [`json::unescaped_eq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkedMessage<'a> {
    /// A request: answer it.
    Request {
        /// The id to echo in the response.
        id: RawId<'a>,
        /// The method's raw contents.
        method: &'a [u8],
        /// The raw text of `params`, an object or an array, if present.
        params: Option<&'a [u8]>,
    },
    /// A notification: never answered.
    Notification {
        /// The method's raw contents.
        method: &'a [u8],
        /// The raw text of `params`, an object or an array, if present.
        params: Option<&'a [u8]>,
    },
    /// A response to a request the receiver sent.
    Response {
        /// The id answered; `None` for an error response with `id: null`.
        id: Option<RawId<'a>>,
        /// The result or the error, as raw text.
        outcome: Outcome<'a>,
    },
}

/// [`parse_raw`] in one walk over the line ([`json::walk`]): it validates the line and, in
/// the same pass, finds the envelope and the members of `params` that `paths` names, into
/// `found` (read them with [`param`]). The same messages and errors as [`parse_raw`] with a
/// scratch of [`MAX_METHOD_BYTES`], the method left raw; no second scan of the line or of
/// its params, and no `core::str::from_utf8`, for a receiver short of code space.
///
/// # Errors
/// [`RawParseError`], as [`parse_raw`]. Never panics, whatever the bytes.
pub fn parse_walked<'a, const N: usize>(
    line: &'a [u8],
    paths: &RequestPaths<'_, N>,
    found: &mut [Found<'a>; N],
) -> Result<WalkedMessage<'a>, RawParseError<'a>> {
    let validated = json::walk(line, &paths.table, found).map_err(RawParseError::NotJson)?;
    let invalid = |id: Option<RawId<'a>>, problem| RawParseError::Invalid { id, problem };
    match validated.kind {
        Kind::Object => {}
        Kind::Array => return Err(invalid(None, InvalidMessage::Batch)),
        _ => return Err(invalid(None, InvalidMessage::NotAnObject)),
    }
    let [jsonrpc, id, method, params, result, error, ..] = found.as_slice() else {
        return Err(invalid(None, InvalidMessage::NotAnObject));
    };
    let duplicate = [jsonrpc, id, method, params, result, error]
        .iter()
        .any(|f| f.duplicate);
    let (duplicate_id, id) = (id.duplicate, id.member);
    let (jsonrpc, method, params, result, error) = (
        jsonrpc.member,
        method.member,
        params.member,
        result.member,
        error.member,
    );

    let id: Option<Result<RawId<'a>, IdProblem>> = id.map(|m| RawId::read(m.value, m.kind));
    let known_id = match id {
        Some(Ok(id)) if !duplicate_id => Some(id),
        _ => None,
    };
    if duplicate {
        return Err(invalid(known_id, InvalidMessage::DuplicateMember));
    }
    let version_ok = jsonrpc
        .filter(|m| m.kind == Kind::String)
        .and_then(|m| string_contents(m.value))
        .is_some_and(|raw| json::unescaped_eq(raw, "2.0"));
    if !version_ok {
        return Err(invalid(known_id, InvalidMessage::Version));
    }

    if let Some(method) = method {
        if result.is_some() || error.is_some() {
            return Err(invalid(known_id, InvalidMessage::Ambiguous));
        }
        let id = match id {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(p)) => return Err(invalid(None, p.into())),
        };
        let method = match (method.kind, string_contents(method.value)) {
            (Kind::String, Some(raw)) => raw,
            _ => return Err(invalid(id, InvalidMessage::MethodType)),
        };
        let params = match params {
            None => None,
            Some(p) if matches!(p.kind, Kind::Object | Kind::Array) => Some(p.value),
            Some(_) => return Err(invalid(id, InvalidMessage::ParamsType)),
        };
        // As `parse_raw` with a scratch of MAX_METHOD_BYTES: a method whose decoded name does
        // not fit is unknown.
        if json::has_escape(method) && json::unescaped(method).count() > MAX_METHOD_BYTES {
            return Err(RawParseError::MethodTooLong { id });
        }
        return Ok(match id {
            Some(id) => WalkedMessage::Request { id, method, params },
            None => WalkedMessage::Notification { method, params },
        });
    }

    response(id, known_id, result, error, |id, outcome| {
        WalkedMessage::Response { id, outcome }
    })
}

#[cfg(test)]
mod tests;
