//! Reading the params of the methods the core leaves to its host, with the core's JSON
//! scanner: the line was validated in full by `rpc::parse`, so the members are well-formed.

use taskstream_core::json::{self, Kind, Member};

/// The 2026-07-28 `_meta` key naming the protocol version.
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The 2026-07-28 `_meta` key carrying the client's capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The Tasks extension (SEP-2663).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The one modern version spoken.
pub(crate) const MODERN: &str = "2026-07-28";

/// The first member `key` of the object `object`.
pub(crate) fn member<'a>(object: &'a [u8], key: &str) -> Option<Member<'a>> {
    json::members(object).find(|m| json::unescaped_eq(m.key, key))
}

/// The raw contents of a string member, without its quotes.
pub(crate) fn string_raw<'a>(m: &Member<'a>) -> Option<&'a [u8]> {
    if m.kind != Kind::String {
        return None;
    }
    m.value.strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// Whether member `key` of `object` is the string `expected`.
pub(crate) fn is_string(object: &[u8], key: &str, expected: &str) -> bool {
    member(object, key)
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

/// Reads the `_meta` of a modern request's params.
pub(crate) fn meta(params: &[u8]) -> Meta<'_> {
    let Some(meta) = member(params, "_meta").filter(|m| m.kind == Kind::Object) else {
        return Meta::Missing;
    };
    let Some(version) = member(meta.value, PROTOCOL_VERSION).filter(|m| m.kind == Kind::String)
    else {
        return Meta::Missing;
    };
    if !string_raw(&version).is_some_and(|raw| json::unescaped_eq(raw, MODERN)) {
        return Meta::Version(version.value);
    }
    let Some(caps) = member(meta.value, CLIENT_CAPABILITIES).filter(|m| m.kind == Kind::Object)
    else {
        return Meta::Missing;
    };
    let tasks = member(caps.value, "extensions")
        .filter(|m| m.kind == Kind::Object)
        .and_then(|ext| member(ext.value, TASKS_EXTENSION))
        .is_some_and(|m| m.kind == Kind::Object);
    Meta::Valid { tasks }
}
