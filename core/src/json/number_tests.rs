//! Tests of the `f64` overflow rule for numbers: exact at the boundary, and the same verdict as
//! converting with `str::parse::<f64>()` (correctly rounded) everywhere it was tried.

use super::*;
use proptest::prelude::*;
use std::format;
use std::string::String;
use std::vec::Vec;

/// 2^1024 − 2^970 in decimal, as a string (the tests build literals from it).
fn halfway() -> &'static str {
    core::str::from_utf8(F64_OVERFLOW_DIGITS).expect("ASCII digits")
}

/// The verdict of a correctly rounded conversion.
fn parses_infinite(literal: &str) -> bool {
    !literal
        .parse::<f64>()
        .expect("a JSON number literal")
        .is_finite()
}

#[test]
fn the_packed_digits_are_the_halfway_point() {
    let unpacked: Vec<u8> = (0..F64_OVERFLOW_DIGITS.len())
        .map(f64_overflow_digit)
        .collect();
    assert_eq!(unpacked.as_slice(), F64_OVERFLOW_DIGITS.as_slice());
}

/// Checks one literal: the rule, the conversion, and the validator all agree with `refused`.
#[track_caller]
fn check(literal: &str, refused: bool) {
    let shown = &literal[..literal.len().min(60)];
    assert_eq!(
        overflows_f64(literal.as_bytes()),
        refused,
        "rule on {shown}…"
    );
    assert_eq!(parses_infinite(literal), refused, "parse on {shown}…");
    assert_eq!(
        validate(literal.as_bytes()).is_err(),
        refused,
        "validate on {shown}…"
    );
}

/// Decrements a digit string by one in its last place (it must not be all zeros).
fn minus_one(digits: &str) -> String {
    let mut d: Vec<u8> = digits.bytes().collect();
    for c in d.iter_mut().rev() {
        if *c == b'0' {
            *c = b'9';
        } else {
            *c -= 1;
            break;
        }
    }
    String::from_utf8(d).expect("ASCII digits")
}

#[test]
fn the_constant_is_the_halfway_point() {
    // The two f64s around it: f64::MAX below, and the tie rounds up to 2^1024 (infinity).
    let t = halfway();
    assert_eq!(t.len(), 309);
    assert_eq!(t.parse::<f64>(), Ok(f64::INFINITY));
    assert_eq!(minus_one(t).parse::<f64>(), Ok(f64::MAX));
    assert!(t.starts_with("17976931348623158079"));
}

#[test]
fn f64_max_and_its_neighbourhood() {
    // f64::MAX, (2^53 − 1) · 2^971, written out exactly.
    let max = "\
179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558\
632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245\
490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168\
738177180919299881250404026184124858368";
    assert_eq!(max.len(), 309);
    assert_eq!(max.parse::<f64>(), Ok(f64::MAX));
    check(max, false);
    check(&format!("-{max}"), false);
    check(&format!("{max}.999999999999999999999"), false);
    check(&format!("{}", f64::MAX), false);
    check(&format!("{:e}", f64::MAX), false);
    check(&format!("{:e}", -f64::MAX), false);
    check("1.7976931348623157e308", false);
    check("1.7976931348623158e308", false);
    check("1.7976931348623159e308", true);
    check("1.797693134862315807e308", false);
    check("1.797693134862315808e308", true);
    check("1.8e308", true);
    check("2e308", true);
    check("1e308", false);
    check("9e307", false);
    check("1e309", true);
    check("-1.8e308", true);
}

#[test]
fn the_halfway_value_and_one_unit_either_side() {
    let t = halfway();
    let below = minus_one(t);
    check(t, true);
    check(&format!("-{t}"), true);
    check(&format!("{t}.0"), true);
    check(
        &format!("{t}.00000000000000000000000000000000000000000000000001"),
        true,
    );
    check(&below, false);
    check(&format!("-{below}"), false);
    check(
        &format!("{below}.99999999999999999999999999999999999999999999999999"),
        false,
    );
    // The same values with the decimal point elsewhere and an exponent to match.
    let (head, tail) = t.split_at(1);
    check(&format!("{head}.{tail}e308"), true);
    check(&format!("{head}.{tail}E+308"), true);
    check(&format!("0.{t}e309"), true);
    check(&format!("0.000{t}e312"), true);
    check(&format!("{t}0000e-4"), true);
    check(&format!("{t}e-0"), true);
    check(&format!("{t}e+0000"), true);
    let (head, tail) = below.split_at(1);
    check(&format!("{head}.{tail}e308"), false);
    check(&format!("0.{below}e309"), false);
    check(&format!("0.000{below}9999e312"), false);
    check(&format!("{below}0000e-4"), false);
    // The shortest prefixes that decide: 1.797693134862315807937289714053e308 is below,
    // rounding its last digit up goes above.
    check("1.797693134862315807937289714053e308", false);
    check("1.797693134862315807937289714054e308", true);
}

#[test]
fn long_digit_strings_around_the_boundary() {
    let t = halfway();
    let below = minus_one(t);
    for extra in [1, 10, 100, 1000, 5000] {
        let zeros = "0".repeat(extra);
        let nines = "9".repeat(extra);
        // Digits after the 309th only add to the number.
        check(&format!("{t}{zeros}e-{extra}"), true);
        check(&format!("{t}{zeros}1e-{extra}"), true);
        check(&format!("{below}{nines}e-{extra}"), false);
        check(&format!("{below}.{nines}"), false);
        check(&format!("0.{}{below}{nines}e{}", zeros, 309 + extra), false);
        check(&format!("0.{}{t}e{}", zeros, 309 + extra), true);
    }
    // 308 nines is below 10^308; 309 nines and 10^308 · 10 are above the limit.
    check(&"9".repeat(308), false);
    check(&"9".repeat(309), true);
    check(&format!("1{}", "0".repeat(308)), false);
    check(&format!("1{}", "0".repeat(309)), true);
    check(&"1".repeat(10_000), true);
}

#[test]
fn exponents_of_any_size() {
    check("1e99999999999999999999", true);
    check("-1e99999999999999999999", true);
    check("1E+99999999999999999999999999999999999999999", true);
    check("1e-99999999999999999999", false);
    check("-1e-99999999999999999999", false);
    check("1e2147483647", true);
    check("1e2147483648", true);
    check("1e-2147483648", false);
    check("1e9223372036854775807", true);
    check("1e9223372036854775808", true);
    check("1e-9223372036854775808", false);
    check("1e-9223372036854775809", false);
    check(&format!("1e{}", "9".repeat(1000)), true);
    check(&format!("1e-{}", "9".repeat(1000)), false);
    check(&format!("1e{}309", "0".repeat(1000)), true);
    check(&format!("1e{}308", "0".repeat(1000)), false);
    // 1 at the 92nd decimal place, times 10^400, is 10^308; at the 91st it is 10^309.
    check(&format!("0.{}1e400", "0".repeat(91)), false);
    check(&format!("0.{}1e400", "0".repeat(90)), true);
    check(&format!("0.{}1e400", "0".repeat(1000)), false);
    // The exponent saturates instead of wrapping, on both sides of a long mantissa.
    check(&format!("{}e-99999999999999999999", "9".repeat(400)), false);
    check(
        &format!("0.{}1e99999999999999999999", "0".repeat(400)),
        true,
    );
}

#[test]
fn zeros_and_tiny_numbers_are_accepted() {
    for zero in [
        "0",
        "-0",
        "0.0",
        "-0.000",
        "0e0",
        "0e999999999",
        "0E+999999999",
        "-0e99999999999999999999",
        "0.000e99999999999999999999",
        "0e-99999999999999999999",
    ] {
        check(zero, false);
    }
    check(&format!("0.{}", "0".repeat(5000)), false);
    check(&format!("0.{}e999999", "0".repeat(5000)), false);
    // Underflow rounds to zero or a subnormal: not refused, as serde_json accepts it.
    for tiny in [
        "1e-400",
        "-1e-400",
        "4.9e-324",
        "2e-324",
        "2.2250738585072014e-308",
        "1e-99999",
    ] {
        check(tiny, false);
    }
    check(&format!("0.{}1", "0".repeat(5000)), false);
}

#[test]
fn integers_and_plain_decimals() {
    for n in [
        "1",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "1.5",
        "-2.5e3",
        "1.5E-3",
    ] {
        check(n, false);
    }
}

#[test]
fn serde_json_agrees_away_from_the_last_digits() {
    // serde_json's default float conversion is not correctly rounded, so within about an ulp of
    // the limit it may differ; everywhere else its verdict is the rule's.
    for literal in [
        "1e308",
        "1e309",
        "-1e309",
        "1.7e308",
        "1.8e308",
        "1e99999999999999999999",
        "1e-99999999999999999999",
        "0e99999999999999999999",
        "1e-400",
        "123456789012345678901234567890",
    ] {
        let theirs = serde_json::from_str::<serde_json::Value>(literal).is_err();
        assert_eq!(overflows_f64(literal.as_bytes()), theirs, "{literal}");
    }
    let long = "9".repeat(309);
    let theirs = serde_json::from_str::<serde_json::Value>(&long).is_err();
    assert!(theirs && overflows_f64(long.as_bytes()));
}

#[test]
fn cancelling_a_long_mantissa_with_a_long_exponent() {
    // 10^700000 · 10^−700000 is 1, and 10^−700001 · 10^7000000 is far beyond the limit:
    // serde_json accepts the first and refuses the second, and so does the rule.
    // (`str::parse::<f64>()` stops reading an exponent once it passes 65 536, so it alone
    // gets both of these wrong.)
    let one = format!("1{}e-700000", "0".repeat(700_000));
    assert!(!overflows_f64(one.as_bytes()));
    assert!(serde_json::from_str::<serde_json::Value>(&one).is_ok());
    let huge = format!("0.{}1e7000000", "0".repeat(700_000));
    assert!(overflows_f64(huge.as_bytes()));
    assert!(serde_json::from_str::<serde_json::Value>(&huge).is_err());
}

/// A literal for `0.digits × 10^point`, laid out by `split` (how many digits stand before the
/// decimal point; 0 writes `0.` and `zeros` zeros first), with the exponent spelt per `style`.
fn literal(
    negative: bool,
    digits: &str,
    point: i64,
    split: usize,
    zeros: usize,
    style: u8,
) -> String {
    let mut s = String::new();
    if negative {
        s.push('-');
    }
    let exponent = if split == 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat(zeros));
        s.push_str(digits);
        point + i64::try_from(zeros).expect("small")
    } else {
        let (int, frac) = digits.split_at(split.min(digits.len()));
        s.push_str(int);
        s.push_str(&"0".repeat(split.saturating_sub(digits.len())));
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        point - i64::try_from(split).expect("small")
    };
    match (style % 5, exponent) {
        (0, 0) => {}
        (1, e) => s.push_str(&format!("e{e}")),
        (2, e) if e >= 0 => s.push_str(&format!("E+{e}")),
        (3, e) => s.push_str(&format!("e{}{:04}", if e < 0 { "-" } else { "" }, e.abs())),
        (_, e) => s.push_str(&format!("E{e}")),
    }
    s
}

/// Significant digits near the limit's: a prefix of 2^1024 − 2^970 (or of f64::MAX's shortest
/// form), then possibly one digit nudged and the rest replaced by random digits.
fn near_limit_digits() -> impl Strategy<Value = String> {
    let sources = prop_oneof![
        Just(String::from(halfway())),
        Just(String::from("17976931348623157")),
        Just(format!("{}{}", halfway(), "0".repeat(40))),
    ];
    (
        sources,
        1usize..=360,
        any::<prop::sample::Index>(),
        -2i8..=2,
        prop::option::of(prop::collection::vec(0u8..10, 0..40)),
    )
        .prop_map(|(source, len, at, nudge, tail)| {
            let mut d: Vec<u8> = source.bytes().take(len).collect();
            let at = at.index(d.len());
            let c = i16::from(d[at] - b'0') + i16::from(nudge);
            let low = if at == 0 { 1 } else { 0 };
            d[at] = b'0' + u8::try_from(c.clamp(low, 9)).expect("a digit");
            if let Some(tail) = tail {
                d.truncate(at + 1);
                d.extend(tail.iter().map(|t| b'0' + t));
            }
            String::from_utf8(d).expect("ASCII digits")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn agrees_with_correct_rounding_near_the_limit(
        negative in any::<bool>(),
        digits in near_limit_digits(),
        point in 308i64..=310,
        split in 0usize..=340,
        zeros in 0usize..=30,
        style in any::<u8>(),
    ) {
        let s = literal(negative, &digits, point, split, zeros, style);
        prop_assert_eq!(overflows_f64(s.as_bytes()), parses_infinite(&s), "{}", s);
        prop_assert_eq!(validate(s.as_bytes()).is_err(), parses_infinite(&s), "{}", s);
    }

    #[test]
    fn agrees_with_correct_rounding_anywhere(
        negative in any::<bool>(),
        digits in "[1-9][0-9]{0,40}",
        point in prop_oneof![-400i64..=400, -40_000i64..=40_000, 300i64..=320],
        split in 0usize..=50,
        zeros in 0usize..=400,
        style in any::<u8>(),
    ) {
        let s = literal(negative, &digits, point, split, zeros, style);
        prop_assert_eq!(overflows_f64(s.as_bytes()), parses_infinite(&s), "{}", s);
    }
}
