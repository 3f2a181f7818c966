//! The members of a request the agent reads, found in the same walk that validates the line
//! (`rpc::parse_walked`): the table of their paths, and readers of what was found.

use taskstream_core::json::{self, Found, Kind, Member, Path};
use taskstream_core::rpc::{self, RequestPaths};

/// The Tasks extension (SEP-2663).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The one modern version spoken.
pub(crate) const MODERN: &str = "2026-07-28";

// Indexes into `PARAMS`: members of `params` and below.
const META: u8 = 0;
const META_VERSION: usize = 1;
const META_CAPABILITIES: u8 = 2;
const CAPABILITY_EXTENSIONS: u8 = 3;
const EXTENSION_TASKS: usize = 4;
pub(crate) const PROTOCOL_VERSION: usize = 5;
pub(crate) const NAME: usize = 6;
pub(crate) const TASK: usize = 7;
const ARGUMENTS: u8 = 8;
pub(crate) const COUNT: usize = 9;
pub(crate) const INTERVAL_MS: usize = 10;
pub(crate) const TASK_ID: usize = 11;
pub(crate) const AFTER: usize = 12;
pub(crate) const REQUEST_ID: usize = 13;

/// Every member of `params` the agent reads, the 2026-07-28 `_meta` keys among them.
const PARAMS: [Path<'static>; 14] = [
    Path::top("_meta"),
    Path::under(META, "io.modelcontextprotocol/protocolVersion"),
    Path::under(META, "io.modelcontextprotocol/clientCapabilities"),
    Path::under(META_CAPABILITIES, "extensions"),
    Path::under(CAPABILITY_EXTENSIONS, TASKS_EXTENSION),
    Path::top("protocolVersion"),
    Path::top("name"),
    Path::top("task"),
    Path::top("arguments"),
    Path::under(ARGUMENTS, "count"),
    Path::under(ARGUMENTS, "interval_ms"),
    Path::top("taskId"),
    Path::top("after"),
    Path::top("requestId"),
];

/// The envelope's paths and `PARAMS`, as the walk takes them.
pub(crate) const PATHS: RequestPaths<'static, 20> = RequestPaths::new(&PARAMS);

/// What the walk found, one slot per path.
pub(crate) type Members<'a> = [Found<'a>; 20];

/// The first member at `PARAMS[i]`, if any.
pub(crate) fn member<'a>(found: &Members<'a>, i: usize) -> Option<Member<'a>> {
    rpc::param(found, i).member
}

/// The first member at `PARAMS[i]`, if it is a `kind`.
pub(crate) fn of_kind<'a>(found: &Members<'a>, i: usize, kind: Kind) -> Option<Member<'a>> {
    member(found, i).filter(|m| m.kind == kind)
}

/// The raw contents of a string member, without its quotes.
pub(crate) fn string_raw<'a>(m: &Member<'a>) -> Option<&'a [u8]> {
    if m.kind != Kind::String {
        return None;
    }
    m.value.strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// Whether the member at `PARAMS[i]` is the string `expected`.
pub(crate) fn is_string(found: &Members<'_>, i: usize, expected: &str) -> bool {
    member(found, i)
        .and_then(|m| string_raw(&m))
        .is_some_and(|raw| json::unescaped_eq(raw, expected))
}

/// A member that is a non-negative integer literal (no fraction, no exponent) of at most `max`
/// (below 10^9). A JSON integer has no leading zero, so one of ten digits or more is above it:
/// nine digits are summed in 32 bits without overflow.
pub(crate) fn at_most(m: &Member<'_>, max: u32) -> Option<u32> {
    if m.kind != Kind::Number || m.value.is_empty() || m.value.len() > 9 {
        return None;
    }
    let mut n: u32 = 0;
    for &d in m.value {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u32::from(d - b'0');
    }
    (n <= max).then_some(n)
}

/// What a modern request's `_meta` says (MCP digest, a.4).
pub(crate) enum Meta<'a> {
    /// Well-formed; whether the Tasks extension was declared.
    Valid { tasks: bool },
    /// A required member is missing or mistyped: -32602.
    Missing,
    /// Another protocol version, as its raw JSON text: -32022.
    Version(&'a [u8]),
}

/// Reads the `_meta` of a modern request's params. A member below `_meta` is found only in
/// the first `_meta`, and only if it is an object (the walk looks into nothing else), as is
/// each member below another.
pub(crate) fn meta<'a>(found: &Members<'a>) -> Meta<'a> {
    if of_kind(found, usize::from(META), Kind::Object).is_none() {
        return Meta::Missing;
    }
    let Some(version) = of_kind(found, META_VERSION, Kind::String) else {
        return Meta::Missing;
    };
    if !string_raw(&version).is_some_and(|raw| json::unescaped_eq(raw, MODERN)) {
        return Meta::Version(version.value);
    }
    if of_kind(found, usize::from(META_CAPABILITIES), Kind::Object).is_none() {
        return Meta::Missing;
    }
    let tasks = of_kind(found, EXTENSION_TASKS, Kind::Object).is_some();
    Meta::Valid { tasks }
}
