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

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Visitor};

/// Every integer below this is exactly an `f64`, so a number written with a fraction or
/// an exponent is read exactly below it; above it, the value read may not be the value
/// written (serde gives such a number only as an `f64`), and it is refused.
const EXACT_IN_F64: f64 = 9_007_199_254_740_992.0; // 2^53

/// An integer type of a protobuf field, with its protobuf name for error messages.
pub trait ProtoInteger: Sized + TryFrom<u64> + TryFrom<i64> + TryFrom<i128> + std::str::FromStr {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberDeserialize<T>(pub T);

impl<'de, T: ProtoInteger> de::Deserialize<'de> for NumberDeserialize<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntegerVisitor(PhantomData)).map(NumberDeserialize)
    }
}

struct IntegerVisitor<T>(PhantomData<T>);

impl<T: ProtoInteger> IntegerVisitor<T> {
    fn not_a<E: de::Error>(value: impl fmt::Display) -> E {
        E::custom(format_args!("{value} is not a {}", T::NAME))
    }

    fn from_f64<E: de::Error>(v: f64) -> Result<T, E> {
        // The cast is exact for an integer up to 2^127 and saturates beyond, where no
        // protobuf integer reaches.
        let value = (v.fract() == 0.0).then(|| T::try_from(v as i128).ok()).flatten();
        match value {
            Some(_) if v.abs() >= EXACT_IN_F64 => Err(E::custom(format_args!(
                "{v} is too large to be read exactly with a fraction or an exponent: write its digits"
            ))),
            Some(value) => Ok(value),
            None => Err(Self::not_a(v)),
        }
    }
}

impl<T: ProtoInteger> Visitor<'_> for IntegerVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "a {} (a JSON number, or a string holding one)", T::NAME)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| Self::not_a(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| Self::not_a(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Self::from_f64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        if let Ok(value) = v.parse::<T>() {
            return Ok(value);
        }
        // The string forms of `1e3` and `1000.0`; a JSON string is not parsed as f64
        // otherwise, so that "inf", "NaN" and " 5" stay errors.
        let numeric = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
        match numeric.then(|| v.parse::<f64>().ok()).flatten() {
            Some(float) => Self::from_f64(float),
            None => Err(Self::not_a(format_args!("{v:?}"))),
        }
    }
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
        assert_eq!(read(r#"[1,"2",3e0,4.0]"#), Ok(vec![1, 2, 3, 4]));
        let long: Vec<u64> = (0..100).collect();
        assert_eq!(read(&serde_json::to_string(&long).unwrap()), Ok(long));
        assert_eq!(read("[1,-2]"), Err("-2 is not a uint64 at line 1 column 5".into()));
        assert_eq!(
            read("5"),
            Err("invalid type: integer `5`, expected a sequence at line 1 column 1".into())
        );
    }

    #[test]
    fn numbers_and_strings_with_or_without_an_exponent() {
        for json in ["1000", "\"1000\"", "1e3", "\"1e3\"", "1000.0", "1E+3", "\"+1000\""] {
            assert_eq!(read::<u64>(json), Ok(1000), "{json}");
        }
        assert_eq!(read::<u64>("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(read::<u64>("\"18446744073709551615\""), Ok(u64::MAX));
        assert_eq!(read::<i64>("-5"), Ok(-5));
        assert_eq!(read::<i64>("\"-5e0\""), Ok(-5));
        assert_eq!(read::<u32>("4294967295"), Ok(u32::MAX));
    }

    #[test]
    fn values_that_do_not_fit_name_the_value_and_the_type() {
        assert_eq!(read::<u64>("-5"), Err("-5 is not a uint64 at line 1 column 2".into()));
        assert_eq!(read::<u64>("\"-5\""), Err("-5 is not a uint64 at line 1 column 4".into()));
        assert_eq!(read::<u64>("1.5"), Err("1.5 is not a uint64 at line 1 column 3".into()));
        assert_eq!(
            read::<u64>("18446744073709551616"),
            Err("18446744073709552000 is not a uint64 at line 1 column 20".into())
        );
        assert_eq!(
            read::<u64>("1e16"),
            Err("10000000000000000 is too large to be read exactly with a fraction or an exponent: \
                 write its digits at line 1 column 4"
                .into())
        );
        assert_eq!(read::<u32>("4294967296"), Err("4294967296 is not a uint32 at line 1 column 10".into()));
        assert_eq!(read::<u64>("\"five\""), Err("\"five\" is not a uint64 at line 1 column 6".into()));
        assert_eq!(read::<u64>("\" 5\""), Err("\" 5\" is not a uint64 at line 1 column 4".into()));
        assert_eq!(read::<u64>("\"NaN\""), Err("\"NaN\" is not a uint64 at line 1 column 5".into()));
        assert_eq!(
            read::<u64>("true"),
            Err("invalid type: boolean `true`, expected a uint64 (a JSON number, or a string holding one) \
                 at line 1 column 4"
                .into())
        );
    }
}
