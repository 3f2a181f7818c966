//! Tests of the one-pass walk: it accepts exactly what the validator accepts (the general
//! one, which checks UTF-8 over the whole text first, whatever the build's features), and what
//! it finds is what the member scanner finds.

use super::*;
use proptest::prelude::*;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// The paths the tests look for: nested members, keys with escapes or beyond ASCII, and a key
/// that repeats at another level.
const PATHS: [Path<'static>; 8] = [
    Path::top("a"),
    Path::under(0, "b"),
    Path::under(1, "c"),
    Path::under(0, "a"),
    Path::top("\u{e9}"),
    Path::under(4, "x"),
    Path::under(5, "y"),
    Path::under(6, "z"),
];

/// What the scanner finds of `paths[i]` in `src`: the first member with its key in its
/// parent's value (the top-level text, or the parent path's value if that is an object), and
/// whether there is another.
fn by_scanner<'a>(src: &'a [u8], paths: &[Path<'_>], i: usize) -> Found<'a> {
    let p = paths[i];
    let parent = if p.parent == Path::TOP {
        Some(src)
    } else {
        by_scanner(src, paths, usize::from(p.parent))
            .member
            .filter(|m| m.kind == Kind::Object)
            .map(|m| m.value)
    };
    let Some(parent) = parent else {
        return Found::default();
    };
    let mut matching = members(parent).filter(|m| unescaped_eq(m.key, p.key));
    let member = matching.next();
    Found {
        member,
        duplicate: matching.next().is_some(),
    }
}

#[track_caller]
fn check(src: &[u8]) {
    let mut found = [Found::default(); PATHS.len()];
    let walked = walk(src, &PATHS, &mut found);
    let whole = validate_whole(src);
    assert_eq!(
        walked.ok(),
        whole.ok(),
        "{:?}: walk {walked:?}, validate {whole:?}",
        String::from_utf8_lossy(src)
    );
    // Either way the answer is `validate`'s, whichever feature picked its scan.
    assert_eq!(validate(src).ok(), whole.ok());
    if walked.is_ok() {
        for (i, got) in found.iter().enumerate() {
            assert_eq!(
                *got,
                by_scanner(src, &PATHS, i),
                "path {i} in {:?}",
                String::from_utf8_lossy(src)
            );
        }
    }
}

#[test]
fn finds_what_the_scanner_finds() {
    for src in [
        r#"{}"#,
        r#"[]"#,
        r#" { "a" : { "b" : { "c" : [1, {"c":2}] } } } "#,
        r#"{"a":{"b":{"c":1,"c":2}},"a":{"b":{"c":3}}}"#,
        r#"{"a":[{"b":1}],"b":{"c":1}}"#,
        r#"{"a":{"a":{"a":1}},"x":{"a":2}}"#,
        r#"{"\u0061":{"\u0062":{"c":"v"}}}"#,
        r#"{"é":{"x":{"y":{"z":[]}}},"\u00e9":1}"#,
        r#"{"\u00e9":{"x":{"y":{"z":null,"z":true}}}}"#,
        r#"{"a":"{\"b\":1}","b":{"a":1}}"#,
        r#"{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{}}}}}}}}}}"#,
        r#"[{"a":1}]"#,
        r#""a""#,
        r#"{"a":1e400}"#,
        r#"{"a":{"b":1},}"#,
        r#"{"a" {"b":1}}"#,
        r#"{"a":{"b":1}"#,
        r#"{"a":{"b":1}}}"#,
    ] {
        check(src.as_bytes());
    }
}

#[test]
fn deep_nesting_is_validated_below_the_levels_looked_into() {
    let mut deep = String::new();
    for _ in 0..MAX_DEPTH {
        deep.push_str(r#"{"a":"#);
    }
    deep.push('1');
    deep.push_str(&"}".repeat(MAX_DEPTH));
    check(deep.as_bytes());
    let too_deep = std::format!("[{deep}]");
    check(too_deep.as_bytes());
    assert_eq!(
        walk(too_deep.as_bytes(), &[], &mut []),
        Err(JsonError::TooDeep)
    );
}

#[test]
fn utf8_is_checked_inside_strings() {
    let mut cases: Vec<Vec<u8>> = vec![
        b"\"\xff\"".to_vec(),
        b"\"\xc0\x80\"".to_vec(),         // overlong NUL
        b"\"\xe0\x80\xaf\"".to_vec(),     // overlong '/'
        b"\"\xed\xa0\x80\"".to_vec(),     // a surrogate
        b"\"\xf4\x90\x80\x80\"".to_vec(), // above U+10FFFF
        b"\"\xf5\x80\x80\x80\"".to_vec(),
        b"\"\x80\"".to_vec(),         // a lone continuation byte
        b"\"\xc3\"".to_vec(),         // cut short by the quote
        b"\"\xe2\x82\"".to_vec(),     // likewise
        b"\"\xf0\x9f\x98\"".to_vec(), // likewise
        b"{\"\xc3\xa9\":1}".to_vec(),
        b"{\"\xc3\":1}".to_vec(),
        b"\xc3\xa9".to_vec(), // outside a string
        b"[1,\xff]".to_vec(),
    ];
    for s in [
        "é",
        "€",
        "😀",
        "\u{7ff}",
        "\u{800}",
        "\u{ffff}",
        "\u{10000}",
        "\u{10ffff}",
    ] {
        cases.push(std::format!("\"{s}\"").into_bytes());
        cases.push(std::format!("{{\"{s}\":\"{s}{s}\"}}").into_bytes());
    }
    for case in &cases {
        check(case);
    }
    assert_eq!(
        walk(b"\"\xed\xa0\x80\"", &[], &mut []),
        Err(JsonError::Utf8)
    );
    assert!(walk("\"\u{10ffff}\"".as_bytes(), &[], &mut []).is_ok());
}

#[test]
fn a_table_larger_than_its_slots_finds_what_has_a_slot() {
    let src = r#"{"a":{"b":1},"é":2}"#.as_bytes();
    let mut found = [Found::default(); 2];
    assert!(walk(src, &PATHS, &mut found).is_ok());
    assert_eq!(found[1].member.map(|m| m.value), Some(&b"1"[..]));
    // Slots are cleared before the walk.
    let mut found = [Found {
        member: None,
        duplicate: true,
    }; PATHS.len()];
    assert!(walk(b"{}", &PATHS, &mut found).is_ok());
    assert!(found.iter().all(|f| *f == Found::default()));
}

/// JSON texts made of the keys the paths name (some escaped), nested, with white space.
fn text() -> impl Strategy<Value = String> {
    let key = proptest::sample::select(
        &["a", "b", "c", "x", "y", "z", "\\u0061", "é", "\\u00e9", "q"][..],
    );
    let leaf = proptest::sample::select(
        &[
            "1",
            "-2.5e3",
            "\"s\"",
            "\"\\\"}\"",
            "true",
            "null",
            "[]",
            "{}",
            "\"é\"",
        ][..],
    )
    .prop_map(String::from);
    leaf.prop_recursive(5, 48, 4, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| std::format!("[{}]", items.join(","))),
            proptest::collection::vec((key.clone(), inner, "[ \n]{0,1}"), 0..4).prop_map(
                |members| {
                    let body: Vec<String> = members
                        .into_iter()
                        .map(|(k, v, ws)| std::format!("{ws}\"{k}\"{ws}:{ws}{v}"))
                        .collect();
                    std::format!("{{{}}}", body.join(","))
                }
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn walk_agrees_with_the_validator_and_the_scanner(src in text()) {
        check(src.as_bytes());
    }

    #[test]
    fn walk_agrees_on_mutated_texts(
        src in text(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut bytes = src.into_bytes();
        for (at, b, op) in edits {
            let at = at % (bytes.len() + 1);
            match op {
                0 => bytes.insert(at, b),
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ if at < bytes.len() => bytes[at] = b,
                _ => bytes.push(b),
            }
        }
        check(&bytes);
    }

    #[test]
    fn walk_agrees_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        check(&bytes);
    }
}
