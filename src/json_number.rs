//! The integer reader under the generated protobuf JSON mapping.
//!
//! The mapping lets a 64-bit (or 32-bit) integer field be written as a JSON number or as
//! a JSON string, and either form with an exponent or a fraction when its value is an
//! integer (`1e3`, `"1000"`, `1000.0`). pbjson reads such a value as an untagged enum:
//! serde buffers it, tries a string, builds and drops a formatted error, then tries a
//! number. That was the largest share of the bulk client's CPU on inputs with JSON
//! numbers (`perf record -g`, `bench/client.sh`, the `real-world` shape;
//! docs/performance.md), and its only message
//! for a bad value was "data did not match any variant of untagged enum Content".
//! `build.rs` points the generated code at [`NumberDeserialize`] instead, which takes
//! whichever form comes in one pass and names the value and the type it does not fit.
//!
//! Exactness is decided from the literal's digits: an integer field takes an integer
//! literal, or a decimal whose value is exactly an integer (`7.0`, `1e3`, `100.000`), and
//! refuses any other (`1.5`, `1e-400`, `99.99999999999999999`, `1e20` for a uint64),
//! naming it as written. Read through an `f64`, the last three were 100, 0 and a rounded
//! value. The bulk client's JSON lines and the Connect door both read integers here.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Unexpected, Visitor};

use crate::echo;

/// An integer type of a protobuf field, with its protobuf name for error messages.
pub trait ProtoInteger: Sized + TryFrom<u64> + TryFrom<i128> + std::str::FromStr {
    /// The protobuf type name, as error messages say it ("uint64").
    const NAME: &'static str;
}

macro_rules! proto_integer {
    ($($ty:ty => $name:literal),* $(,)?) => {
        $(impl ProtoInteger for $ty {
            const NAME: &'static str = $name;
        })*
    };
}

proto_integer!(u64 => "uint64", i64 => "int64", u32 => "uint32", i32 => "int32");

/// A protobuf integer read from a JSON number or a JSON string; the name and the public
/// field are those of `pbjson::private::NumberDeserialize`, which the generated code uses.
///
/// The value is read from the literal's own text (serde_json's raw value), never through
/// an `f64`, which would round `99.99999999999999999` to 100 and `1e-400` to 0: a literal
/// is taken only when its digits are exactly an integer in the type's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberDeserialize<T>(pub T);

impl<'de, T: ProtoInteger> de::Deserialize<'de> for NumberDeserialize<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(RAW_VALUE, RawVisitor(PhantomData)).map(NumberDeserialize)
    }
}

/// The newtype name under which serde_json hands over a value's text (its `raw_value`
/// feature): borrowed from a slice or a string, owned from a reader or a `Value` (whose
/// numbers are `f64`s already, so it cannot be exact; the crate reads slices). It is
/// what `serde_json::value::RawValue` asks for; asked here directly, both forms come
/// without the copy a `Box<RawValue>` makes of every number. Another deserializer, or a
/// serde_json that renamed it, would call `visit_newtype_struct`, which [`RawVisitor`]
/// does not take: every read then fails, as the tests would show.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// Takes a value's text, as serde_json gives it for [`RAW_VALUE`]: a map of one entry.
struct RawVisitor<T>(PhantomData<T>);

impl<'de, T: ProtoInteger> Visitor<'de> for RawVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        de::Expected::fmt(&Expected::<T>(PhantomData), formatter)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        if map.next_key::<de::IgnoredAny>()?.is_none() {
            return Err(de::Error::invalid_type(Unexpected::Map, &self));
        }
        // Read once the text is out, so that an error is the field's, not the entry's.
        read_literal(&map.next_value_seed(TextSeed)?)
    }
}

/// The value's text: borrowed from the input, or owned.
struct TextSeed;

impl<'de> de::DeserializeSeed<'de> for TextSeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TextSeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("the text of a JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, raw: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(raw))
    }

    fn visit_str<E: de::Error>(self, raw: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(raw.to_owned()))
    }

    fn visit_string<E: de::Error>(self, raw: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(raw))
    }
}

/// What the text of a JSON value says as a `T`.
fn read_literal<T: ProtoInteger, E: de::Error>(raw: &str) -> Result<T, E> {
    let (text, quoted) = match raw.as_bytes().first() {
        Some(b'"') => match raw.contains('\\') {
            // Escapes in a number are legal JSON, and rare enough to pay for a copy.
            true => return read_escaped(raw),
            false => (&raw[1..raw.len() - 1], true),
        },
        Some(b'-' | b'0'..=b'9') => (raw, false),
        _ => return Err(E::invalid_type(unexpected(raw), &Expected::<T>(PhantomData))),
    };
    read_text(text, quoted)
}

/// A JSON string with escapes, unescaped and read.
fn read_escaped<T: ProtoInteger, E: de::Error>(raw: &str) -> Result<T, E> {
    let text: String = serde_json::from_str(raw).map_err(E::custom)?;
    read_text(&text, true)
}

/// `text` (a number literal, or a string's content when `quoted`) as a `T`, or the error
/// that names it as written.
fn read_text<T: ProtoInteger, E: de::Error>(text: &str, quoted: bool) -> Result<T, E> {
    if let Ok(value) = text.parse::<T>() {
        return Ok(value);
    }
    let shown = || match quoted {
        true => echo::quoted(text).to_string(),
        false => echo::bounded(text).into_owned(),
    };
    match exact_integer(text) {
        Some(Exact::Integer(value)) => {
            T::try_from(value).map_err(|_| E::custom(format_args!("{} is not a {}", shown(), T::NAME)))
        }
        Some(Exact::Fraction) => {
            Err(E::custom(format_args!("{} is not a {}: not a whole number", shown(), T::NAME)))
        }
        Some(Exact::TooLarge) | None => Err(E::custom(format_args!("{} is not a {}", shown(), T::NAME))),
    }
}

/// The JSON value `raw` (not a number or a string) as serde names what it found.
fn unexpected(raw: &str) -> Unexpected<'static> {
    match raw.as_bytes().first() {
        Some(b't') => Unexpected::Bool(true),
        Some(b'f') => Unexpected::Bool(false),
        Some(b'n') => Unexpected::Unit,
        Some(b'[') => Unexpected::Seq,
        _ => Unexpected::Map,
    }
}

/// What the error messages say a number field expects.
struct Expected<T>(PhantomData<T>);

impl<T: ProtoInteger> de::Expected for Expected<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "a {} (a JSON number, or a string holding one)", T::NAME)
    }
}

/// A decimal literal's value, decided from its digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exact {
    /// Exactly this integer (`7`, `7.0`, `1e3`, `-0.5e1`).
    Integer(i128),
    /// Not an integer (`1.5`, `1e-400`, `99.99999999999999999`).
    Fraction,
    /// An integer too large for any protobuf integer type (at least 10^38 in magnitude).
    TooLarge,
}

/// Reads a decimal literal, `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit
/// before the exponent; either side of the point may be empty), exactly: its value is its
/// significant digits times a power of ten, and it is an integer when that power, with
/// the trailing zeros of the digits counted in, is not negative. `None` when `text` is no
/// such literal ("inf", "0x10", " 5", "").
fn exact_integer(text: &str) -> Option<Exact> {
    let bytes = text.as_bytes();
    let (negative, rest) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let digits_in = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let whole_len = digits_in(rest);
    let (whole, rest) = rest.split_at(whole_len);
    let (fraction, rest) = match rest.first() {
        Some(b'.') => {
            let len = digits_in(&rest[1..]);
            (&rest[1..1 + len], &rest[1 + len..])
        }
        _ => (&rest[..0], rest),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let exponent: i64 = match rest.first() {
        None => 0,
        Some(b'e' | b'E') => {
            let (sign, digits) = match rest.get(1) {
                Some(b'-') => (-1, &rest[2..]),
                Some(b'+') => (1, &rest[2..]),
                _ => (1, &rest[1..]),
            };
            if digits.is_empty() || digits_in(digits) != digits.len() {
                return None;
            }
            // An exponent beyond any literal's length decides the answer alone; it is
            // clamped, not parsed, so that `1e99999999999999999999` is no overflow.
            let magnitude = digits
                .iter()
                .try_fold(0i64, |n, d| n.checked_mul(10).and_then(|n| n.checked_add(i64::from(d - b'0'))));
            sign * magnitude.map_or(i64::MAX / 4, |m| m.min(i64::MAX / 4))
        }
        Some(_) => return None,
    };
    // The significant digits: the whole and fractional digits without leading zeros, and
    // without trailing zeros, which move into the power of ten.
    let all = || whole.iter().chain(fraction);
    let leading = all().take_while(|&&d| d == b'0').count();
    let significant_len = whole.len() + fraction.len() - leading;
    let trailing = all().rev().take(significant_len).take_while(|&&d| d == b'0').count();
    let significant = || all().skip(leading).take(significant_len - trailing);
    if significant_len == trailing {
        return Some(Exact::Integer(0));
    }
    // Lengths are bounded by the text, far below i64's range.
    let power = exponent - fraction.len() as i64 + trailing as i64;
    if power < 0 {
        return Some(Exact::Fraction);
    }
    // 10^38 > i128::MAX / 2: 39 digits or more are past every protobuf integer.
    let digits = (significant_len - trailing) as i64;
    if digits + power > 38 {
        return Some(Exact::TooLarge);
    }
    let mut value = significant().fold(0i128, |n, d| n * 10 + i128::from(d - b'0'));
    for _ in 0..power {
        value *= 10;
    }
    Some(Exact::Integer(if negative { -value } else { value }))
}

/// A repeated integer field: a JSON array of [`NumberDeserialize`] values. `build.rs`
/// puts it where the generated code reads a `Vec` of them, because serde_json gives no
/// length and serde's own `Vec` then grows from nothing (4, 8, 16, 32: a copy each time;
/// `cargo bench --bench bulk`, `client_parse`, and docs/performance.md); this one starts
/// with room for [`FIRST_CAPACITY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberVec<T>(pub Vec<NumberDeserialize<T>>);

/// Room a [`NumberVec`] starts with: a stone list of `gen --ix-len 1..30` fits half the
/// time, and one more doubling covers the rest.
const FIRST_CAPACITY: usize = 16;

impl<T> IntoIterator for NumberVec<T> {
    type Item = NumberDeserialize<T>;
    type IntoIter = std::vec::IntoIter<NumberDeserialize<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'de, T: ProtoInteger> de::Deserialize<'de> for NumberVec<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(SequenceVisitor(PhantomData))
    }
}

struct SequenceVisitor<T>(PhantomData<T>);

impl<'de, T: ProtoInteger> Visitor<'de> for SequenceVisitor<T> {
    type Value = NumberVec<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // serde's own `Vec` says the same.
        formatter.write_str("a sequence")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).clamp(FIRST_CAPACITY, 4096));
        while let Some(value) = seq.next_element()? {
            values.push(value);
        }
        Ok(NumberVec(values))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    fn read<T: ProtoInteger>(json: &str) -> Result<T, String> {
        let mut de = serde_json::Deserializer::from_str(json);
        NumberDeserialize::<T>::deserialize(&mut de).map(|n| n.0).map_err(|e| e.to_string())
    }

    #[test]
    fn a_number_list_reads_each_form_and_names_a_bad_one() {
        let read = |json: &str| {
            let mut de = serde_json::Deserializer::from_str(json);
            NumberVec::<u64>::deserialize(&mut de)
                .map(|list| list.into_iter().map(|n| n.0).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        };
        assert_eq!(read("[]"), Ok(vec![]));
        assert_eq!(read(r#"[1,"2",3e0,4.0, 5 ]"#), Ok(vec![1, 2, 3, 4, 5]));
        let long: Vec<u64> = (0..100).collect();
        assert_eq!(read(&serde_json::to_string(&long).unwrap()), Ok(long));
        assert_eq!(read("[1,-2]"), Err("-2 is not a uint64 at line 1 column 6".into()));
        assert_eq!(
            read("[1,0.5,2]"),
            Err("0.5 is not a uint64: not a whole number at line 1 column 7".into())
        );
        assert_eq!(
            read("[1,null]"),
            Err("invalid type: null, expected a uint64 (a JSON number, or a string holding one) \
                 at line 1 column 8"
                .into())
        );
        assert_eq!(
            read("5"),
            Err("invalid type: integer `5`, expected a sequence at line 1 column 1".into())
        );
    }

    #[test]
    fn numbers_and_strings_with_or_without_an_exponent() {
        for json in [
            "1000",
            "\"1000\"",
            "1e3",
            "\"1e3\"",
            "1000.0",
            "1E+3",
            "\"+1000\"",
            "100.000e1",
            "0.1e4",
            "10000e-1",
            "\"\\u0031000\"",
            "\"1000.\"",
            "\".1e4\"",
        ] {
            assert_eq!(read::<u64>(json), Ok(1000), "{json}");
        }
        assert_eq!(read::<u64>("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(read::<u64>("\"18446744073709551615\""), Ok(u64::MAX));
        assert_eq!(read::<u64>("1.8446744073709551615e19"), Ok(u64::MAX));
        assert_eq!(read::<u64>("1e19"), Ok(10_000_000_000_000_000_000));
        assert_eq!(read::<u64>("9007199254740993.0"), Ok(9_007_199_254_740_993), "2^53 + 1, not an f64");
        assert_eq!(read::<u64>("-0"), Ok(0));
        assert_eq!(read::<u64>("0e999999999999999999999"), Ok(0));
        assert_eq!(read::<u64>("0.000"), Ok(0));
        assert_eq!(read::<i64>("-5"), Ok(-5));
        assert_eq!(read::<i64>("\"-5e0\""), Ok(-5));
        assert_eq!(read::<i64>("-9.223372036854775808e18"), Ok(i64::MIN));
        assert_eq!(read::<u32>("4294967295"), Ok(u32::MAX));
    }

    #[test]
    fn a_literal_that_is_not_exactly_an_integer_is_refused_as_written() {
        let refused = |json: &str| read::<u64>(json).unwrap_err();
        assert_eq!(
            refused("99.99999999999999999"),
            "99.99999999999999999 is not a uint64: not a whole number"
        );
        assert_eq!(refused("1e-400"), "1e-400 is not a uint64: not a whole number");
        assert_eq!(refused("1.5"), "1.5 is not a uint64: not a whole number");
        assert_eq!(
            refused("100.0000000000000000001"),
            "100.0000000000000000001 is not a uint64: not a whole number"
        );
        assert_eq!(refused("\"1e-400\""), "\"1e-400\" is not a uint64: not a whole number");
        assert_eq!(refused("1e20"), "1e20 is not a uint64");
        assert_eq!(refused("1e999"), "1e999 is not a uint64");
        assert_eq!(refused("1e99999999999999999999999"), "1e99999999999999999999999 is not a uint64");
        assert_eq!(refused("18446744073709551616"), "18446744073709551616 is not a uint64");
        assert_eq!(read::<u32>("4294967296"), Err("4294967296 is not a uint32".into()));
        assert_eq!(
            read::<i32>("2147483647.5"),
            Err("2147483647.5 is not a int32: not a whole number".into())
        );
        let long = format!("1.{}1", "0".repeat(100_000));
        assert_eq!(refused(&long), format!("1.{}… is not a uint64: not a whole number", "0".repeat(98)));
    }

    #[test]
    fn values_that_are_no_number_name_the_value_and_the_type() {
        let refused = |json: &str| read::<u64>(json).unwrap_err();
        assert_eq!(refused("-5"), "-5 is not a uint64");
        assert_eq!(refused("\"-5\""), "\"-5\" is not a uint64");
        assert_eq!(refused("\"five\""), "\"five\" is not a uint64");
        assert_eq!(refused("\" 5\""), "\" 5\" is not a uint64");
        assert_eq!(refused("\"NaN\""), "\"NaN\" is not a uint64");
        assert_eq!(refused("\"0x10\""), "\"0x10\" is not a uint64");
        assert_eq!(refused("\"1e\""), "\"1e\" is not a uint64");
        assert_eq!(refused("\"\""), "\"\" is not a uint64");
        assert_eq!(
            refused("true"),
            "invalid type: boolean `true`, expected a uint64 (a JSON number, or a string holding one)"
        );
        assert_eq!(
            refused("{}"),
            "invalid type: map, expected a uint64 (a JSON number, or a string holding one)"
        );
        let long = "x".repeat(100_000);
        assert_eq!(refused(&format!("\"{long}\"")), format!("\"{}…\" is not a uint64", "x".repeat(100)));
    }

    #[test]
    fn a_value_or_a_reader_is_read_as_a_slice_is() {
        #[derive(Debug, serde::Deserialize)]
        struct Field {
            n: NumberDeserialize<u64>,
        }
        let value = serde_json::json!({"n": "1e3"});
        assert_eq!(serde_json::from_value::<Field>(value).unwrap().n.0, 1000);
        let value: serde_json::Value = serde_json::from_str(r#"{"n": 7.0}"#).unwrap();
        assert_eq!(serde_json::from_value::<Field>(value).unwrap().n.0, 7);
        let reader = std::io::Cursor::new(r#"{"n": 1e-400}"#);
        assert_eq!(
            serde_json::from_reader::<_, Field>(reader).unwrap_err().to_string(),
            "1e-400 is not a uint64: not a whole number at line 1 column 13"
        );
        assert_eq!(serde_json::from_slice::<Field>(br#"{"n": 12}"#).unwrap().n.0, 12);
    }

    #[test]
    fn exactness_is_decided_from_the_digits() {
        assert_eq!(exact_integer("7.0"), Some(Exact::Integer(7)));
        assert_eq!(exact_integer("-0.5e1"), Some(Exact::Integer(-5)));
        assert_eq!(exact_integer("120e-1"), Some(Exact::Integer(12)));
        assert_eq!(exact_integer("121e-1"), Some(Exact::Fraction));
        assert_eq!(exact_integer("0.00000000000000000000001e23"), Some(Exact::Integer(1)));
        assert_eq!(exact_integer("1e38"), Some(Exact::TooLarge));
        assert_eq!(
            exact_integer("99999999999999999999999999999999999999"),
            Some(Exact::Integer(10i128.pow(38) - 1))
        );
        assert_eq!(exact_integer("1e-99999999999999999999"), Some(Exact::Fraction));
        for bad in ["", "+", "-", ".", "e3", "1e", "1e+", "1.2.3", "1e3.0", "inf", "0x10", " 5", "5 "] {
            assert_eq!(exact_integer(bad), None, "{bad:?}");
        }
    }
}
