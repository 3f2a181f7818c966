//! JSON-RPC request ids, owned without allocation, so that the stream table can remember which
//! `tasks/stream` request a cancellation names (TS-08) and echo the id in the final response.

use core::fmt;

/// The longest string request id the core keeps, in bytes (after unescaping).
pub const MAX_REQUEST_ID_BYTES: usize = 128;

/// A JSON-RPC request id: an integer or a string, never `null` (JSON-RPC 2.0; MCP-DIGEST a.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id, unescaped.
    String(heapless::String<MAX_REQUEST_ID_BYTES>),
}

/// A string id longer than [`MAX_REQUEST_ID_BYTES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdTooLong;

impl fmt::Display for IdTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request id longer than {MAX_REQUEST_ID_BYTES} bytes")
    }
}

impl core::error::Error for IdTooLong {}

impl RequestId {
    /// A string id.
    ///
    /// # Errors
    /// [`IdTooLong`] if `s` is longer than [`MAX_REQUEST_ID_BYTES`].
    pub fn try_from_str(s: &str) -> Result<RequestId, IdTooLong> {
        let mut owned = heapless::String::new();
        owned.push_str(s).map_err(|_| IdTooLong)?;
        Ok(RequestId::String(owned))
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{:?}", s.as_str()),
        }
    }
}
