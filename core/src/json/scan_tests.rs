//! Tests of the member scanner and the string decoder.

use super::*;
use proptest::prelude::*;
use serde_json::Value;
use std::string::String;
use std::vec::Vec;

#[track_caller]
fn check_members(src: &str, expected: &[(&str, &str, Kind)]) {
    assert!(validate_object(src.as_bytes()).is_ok(), "{src}");
    let got: Vec<(&[u8], &[u8], Kind)> = members(src.as_bytes())
        .map(|m| (m.key, m.value, m.kind))
        .collect();
    let expected: Vec<(&[u8], &[u8], Kind)> = expected
        .iter()
        .map(|(k, v, kind)| (k.as_bytes(), v.as_bytes(), *kind))
        .collect();
    assert_eq!(got, expected, "{src}");
}

#[test]
fn members_are_raw_spans_in_order() {
    check_members("{}", &[]);
    check_members(" { } ", &[]);
    check_members(
        r#" { "a" : 1 , "b\"}" : "x,}\"]" , "c":{"d":[1,{"e":"]}"}]},"f":[],"g":true,"h":null,"a":-2.5e3 } "#,
        &[
            ("a", "1", Kind::Number),
            (r#"b\"}"#, r#""x,}\"]""#, Kind::String),
            ("c", r#"{"d":[1,{"e":"]}"}]}"#, Kind::Object),
            ("f", "[]", Kind::Array),
            ("g", "true", Kind::Bool),
            ("h", "null", Kind::Null),
            ("a", "-2.5e3", Kind::Number),
        ],
    );
    // Not an object: nothing, and no panic.
    assert_eq!(members(b"[1,2]").count(), 0);
    assert_eq!(members(b"").count(), 0);
    // Unvalidated garbage ends the iteration early without panicking.
    for junk in [
        &b"{\"a\""[..],
        b"{\"a\":",
        b"{\"a\":\"",
        b"{\"a\":[",
        b"{\"a\\",
        b"{,",
        b"{\"a\":1,",
    ] {
        assert!(members(junk).count() <= 1);
    }
}

#[test]
fn unescaping() {
    let mut buf = [0u8; 32];
    assert_eq!(unescape(br"tasks\/stream", &mut buf), Ok("tasks/stream"));
    assert_eq!(
        unescape(br#"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00"#, &mut buf),
        Ok("\"\\/\u{8}\u{c}\n\r\t\u{41}\u{e9}\u{1f600}")
    );
    assert_eq!(unescape(b"", &mut buf), Ok(""));
    assert_eq!(
        unescape(b"abc", &mut [0u8; 2]),
        Err(JsonError::BufferTooSmall)
    );
    assert_eq!(
        unescape(br"\u00e9", &mut [0u8; 1]),
        Err(JsonError::BufferTooSmall)
    );
    assert!(matches!(
        unescape(br"\x", &mut buf),
        Err(JsonError::Syntax { .. })
    ));
    assert!(matches!(
        unescape(br"\ud83d", &mut buf),
        Err(JsonError::Syntax { .. })
    ));
    assert!(matches!(
        unescape(br"\ude00", &mut buf),
        Err(JsonError::Syntax { .. })
    ));
    assert!(matches!(
        unescape(br"\u12", &mut buf),
        Err(JsonError::Syntax { .. })
    ));
    assert!(matches!(
        unescape(b"\\", &mut buf),
        Err(JsonError::Syntax { .. })
    ));
    assert_eq!(unescape(b"\xff", &mut buf), Err(JsonError::Utf8));

    assert!(unescaped_eq(br"tasks\/stream", "tasks/stream"));
    assert!(unescaped_eq(br"\u0074asks/stream", "tasks/stream"));
    assert!(unescaped_eq(b"tasks/stream", "tasks/stream"));
    assert!(!unescaped_eq(br"tasks\/stream", "tasks\\/stream"));
    assert!(!unescaped_eq(br"tasks\/strea", "tasks/stream"));
    assert!(!unescaped_eq(br"tasks\/streamm", "tasks/stream"));
    assert!(!unescaped_eq(br"\x", "\\x"));
    assert!(unescaped_eq(br"\u00e9", "é"));
}

/// Writes `s` as a JSON string's contents, escaping each char according to `how`
/// (0 = raw where allowed, 1 = short escape where one exists, 2 = `\u`).
fn escape_variously(s: &str, how: &[u8]) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        let mode = how.get(i % how.len().max(1)).copied().unwrap_or(0) % 3;
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let must = c < ' ' || c == '"' || c == '\\';
        if mode == 2 || (must && short.is_none()) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&std::format!("\\u{:04X}", u));
            }
        } else if mode == 1 || must {
            match short {
                Some(e) => out.push_str(e),
                None => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

proptest! {
    #[test]
    fn unescape_agrees_with_serde_json(s in any::<String>(), how in proptest::collection::vec(any::<u8>(), 1..8)) {
        let raw = escape_variously(&s, &how);
        let quoted = std::format!("\"{raw}\"");
        prop_assert!(validate(quoted.as_bytes()).is_ok(), "{}", quoted);
        let theirs: String = serde_json::from_str(&quoted).unwrap();
        prop_assert_eq!(&theirs, &s);
        let mut buf = std::vec![0u8; s.len()];
        prop_assert_eq!(unescape(raw.as_bytes(), &mut buf), Ok(s.as_str()));
        prop_assert!(unescaped_eq(raw.as_bytes(), &s));
        prop_assert_eq!(unescaped(raw.as_bytes()).collect::<Vec<u8>>(), s.as_bytes());
    }

    #[test]
    fn members_agree_with_serde_json(
        map in proptest::collection::btree_map(any::<String>(), prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from),
            proptest::collection::vec(any::<String>(), 0..3).prop_map(Value::from),
        ], 0..6),
        pretty in any::<bool>(),
    ) {
        let obj = Value::Object(map.clone().into_iter().collect());
        let text = if pretty { serde_json::to_string_pretty(&obj) } else { serde_json::to_string(&obj) }.unwrap();
        prop_assert!(validate_object(text.as_bytes()).is_ok());
        let mut seen = Vec::new();
        for m in members(text.as_bytes()) {
            let mut key = std::vec![0u8; m.key.len()];
            let key = String::from(unescape(m.key, &mut key).unwrap());
            let value: Value = serde_json::from_slice(m.value).unwrap();
            prop_assert_eq!(Some(&value), map.get(&key));
            seen.push(key);
        }
        prop_assert_eq!(seen, map.keys().cloned().collect::<Vec<_>>());
    }
}

/// A string body built from pieces that the word-at-a-time skip must stop at, or must not:
/// quotes, backslashes and escapes, control characters, and their neighbours in value.
fn string_piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(std::vec![
        "a",
        "aaaaaaa",
        "é",
        "€",
        "\u{1F600}",
        " ",
        "!",
        "#",
        "[",
        "]",
        "\u{7f}",
        "\"",
        "\\",
        "\\\"",
        "\\\\",
        "\\n",
        "\\u0041",
        "\\ud83d\\ude00",
        "\\ud83d",
        "\n",
        "\t",
        "\u{1f}",
        "\u{0}",
        "\u{1}",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Strings of every length and layout get serde_json's verdict, whichever of the eight
    /// lanes of a word the byte that matters falls in.
    #[test]
    fn string_verdicts_match_serde_json(
        pad in 0usize..8,
        pieces in prop::collection::vec(string_piece(), 0..24),
    ) {
        let body: String = pieces.concat();
        let doc = std::format!("{{\"{}\":\"{}\"}}", "k".repeat(pad + 1), body);
        let ours = validate_object(doc.as_bytes());
        let theirs = serde_json::from_str::<Value>(&doc);
        prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "{:?}", doc);
        if let Ok(len) = ours {
            prop_assert_eq!(len, doc.len());
        }
    }
}

#[test]
fn the_word_test_finds_each_byte_that_needs_a_look_in_every_lane() {
    for lane in 0..8 {
        for b in 0..=255u8 {
            let mut word = [b'a'; 8];
            word[lane] = b;
            let expected = b == b'"' || b == b'\\' || b < 0x20;
            assert_eq!(
                needs_a_look(u64::from_le_bytes(word)),
                expected,
                "byte {b:#04x} in lane {lane}"
            );
        }
    }
    // Bytes with the high bit set (UTF-8 continuation bytes) never look like one.
    assert!(!needs_a_look(u64::from_le_bytes([
        0x80, 0xff, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0x7f
    ])));
}
