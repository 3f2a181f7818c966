//! A strict JSON (RFC 8259) validator and compactor that needs no allocation and no recursion.
//!
//! serde-json-core skips unknown fields without fully checking them (`{"x":tru}` parses), and
//! payloads must stay text, so validation is done here once, iteratively, with a fixed nesting
//! limit ([`MAX_DEPTH`]): 100 000 levels of `[` cannot exhaust a stack. Its verdicts match
//! `serde_json`'s (including the rejection of lone UTF-16 surrogates in `\u` escapes), which the
//! tests and the fuzz targets check. Numbers that overflow an `f64` are refused as `serde_json`
//! refuses them, decided exactly from their digits (no float conversion is linked); only within
//! about an ulp of `f64::MAX`, where `serde_json`'s default conversion is not correctly
//! rounded, can the two differ.

use core::cmp::Ordering;
use core::fmt;

/// The deepest nesting of objects and arrays accepted.
pub const MAX_DEPTH: usize = 128;

/// Why a text is not accepted as JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonError {
    /// The bytes are not UTF-8.
    Utf8,
    /// A syntax error at this byte offset.
    Syntax {
        /// Offset of the offending byte (or the input length if the text ended early).
        at: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Well-formed JSON, but not an object where one is required.
    NotAnObject,
    /// The output buffer is too small.
    BufferTooSmall,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Utf8 => f.write_str("not valid UTF-8"),
            JsonError::Syntax { at } => write!(f, "JSON syntax error at byte {at}"),
            JsonError::TooDeep => write!(f, "JSON nested deeper than {MAX_DEPTH} levels"),
            JsonError::NotAnObject => f.write_str("not a JSON object"),
            JsonError::BufferTooSmall => f.write_str("output buffer too small"),
        }
    }
}

impl core::error::Error for JsonError {}

/// The kind of a JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `{…}`
    Object,
    /// `[…]`
    Array,
    /// `"…"`
    String,
    /// a number
    Number,
    /// `true` or `false`
    Bool,
    /// `null`
    Null,
}

/// A validated JSON text: its top-level kind and the length of its compact form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validated {
    /// The kind of the top-level value.
    pub kind: Kind,
    /// The length in bytes once insignificant white space is removed.
    pub compact_len: usize,
}

/// Validates that `src` is exactly one JSON value, optionally surrounded by white space.
///
/// # Errors
/// [`JsonError`] describing the first problem found.
pub fn validate(src: &[u8]) -> Result<Validated, JsonError> {
    // Feature `lean`: the walk of `walk`, with nothing to find, so that a firmware that walks
    // its requests carries one validator. It checks UTF-8 inside strings (the only place a
    // byte above 0x7f is not a syntax error): the same texts are accepted.
    if cfg!(feature = "lean") {
        return walk(src, &[], &mut []);
    }
    validate_whole(src)
}

/// [`validate`] without feature `lean`: the whole text checked for UTF-8 first, then scanned.
fn validate_whole(src: &[u8]) -> Result<Validated, JsonError> {
    core::str::from_utf8(src).map_err(|_| JsonError::Utf8)?;
    Scanner::new(src, false).run(&mut Check)
}

/// Validates that `src` is exactly one JSON object and returns the length of its compact form.
///
/// # Errors
/// [`JsonError::NotAnObject`] for any other JSON value, else as [`validate`].
pub fn validate_object(src: &[u8]) -> Result<usize, JsonError> {
    let v = validate(src)?;
    if v.kind == Kind::Object {
        Ok(v.compact_len)
    } else {
        Err(JsonError::NotAnObject)
    }
}

/// Copies `src` into `dst` without insignificant white space and returns the length written.
///
/// `src` should have been accepted by [`validate`]; on other input the output is unspecified
/// (but this function still never panics and never writes past `dst`).
///
/// # Errors
/// [`JsonError::BufferTooSmall`] if `dst` cannot hold the compact form.
pub fn compact_into(src: &[u8], dst: &mut [u8]) -> Result<usize, JsonError> {
    let mut n = 0;
    let mut in_string = false;
    let mut escaped = false;
    for &b in src {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if is_ws(b) {
            continue;
        } else if b == b'"' {
            in_string = true;
        }
        *dst.get_mut(n).ok_or(JsonError::BufferTooSmall)? = b;
        n += 1;
    }
    Ok(n)
}

const fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The decimal digits of 2^1024 − 2^970, the point halfway between `f64::MAX` and 2^1024: the
/// smallest magnitude that rounds to infinity, because the tie rounds to the neighbour with an
/// even significand, and `f64::MAX`'s is odd. It is an integer of 309 digits.
const F64_OVERFLOW_DIGITS: &[u8; 309] = b"\
179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017\
977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273\
854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704\
342711559699508093042880177904174497792";

/// [`F64_OVERFLOW_DIGITS`] two digits a byte (the first in the high nibble), packed when the
/// crate is compiled: half the bytes in the image.
const F64_OVERFLOW_PACKED: [u8; F64_OVERFLOW_DIGITS.len().div_ceil(2)] = {
    let mut packed = [0u8; F64_OVERFLOW_DIGITS.len().div_ceil(2)];
    let mut i = 0;
    while i < F64_OVERFLOW_DIGITS.len() {
        packed[i / 2] |= (F64_OVERFLOW_DIGITS[i] - b'0') << (4 - 4 * (i % 2));
        i += 1;
    }
    packed
};

/// The `i`-th digit of [`F64_OVERFLOW_DIGITS`], as ASCII, from the packed copy.
fn f64_overflow_digit(i: usize) -> u8 {
    let byte = F64_OVERFLOW_PACKED.get(i / 2).copied().unwrap_or(0);
    b'0' + ((byte >> (4 - 4 * (i % 2))) & 0xf)
}

/// Whether the number literal `text` (already accepted by the grammar) has a magnitude that a
/// correctly rounded conversion to `f64` turns into infinity, which is when `serde_json`
/// refuses it.
///
/// Decided exactly from the digits, without converting: the number is written as
/// `0.d₁d₂… × 10^point` with `d₁` its first non-zero digit, and compared with
/// [`F64_OVERFLOW_DIGITS`] (a `point` of 309). Converting would link the float parser (tables
/// of powers of five and software `f64` arithmetic on targets without a double-precision FPU).
/// Tiny magnitudes round to zero and are accepted, as `serde_json` accepts them; so is zero
/// with any exponent. Exponents of any length saturate instead of wrapping.
///
/// `serde_json`'s default conversion is not correctly rounded (its `float_roundtrip` feature
/// is), so for a few numbers within about an ulp of `f64::MAX` it refuses what rounds to
/// `f64::MAX`, `f64::MAX` written out in full among them; this rule accepts those.
fn overflows_f64(text: &[u8]) -> bool {
    // One walk over the mantissa: where its first significant digit is, and `point`, where the
    // decimal point stands relative to it (the digits of the integer part from it on, or minus
    // the zeros of the fraction before it). One loop rather than splits and iterator chains:
    // this runs for every number a firmware validates, and its code is what it pays for.
    let mut i = usize::from(text.first() == Some(&b'-'));
    let mut point: i64 = 0;
    let mut first = None;
    let mut in_fraction = false;
    while let Some(&c) = text.get(i) {
        match c {
            b'.' => in_fraction = true,
            b'0'..=b'9' => {
                if first.is_none() && c != b'0' {
                    first = Some(i);
                }
                match (in_fraction, first.is_some()) {
                    (false, true) => point += 1,
                    (true, false) => point -= 1,
                    _ => {}
                }
            }
            _ => break,
        }
        i += 1;
    }
    // Zero, with any exponent, is zero.
    let Some(first) = first else {
        return false;
    };
    let limit = F64_OVERFLOW_DIGITS.len();
    let point = point.saturating_add(decimal_exponent(text.get(i..).unwrap_or_default()));
    match point.cmp(&saturating_i64(limit)) {
        Ordering::Less => false,
        Ordering::Greater => true,
        // The same order of magnitude: compare digit by digit, the number's padded with zeros.
        // Equal first digits mean at least the halfway point, as any later digit only adds.
        Ordering::Equal => {
            let mut at = first;
            for k in 0..limit {
                let digit = loop {
                    match text.get(at) {
                        Some(b'.') => at += 1,
                        Some(&c @ b'0'..=b'9') => {
                            at += 1;
                            break c;
                        }
                        _ => break b'0',
                    }
                };
                let bound = f64_overflow_digit(k);
                if digit != bound {
                    return digit > bound;
                }
            }
            true
        }
    }
}

/// A count as an `i64`, saturating (no slice is that long, but nothing here may wrap).
fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The value of an exponent part (`e`, an optional sign, digits; or nothing), saturating far
/// beyond any exponent that could matter.
fn decimal_exponent(part: &[u8]) -> i64 {
    let part = part.get(1..).unwrap_or_default();
    let (negative, digits) = match part.split_first() {
        Some((b'-', digits)) => (true, digits),
        Some((b'+', digits)) => (false, digits),
        _ => (false, part),
    };
    let magnitude = digits.iter().fold(0i64, |acc, &c| {
        acc.saturating_mul(10)
            .saturating_add(i64::from(c.wrapping_sub(b'0')))
    });
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Eight `0x01` bytes: a byte value times this is that byte in every lane of a word.
const LANES: u64 = 0x0101_0101_0101_0101;

/// Whether any byte of `word` is below `n` (`n` ≤ 128). Exact for the word as a whole: with
/// no byte below `n`, no lane borrows, and a lane whose high bit is set stays clear.
const fn any_byte_below(word: u64, n: u8) -> bool {
    word.wrapping_sub(LANES * n as u64) & !word & (LANES * 0x80) != 0
}

/// Whether any of eight string bytes is a quote, a backslash or a control character, i.e.
/// ends the string, starts an escape, or is refused.
const fn needs_a_look(word: u64) -> bool {
    any_byte_below(word ^ (LANES * b'"' as u64), 1)
        || any_byte_below(word ^ (LANES * b'\\' as u64), 1)
        || any_byte_below(word, 0x20)
}

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Any value.
    Value,
    /// A value or `]` (just after `[`).
    ValueOrClose,
    /// A key or `}` (just after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the closing bracket of the current container, or the end of the text.
    AfterValue,
}

struct Scanner<'a> {
    src: &'a [u8],
    pos: usize,
    /// White space bytes skipped outside strings.
    ws: usize,
    /// Whether strings are checked for UTF-8 here, the text not having been checked as a whole.
    utf8: bool,
}

/// What a scan reports as it goes, for [`walk`]: keys, and where values begin and end. `level`
/// is the nesting depth of the container holding the key or value (0 for the top-level value).
trait Visit<'a> {
    /// A key of the object at `level`, its raw contents between the quotes.
    fn key(&mut self, level: usize, raw: &'a [u8]);
    /// A value at `level` begins at byte `at`.
    fn begin(&mut self, level: usize, at: usize);
    /// The value at `level` that began last ends before byte `end`; it is a `kind`.
    fn end(&mut self, level: usize, end: usize, kind: Kind);
}

/// The visitor of a plain [`validate`]: nothing to report.
struct Check;

impl Visit<'_> for Check {
    fn key(&mut self, _: usize, _: &[u8]) {}
    fn begin(&mut self, _: usize, _: usize) {}
    fn end(&mut self, _: usize, _: usize, _: Kind) {}
}

impl<'a> Scanner<'a> {
    fn new(src: &'a [u8], utf8: bool) -> Self {
        Scanner {
            src,
            pos: 0,
            ws: 0,
            utf8,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Inside a string, skips eight bytes at a time while none of them needs a look (a quote,
    /// a backslash or a control character); the byte-wise loop of [`string`](Self::string)
    /// takes over at the first word that holds one.
    fn skip_plain(&mut self) {
        let rest = self.src.get(self.pos..).unwrap_or_default();
        let plain = rest
            .chunks_exact(8)
            .take_while(|word| {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(word);
                !needs_a_look(u64::from_le_bytes(bytes))
            })
            .count();
        self.pos += plain * 8;
    }

    fn err(&self) -> JsonError {
        JsonError::Syntax { at: self.pos }
    }

    fn skip_ws(&mut self) {
        while let Some(b) = self.peek() {
            if !is_ws(b) {
                break;
            }
            self.pos += 1;
            self.ws += 1;
        }
    }

    fn run<V: Visit<'a>>(mut self, visit: &mut V) -> Result<Validated, JsonError> {
        // Bit i of `stack` is 1 when nesting level i is an object, 0 for an array. Bytes, not a
        // `u128`: a 128-bit shift by a variable is long code on a 32-bit core.
        let mut stack = [0u8; MAX_DEPTH / 8];
        let mut depth: usize = 0;
        let mut expect = Expect::Value;
        let mut kind = None;
        loop {
            self.skip_ws();
            let Some(b) = self.peek() else {
                return match (expect, kind) {
                    (Expect::AfterValue, Some(kind)) if depth == 0 => Ok(Validated {
                        kind,
                        compact_len: self.src.len() - self.ws,
                    }),
                    _ => Err(self.err()),
                };
            };
            match expect {
                Expect::Value | Expect::ValueOrClose => {
                    if expect == Expect::ValueOrClose && b == b']' {
                        self.pos += 1;
                        depth -= 1;
                        visit.end(depth, self.pos, Kind::Array);
                        expect = Expect::AfterValue;
                        continue;
                    }
                    let start = self.pos;
                    visit.begin(depth, start);
                    let k = match b {
                        b'{' | b'[' => {
                            if depth == MAX_DEPTH {
                                return Err(JsonError::TooDeep);
                            }
                            let is_object = b == b'{';
                            if let Some(bits) = stack.get_mut(depth / 8) {
                                let bit = 1 << (depth % 8);
                                if is_object {
                                    *bits |= bit;
                                } else {
                                    *bits &= !bit;
                                }
                            }
                            depth += 1;
                            self.pos += 1;
                            expect = if is_object {
                                Expect::KeyOrClose
                            } else {
                                Expect::ValueOrClose
                            };
                            if kind.is_none() {
                                kind = Some(if is_object { Kind::Object } else { Kind::Array });
                            }
                            continue;
                        }
                        b'"' => {
                            self.string()?;
                            Kind::String
                        }
                        b'-' | b'0'..=b'9' => {
                            self.number()?;
                            Kind::Number
                        }
                        b't' => {
                            self.literal(b"true")?;
                            Kind::Bool
                        }
                        b'f' => {
                            self.literal(b"false")?;
                            Kind::Bool
                        }
                        b'n' => {
                            self.literal(b"null")?;
                            Kind::Null
                        }
                        _ => return Err(self.err()),
                    };
                    visit.end(depth, self.pos, k);
                    if kind.is_none() {
                        kind = Some(k);
                    }
                    expect = Expect::AfterValue;
                }
                Expect::KeyOrClose | Expect::Key => {
                    if expect == Expect::KeyOrClose && b == b'}' {
                        self.pos += 1;
                        depth -= 1;
                        visit.end(depth, self.pos, Kind::Object);
                        expect = Expect::AfterValue;
                    } else if b == b'"' {
                        let start = self.pos + 1;
                        self.string()?;
                        let raw = self.src.get(start..self.pos - 1).unwrap_or_default();
                        visit.key(depth, raw);
                        expect = Expect::Colon;
                    } else {
                        return Err(self.err());
                    }
                }
                Expect::Colon => {
                    if b != b':' {
                        return Err(self.err());
                    }
                    self.pos += 1;
                    expect = Expect::Value;
                }
                Expect::AfterValue => {
                    if depth == 0 {
                        // Trailing garbage after the top-level value.
                        return Err(self.err());
                    }
                    let level = depth - 1;
                    let in_object = stack
                        .get(level / 8)
                        .is_some_and(|bits| bits & (1 << (level % 8)) != 0);
                    self.pos += 1;
                    match (b, in_object) {
                        (b',', true) => expect = Expect::Key,
                        (b',', false) => expect = Expect::Value,
                        (b'}', true) | (b']', false) => {
                            depth -= 1;
                            let k = if in_object { Kind::Object } else { Kind::Array };
                            visit.end(depth, self.pos, k);
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.err());
                        }
                    }
                }
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        let end = self.pos + word.len();
        if self.src.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(())
        } else {
            Err(self.err())
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A number. Like `serde_json`, a number whose magnitude overflows an `f64` is refused
    /// (`1e400`): no reader could take it back. See [`overflows_f64`].
    fn number(&mut self) -> Result<(), JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err()),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err());
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err());
            }
        }
        let text = self.src.get(start..self.pos).unwrap_or_default();
        if overflows_f64(text) {
            return Err(JsonError::Syntax { at: start });
        }
        Ok(())
    }

    /// A string starting at the opening quote. Its bytes above 0x7f are checked for UTF-8 here
    /// when the scan checks UTF-8 (`utf8`), else the whole text was checked first.
    fn string(&mut self) -> Result<(), JsonError> {
        self.pos += 1;
        loop {
            // Feature `lean`: byte by byte only, for less code (the same result). The fast
            // path skips bytes above 0x7f unchecked, so a scan that checks UTF-8 goes without.
            if !cfg!(feature = "lean") && !self.utf8 {
                self.skip_plain();
            }
            let Some(b) = self.peek() else {
                return Err(self.err());
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                0x00..=0x1f => return Err(self.err()),
                b'\\' => {
                    // Checked by the decoder of escapes ([`Unescaped`]): the same rules (a
                    // `\u` high surrogate needs a low one after it, a low one alone is
                    // refused), and one copy of them in the code.
                    let mut escape = unescaped(self.src.get(self.pos..).unwrap_or_default());
                    escape.pos = 1;
                    self.pos += 1;
                    if escape.escape().is_none() {
                        return Err(self.err());
                    }
                    self.pos += escape.pos - 1;
                }
                0x80.. if self.utf8 => self.utf8_sequence()?,
                _ => self.pos += 1,
            }
        }
    }

    /// A UTF-8 sequence starting at `pos`, its first byte above 0x7f.
    fn utf8_sequence(&mut self) -> Result<(), JsonError> {
        let rest = self.src.get(self.pos..).unwrap_or_default();
        let (_, len) = utf8_char(rest).ok_or(JsonError::Utf8)?;
        self.pos += len;
        Ok(())
    }
}

/// The character whose UTF-8 encoding starts `bytes`, and its length, if it is well-formed:
/// the continuation bytes are `10xxxxxx`, the value is the shortest form's (no overlong
/// encoding), a `char` (no surrogate, nothing above U+10FFFF), which is the rule of
/// `core::str::from_utf8`, decided by decoding rather than by its tables.
fn utf8_char(bytes: &[u8]) -> Option<(char, usize)> {
    let lead = *bytes.first()?;
    let more = match lead {
        0x00..=0x7f => 0,
        0xC0..=0xDF => 1,
        0xE0..=0xEF => 2,
        0xF0..=0xF7 => 3,
        _ => return None,
    };
    let mut v = u32::from(lead) & (0x7f >> more);
    for i in 1..=more {
        let c = *bytes.get(i)?;
        if c & 0xC0 != 0x80 {
            return None;
        }
        v = (v << 6) | u32::from(c & 0x3f);
    }
    let c = char::from_u32(v)?;
    (c.len_utf8() == more + 1).then_some((c, more + 1))
}

/// A member [`walk`] looks for: its key, in the object that is the top-level value
/// ([`Path::TOP`]) or the value of another path of the same table (its index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path<'k> {
    /// The key, as it reads once its escapes are decoded (`"t\u0061skId"` is `taskId`).
    pub key: &'k str,
    /// [`Path::TOP`], or the index in the table of the path whose value holds this member.
    pub parent: u8,
}

impl<'k> Path<'k> {
    /// The parent of a member of the top-level object.
    pub const TOP: u8 = u8::MAX;

    /// A member `key` of the top-level object.
    #[must_use]
    pub const fn top(key: &'k str) -> Self {
        Path {
            key,
            parent: Path::TOP,
        }
    }

    /// A member `key` of the value of path `parent` (its index in the table).
    #[must_use]
    pub const fn under(parent: u8, key: &'k str) -> Self {
        Path { key, parent }
    }
}

/// What [`walk`] found of one [`Path`]: the first such member and whether there were more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Found<'a> {
    /// The first member with the path's key in its parent's value, as [`members`] gives it:
    /// what `members(parent).find(|m| unescaped_eq(m.key, key))` is. `None` if there is none,
    /// or the parent is not an object or not found.
    pub member: Option<Member<'a>>,
    /// Whether the parent's value holds the key more than once.
    pub duplicate: bool,
}

/// Containers nested this deep or deeper are not looked into by [`walk`] (they are still
/// validated): a path can be at most this many members below the top-level object.
pub const WALK_LEVELS: usize = 8;

/// No path: the container or value is not one [`walk`] looks for.
const NO_PATH: u8 = u8::MAX - 1;

/// The visitor of [`walk`]: per nesting level, which path the container is the value of, and
/// which path the member being read matched.
struct Walker<'a, 'p, 'k> {
    src: &'a [u8],
    paths: &'p [Path<'k>],
    found: &'p mut [Found<'a>],
    /// Per level, the path whose value the container at that level is ([`Path::TOP`] for the
    /// top-level value, [`NO_PATH`]).
    container: [u8; WALK_LEVELS + 1],
    /// Per level, the path the member being read matched, its key and where its value began.
    pending: [u8; WALK_LEVELS + 1],
    key: [&'a [u8]; WALK_LEVELS + 1],
    start: [usize; WALK_LEVELS + 1],
}

impl<'a> Visit<'a> for Walker<'a, '_, '_> {
    fn key(&mut self, level: usize, raw: &'a [u8]) {
        let (Some(&container), Some(pending)) =
            (self.container.get(level), self.pending.get_mut(level))
        else {
            return;
        };
        *pending = NO_PATH;
        if container == NO_PATH {
            return;
        }
        let matched = self
            .paths
            .iter()
            .position(|p| p.parent == container && unescaped_eq(raw, p.key));
        let Some((i, found)) = matched.and_then(|i| Some((i, self.found.get_mut(i)?))) else {
            return;
        };
        if found.member.is_some() {
            found.duplicate = true;
        } else {
            // At most 253 paths are told apart; a larger table's later paths are not found.
            *pending = u8::try_from(i).unwrap_or(NO_PATH).min(NO_PATH);
            if let Some(k) = self.key.get_mut(level) {
                *k = raw;
            }
        }
    }

    fn begin(&mut self, level: usize, at: usize) {
        let next = if level == 0 {
            Path::TOP
        } else {
            self.pending.get(level).copied().unwrap_or(NO_PATH)
        };
        if let Some(s) = self.start.get_mut(level) {
            *s = at;
        }
        // The level below, should this value be a container.
        if let (Some(c), Some(p)) = (
            self.container.get_mut(level + 1),
            self.pending.get_mut(level + 1),
        ) {
            *c = next;
            *p = NO_PATH;
        }
    }

    fn end(&mut self, level: usize, end: usize, kind: Kind) {
        if level == 0 {
            return;
        }
        let Some(pending) = self.pending.get_mut(level) else {
            return;
        };
        let i = core::mem::replace(pending, NO_PATH);
        let start = self.start.get(level).copied().unwrap_or(0);
        let key = self.key.get(level).copied().unwrap_or_default();
        if let (Some(found), Some(value)) =
            (self.found.get_mut(usize::from(i)), self.src.get(start..end))
        {
            found.member = Some(Member { key, value, kind });
        }
    }
}

/// Validates `src` as [`validate`] does and, in the same pass, finds the members `paths` name:
/// `found[i]` is what was found of `paths[i]` (`found` is cleared first; a path without a slot
/// in `found` is not looked for). One walk over the text instead of a validation and then a
/// scan for each member, for a receiver short of code space or time. Strings are checked for
/// UTF-8 as they are read: the same texts are accepted as by [`validate`], though a text that
/// is both malformed and not UTF-8 may be refused for either.
///
/// # Errors
/// [`JsonError`] describing the first problem found; `found` is then unspecified.
pub fn walk<'a>(
    src: &'a [u8],
    paths: &[Path<'_>],
    found: &mut [Found<'a>],
) -> Result<Validated, JsonError> {
    found.fill(Found::default());
    let mut walker = Walker {
        src,
        paths,
        found,
        // Read at a level only after `begin` at the level above set them (the top-level
        // value's `begin` sets level 1's), so zeros, which clear faster than a fill, will do.
        container: [0; WALK_LEVELS + 1],
        pending: [0; WALK_LEVELS + 1],
        key: [&[]; WALK_LEVELS + 1],
        start: [0; WALK_LEVELS + 1],
    };
    Scanner::new(src, true).run(&mut walker)
}

/// One member of a JSON object, as raw text; see [`members`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member<'a> {
    /// The key's raw contents between its quotes, escapes not decoded (see [`unescape`] and
    /// [`unescaped_eq`]).
    pub key: &'a [u8],
    /// The value's text exactly as written, without surrounding white space.
    pub value: &'a [u8],
    /// The kind of the value.
    pub kind: Kind,
}

/// The members of the top-level object in `src`, in document order, duplicates included.
///
/// `src` should have been accepted by [`validate_object`]: this scanner trusts the syntax and
/// only finds the spans. On any other input the iteration ends early; it never panics and
/// never reads past `src`.
#[must_use]
pub fn members(src: &[u8]) -> Members<'_> {
    let mut m = Members {
        src,
        pos: 0,
        first: true,
        done: false,
    };
    m.skip_ws();
    if m.peek() == Some(b'{') {
        m.pos += 1;
    } else {
        m.done = true;
    }
    m
}

/// The iterator returned by [`members`].
#[derive(Clone, Debug)]
pub struct Members<'a> {
    src: &'a [u8],
    pos: usize,
    first: bool,
    done: bool,
}

impl<'a> Members<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    /// Skips a string whose opening quote is at `pos`; `None` if it never closes.
    fn skip_string(&mut self) -> Option<()> {
        self.pos += 1;
        loop {
            match self.peek()? {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Skips the value starting at `pos`; `None` if the text ends inside it.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.pos += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|b| !is_ws(b) && !matches!(b, b',' | b'}' | b']'))
                {
                    self.pos += 1;
                }
                Some(())
            }
        }
    }

    fn step(&mut self) -> Option<Member<'a>> {
        let src: &'a [u8] = self.src;
        self.skip_ws();
        match self.peek()? {
            b'}' => return None,
            b',' if !self.first => {
                self.pos += 1;
                self.skip_ws();
            }
            b'"' if self.first => {}
            _ => return None,
        }
        self.first = false;
        if self.peek()? != b'"' {
            return None;
        }
        let key_start = self.pos + 1;
        self.skip_string()?;
        let key = src.get(key_start..self.pos - 1)?;
        self.skip_ws();
        if self.peek()? != b':' {
            return None;
        }
        self.pos += 1;
        self.skip_ws();
        let value_start = self.pos;
        let kind = match self.peek()? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' | b'f' => Kind::Bool,
            b'n' => Kind::Null,
            _ => Kind::Number,
        };
        self.skip_value()?;
        let value = src.get(value_start..self.pos)?;
        Some(Member { key, value, kind })
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        if self.done {
            return None;
        }
        let member = self.step();
        if member.is_none() {
            self.done = true;
        }
        member
    }
}

/// The bytes of a JSON string's raw contents (between its quotes) with escapes decoded, as
/// UTF-8; see [`unescaped`].
#[derive(Clone, Debug)]
pub struct Unescaped<'a> {
    raw: &'a [u8],
    pos: usize,
    pending: [u8; 4],
    pending_len: usize,
    pending_pos: usize,
    malformed: bool,
}

/// Decodes the escapes of `raw`, the contents of a JSON string between its quotes, byte by byte.
///
/// `raw` should come from a text accepted by [`validate`]; a malformed escape (only possible
/// otherwise) ends the iteration and sets [`Unescaped::is_malformed`].
#[must_use]
pub fn unescaped(raw: &[u8]) -> Unescaped<'_> {
    Unescaped {
        raw,
        pos: 0,
        pending: [0; 4],
        pending_len: 0,
        pending_pos: 0,
        malformed: false,
    }
}

impl Unescaped<'_> {
    /// Whether the iteration stopped at a malformed escape.
    #[must_use]
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match *self.raw.get(self.pos)? {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => return None,
            };
            v = (v << 4) | u32::from(d);
            self.pos += 1;
        }
        Some(v)
    }

    /// The next character, escapes decoded, or `None` at the end or at a malformed escape or
    /// UTF-8 sequence (then [`Unescaped::is_malformed`]): a string is read into a `str`
    /// character by character, without `core::str::from_utf8`. Do not mix with `next`.
    pub(crate) fn next_char(&mut self) -> Option<char> {
        let rest = self.raw.get(self.pos..).unwrap_or_default();
        let c = match rest.first()? {
            b'\\' => {
                self.pos += 1;
                self.escape()
            }
            _ => utf8_char(rest).map(|(c, len)| {
                self.pos += len;
                c
            }),
        };
        if c.is_none() {
            self.malformed = true;
        }
        c
    }

    /// Decodes the escape after a backslash at `pos - 1`.
    fn escape(&mut self) -> Option<char> {
        let c = *self.raw.get(self.pos)?;
        self.pos += 1;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                if (0xD800..=0xDBFF).contains(&unit) {
                    if self.raw.get(self.pos..self.pos + 2) != Some(b"\\u") {
                        return None;
                    }
                    self.pos += 2;
                    let low = self.hex4()?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                } else {
                    char::from_u32(unit)?
                }
            }
            _ => return None,
        })
    }
}

impl Iterator for Unescaped<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if let Some(&b) = self
            .pending
            .get(self.pending_pos..self.pending_len)?
            .first()
        {
            self.pending_pos += 1;
            return Some(b);
        }
        if self.malformed {
            return None;
        }
        let b = *self.raw.get(self.pos)?;
        self.pos += 1;
        if b != b'\\' {
            return Some(b);
        }
        let Some(c) = self.escape() else {
            self.malformed = true;
            return None;
        };
        let len = c.encode_utf8(&mut self.pending).len();
        self.pending_len = len;
        self.pending_pos = 1;
        self.pending.first().copied()
    }
}

/// Whether the raw JSON string contents `raw` hold an escape. Feature `lean`: a plain loop,
/// smaller than `<[u8]>::contains`'s word-at-a-time search (the same answer).
#[allow(clippy::manual_contains)] // The loop is the point: `contains` links a word search.
pub(crate) fn has_escape(raw: &[u8]) -> bool {
    if cfg!(feature = "lean") {
        raw.iter().any(|&b| b == b'\\')
    } else {
        raw.contains(&b'\\')
    }
}

/// Whether the raw JSON string contents `raw` (between the quotes) decode to exactly `expected`,
/// so that `"tasks\/stream"` matches `tasks/stream`. Needs no buffer.
#[must_use]
pub fn unescaped_eq(raw: &[u8], expected: &str) -> bool {
    if !has_escape(raw) {
        return raw == expected.as_bytes();
    }
    let mut it = unescaped(raw);
    let mut want = expected.bytes();
    loop {
        match (it.next(), want.next()) {
            (None, None) => return !it.is_malformed(),
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// Decodes the raw JSON string contents `raw` (between the quotes) into `dst` and returns the
/// text. Without escapes this is a plain copy.
///
/// # Errors
/// [`JsonError::BufferTooSmall`] if the decoded text does not fit in `dst`;
/// [`JsonError::Syntax`] for a malformed escape; [`JsonError::Utf8`] if the result is not
/// UTF-8. Neither of the last two happens for strings of a text accepted by [`validate`].
pub fn unescape<'d>(raw: &[u8], dst: &'d mut [u8]) -> Result<&'d str, JsonError> {
    if !has_escape(raw) {
        let out = dst.get_mut(..raw.len()).ok_or(JsonError::BufferTooSmall)?;
        out.copy_from_slice(raw);
        return core::str::from_utf8(out).map_err(|_| JsonError::Utf8);
    }
    let mut n = 0;
    let mut it = unescaped(raw);
    for b in &mut it {
        *dst.get_mut(n).ok_or(JsonError::BufferTooSmall)? = b;
        n += 1;
    }
    if it.is_malformed() {
        return Err(JsonError::Syntax { at: it.pos });
    }
    let out = dst.get(..n).ok_or(JsonError::BufferTooSmall)?;
    core::str::from_utf8(out).map_err(|_| JsonError::Utf8)
}

#[cfg(test)]
mod number_tests;
#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod walk_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    #[track_caller]
    fn check(src: &str) {
        let ours = validate(src.as_bytes());
        let theirs = serde_json::from_str::<serde_json::Value>(src);
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{src:?}: ours {ours:?}, serde_json {theirs:?}"
        );
        if ours.is_ok() {
            let mut buf = [0u8; 256];
            let n = compact_into(src.as_bytes(), &mut buf).unwrap();
            let compact = core::str::from_utf8(&buf[..n]).unwrap();
            assert_eq!(Ok(n), ours.map(|v| v.compact_len));
            assert!(!compact.contains('\n'));
            let back: serde_json::Value = serde_json::from_str(compact).unwrap();
            assert_eq!(back, theirs.unwrap(), "{src:?} compacted to {compact:?}");
        }
    }

    #[test]
    fn agrees_with_serde_json() {
        for src in [
            "{}",
            "[]",
            "{\"a\":1}",
            " { \"a\" : [ 1 , 2.5 , -3e+2 , true , false , null ] } ",
            "\"\\u00e9\\n\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud83d\"",
            "\"\\ude00\"",
            "0",
            "-0",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "{a:1}",
            "[",
            "]",
            "{} {}",
            "tru",
            "nul",
            "\"\t\"",
            "\"\\x\"",
            "[1 2]",
            "{\"a\":1 \"b\":2}",
            "",
            " ",
            "1 ",
            "{\"a\":{\"b\":[{}]}}",
            "\"é\"",
            "[\"\\/\"]",
            "{\"x\":tru,\"id\":2}",
            "{\"a\"::1}",
            "[[]]]",
            "{\"a\":1}}",
            "1.5E-3",
            "1e400",
            "-1e400",
            "1e-400",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901234567890",
        ] {
            check(src);
        }
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let mut deep = String::new();
        for _ in 0..100_000 {
            deep.push('[');
        }
        assert_eq!(validate(deep.as_bytes()), Err(JsonError::TooDeep));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(validate(ok.as_bytes()).is_ok());
        let too = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(validate(too.as_bytes()), Err(JsonError::TooDeep));
    }

    /// Objects and arrays nested in a pattern that differs at every level, up to the limit:
    /// each closing bracket must match its own level's kind, whichever byte of the nesting
    /// stack holds it.
    #[test]
    fn every_level_remembers_whether_it_is_an_object() {
        use std::format;
        use std::vec::Vec;
        let is_object = |level: usize| !(level * 7 + level / 3).is_multiple_of(3);
        let mut open = String::new();
        let mut close = Vec::new();
        for level in 0..MAX_DEPTH {
            if is_object(level) {
                open.push_str("{\"k\":");
                close.push('}');
            } else {
                open.push('[');
                close.push(']');
            }
        }
        let closing: String = close.iter().rev().collect();
        let text = format!("{open}1{closing}");
        assert!(validate(text.as_bytes()).is_ok());
        for level in 0..MAX_DEPTH {
            // The wrong bracket at one level, the right ones elsewhere.
            let mut wrong = close.clone();
            wrong[level] = if wrong[level] == '}' { ']' } else { '}' };
            let closing: String = wrong.iter().rev().collect();
            let text = format!("{open}1{closing}");
            assert!(validate(text.as_bytes()).is_err(), "level {level}");
        }
    }

    #[test]
    fn rejects_invalid_utf8_and_non_objects() {
        assert_eq!(validate(b"\"\xff\""), Err(JsonError::Utf8));
        assert_eq!(validate_object(b"[1]"), Err(JsonError::NotAnObject));
        assert_eq!(validate_object(b" {\"a\" : 1} "), Ok(7));
    }

    #[test]
    fn compact_reports_a_short_buffer() {
        let mut buf = [0u8; 3];
        assert_eq!(
            compact_into(b"{\"a\":1}", &mut buf),
            Err(JsonError::BufferTooSmall)
        );
    }
}
