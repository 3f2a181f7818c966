//! What an event is made of, validated once at the edge: its [`EventType`] (vendor-prefixed,
//! EV-06 / EV-07) and its [`Payload`] (a JSON object, EV-05). Both are borrowed; neither copies.

use core::fmt;

use crate::json;

/// The longest event type accepted, in bytes.
pub const MAX_EVENT_TYPE_BYTES: usize = 128;

/// A vendor-prefixed event type such as `dev.taskstream.tick`.
///
/// SEP-2694 reserves unprefixed names for MCP (EV-06) and wants implementation-defined types
/// under a vendor prefix, preferably reverse-DNS (EV-07). "Prefixed" is not defined further
/// (MCP-DIGEST A-05), so we require a reverse-DNS namespace of at least two labels plus a name:
/// three or more non-empty dot-separated labels of ASCII letters, digits, `-` and `_`, the first
/// starting with a letter. `content.partial` and `task.status` are therefore refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventType<'a>(&'a str);

/// Why an event type was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventTypeError {
    /// Empty, or longer than [`MAX_EVENT_TYPE_BYTES`].
    Length,
    /// Fewer than three labels: not under a vendor namespace (EV-06, EV-07).
    Unprefixed,
    /// An empty label or a character outside `[A-Za-z0-9_-]`.
    Syntax,
}

impl fmt::Display for EventTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventTypeError::Length => "event type is empty or too long",
            EventTypeError::Unprefixed => {
                "event type is not under a reverse-DNS vendor prefix (e.g. com.example.name)"
            }
            EventTypeError::Syntax => "event type has an empty label or an invalid character",
        })
    }
}

impl core::error::Error for EventTypeError {}

impl<'a> EventType<'a> {
    /// Validates `s` as a vendor-prefixed event type. A `const fn`, so that a type fixed in
    /// the program can be checked when it is compiled (`const T: EventType<'static> = match
    /// EventType::new("com.example.name") { … }`), leaving no check in the binary.
    ///
    /// # Errors
    /// [`EventTypeError`] naming the rule `s` breaks.
    pub const fn new(s: &'a str) -> Result<EventType<'a>, EventTypeError> {
        let bytes = s.as_bytes();
        if bytes.is_empty() || bytes.len() > MAX_EVENT_TYPE_BYTES {
            return Err(EventTypeError::Length);
        }
        // One pass over the bytes: a character outside a label's set, or an empty label, is a
        // syntax error wherever it stands, before the count of labels is judged.
        let mut labels = 0usize;
        let mut at_label_start = true;
        let mut rest = bytes;
        while let [c, tail @ ..] = rest {
            let c = *c;
            if c == b'.' {
                if at_label_start {
                    return Err(EventTypeError::Syntax);
                }
                at_label_start = true;
            } else {
                let ok = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
                if !ok || (at_label_start && labels == 0 && !c.is_ascii_alphabetic()) {
                    return Err(EventTypeError::Syntax);
                }
                if at_label_start {
                    labels += 1;
                    at_label_start = false;
                }
            }
            rest = tail;
        }
        if at_label_start {
            return Err(EventTypeError::Syntax);
        }
        if labels < 3 {
            return Err(EventTypeError::Unprefixed);
        }
        Ok(EventType(s))
    }

    /// The type as text.
    #[must_use]
    pub const fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A validated event payload: exactly one JSON object (EV-05), as text.
///
/// Payloads stay JSON text from append to delivery; they are never parsed into values. The
/// length is the payload's compact form (no insignificant white space), which is how it is
/// stored and sent, so it can never carry a newline onto a newline-delimited transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payload<'a> {
    text: &'a [u8],
    compact_len: usize,
}

impl<'a> Payload<'a> {
    /// Validates `text` as one JSON object.
    ///
    /// # Errors
    /// [`json::JsonError`] if `text` is not exactly one well-formed JSON object.
    pub fn new(text: &'a [u8]) -> Result<Payload<'a>, json::JsonError> {
        let compact_len = json::validate_object(text)?;
        Ok(Payload { text, compact_len })
    }

    /// The text as given (possibly with white space).
    #[must_use]
    pub const fn text(&self) -> &'a [u8] {
        self.text
    }

    /// The length of the compact form, which is what is stored and sent.
    #[must_use]
    pub const fn compact_len(&self) -> usize {
        self.compact_len
    }

    /// Writes the compact form into `dst[..self.compact_len()]`.
    ///
    /// # Errors
    /// [`json::JsonError::BufferTooSmall`] if `dst` is shorter than [`compact_len`](Self::compact_len).
    pub fn write_compact(&self, dst: &mut [u8]) -> Result<usize, json::JsonError> {
        if let Some(compact) = self.as_compact() {
            let out = dst
                .get_mut(..compact.len())
                .ok_or(json::JsonError::BufferTooSmall)?;
            out.copy_from_slice(compact);
            return Ok(compact.len());
        }
        json::compact_into(self.text, dst)
    }

    /// The text itself when it already is in compact form (no white space outside strings):
    /// compacting only ever removes white space, so a text as long as its compact form is it.
    #[must_use]
    pub fn as_compact(&self) -> Option<&'a [u8]> {
        (self.text.len() == self.compact_len).then_some(self.text)
    }

    /// The payload as a [`CompactPayload`], when its text already is in compact form.
    #[must_use]
    pub fn compact(&self) -> Option<CompactPayload<'a>> {
        self.as_compact().map(CompactPayload)
    }
}

/// A validated payload whose text already is in compact form, as it is stored and sent
/// ([`Payload::compact`]). [`EventRing::append_compact`](crate::EventRing::append_compact)
/// copies it as it is: a program whose payloads are all compact (a firmware writing its
/// own) then links no compaction code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactPayload<'a>(&'a [u8]);

impl<'a> CompactPayload<'a> {
    /// The text, which is its compact form.
    #[must_use]
    pub const fn text(&self) -> &'a [u8] {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_type(s: &str, expected: Result<(), EventTypeError>) {
        assert_eq!(
            EventType::new(s).map(|t| assert_eq!(t.as_str(), s)),
            expected,
            "{s:?}"
        );
    }

    #[test]
    fn compact_text_is_used_as_it_is() {
        // EV-05: what is stored is the compact form, whether or not it needed compacting.
        let compact = br#"{"a":[1,{"b":"x y"}],"c":null}"#;
        let spaced = b" { \"a\" : [1, {\"b\": \"x y\"}],\n \"c\": null } ";
        let p = Payload::new(compact).unwrap();
        assert_eq!(p.as_compact(), Some(&compact[..]));
        let q = Payload::new(spaced).unwrap();
        assert_eq!(q.as_compact(), None);
        for payload in [p, q] {
            let mut out = [0u8; 64];
            let n = payload.write_compact(&mut out).unwrap();
            assert_eq!(&out[..n], compact);
            let mut short = [0u8; 8];
            assert_eq!(
                payload.write_compact(&mut short),
                Err(json::JsonError::BufferTooSmall)
            );
        }
    }

    #[test]
    fn event_types_need_a_vendor_prefix() {
        // EV-06: unprefixed names are reserved; EV-07: vendor prefix, reverse-DNS.
        check_type("dev.taskstream.tick", Ok(()));
        check_type("com.example.review.comment", Ok(()));
        check_type("com.example.content_partial-2", Ok(()));
        check_type("content.partial", Err(EventTypeError::Unprefixed));
        check_type("task.status", Err(EventTypeError::Unprefixed));
        check_type("tool.started", Err(EventTypeError::Unprefixed));
        check_type("tick", Err(EventTypeError::Unprefixed));
        check_type("", Err(EventTypeError::Length));
        check_type("com..tick", Err(EventTypeError::Syntax));
        check_type("com.example.", Err(EventTypeError::Syntax));
        check_type("1com.example.x", Err(EventTypeError::Syntax));
        check_type("com.exa mple.x", Err(EventTypeError::Syntax));
        check_type("com.example.\"x", Err(EventTypeError::Syntax));
        check_type("com.example.x\n", Err(EventTypeError::Syntax));
        let long = "a.b.".repeat(40);
        check_type(&long[..long.len() - 1], Err(EventTypeError::Length));
    }

    #[test]
    fn payloads_must_be_objects() {
        // EV-05
        assert_eq!(Payload::new(br#"{"i":1}"#).map(|p| p.compact_len()), Ok(7));
        assert_eq!(
            Payload::new(b"{ \"i\" :\n 1 }").map(|p| p.compact_len()),
            Ok(7)
        );
        assert!(Payload::new(b"[1]").is_err());
        assert!(Payload::new(b"1").is_err());
        assert!(Payload::new(b"\"s\"").is_err());
        assert!(Payload::new(b"{").is_err());
        assert!(Payload::new(b"{} {}").is_err());
    }
}
