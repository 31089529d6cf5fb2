//! Numbers as writers store them, read as counts (`uint64`): one rule for every door.
//!
//! pandas keeps an integer column with a missing value as `float64` (`NaN`), Spark reads a
//! Parquet `uint64` as `decimal(20,0)`, and a CSV holds `7.0` or `1e3` where an integer was
//! meant. Each is a count when its value is one: a whole number from 0 to 2^64 - 1, decided
//! from the value itself (a float's exact value, a decimal's digits and scale, a text's
//! digits), never through a conversion that could round. `NaN` is no value, as null is. A
//! negative whole number within int64 is [`NotACount::Negative`] (as a signed integer
//! column's is); anything else that is not a count (a fraction, an infinity, a value
//! beyond the range, text that is no number) is [`NotACount::NotUint64`].
//!
//! [`Converted`] applies the rule to a column of floats, decimals or strings once a batch,
//! over the positions its rows span; integer columns never come here (the reader takes
//! their values as they are).

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type, DecimalType, Float16Type, Float32Type,
    Float64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray};
use arrow_buffer::{i256, BooleanBufferBuilder, NullBuffer};
use arrow_schema::DataType;

use crate::games::GameKind;
use crate::problem::ProblemError;

/// Why a value is not a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotACount {
    /// A negative whole number within int64.
    Negative(i64),
    /// A fraction, an infinity, a whole number beyond `uint64` (or below int64), or text
    /// that is no number.
    NotUint64,
}

/// 2^64 as an `f64` (exact): a whole float below it is a `u64` exactly.
const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;
/// -2^63 as an `f64` (exact): a whole float from it up to 0 is an `i64` exactly.
const MINUS_TWO_TO_63: f64 = -9_223_372_036_854_775_808.0;

/// A float's value as a count; `Ok(None)` for `NaN` (no value). A whole float is exact at
/// any magnitude (above 2^53 too), so its cast to an integer within range loses nothing.
pub fn float_count(value: f64) -> Result<Option<u64>, NotACount> {
    if value.is_nan() {
        return Ok(None);
    }
    // An infinity's fraction is NaN, which is not 0.
    if value.fract() != 0.0 {
        return Err(NotACount::NotUint64);
    }
    match value {
        // -0.0 >= 0.0: negative zero is zero.
        v if (0.0..TWO_TO_64).contains(&v) => Ok(Some(v as u64)),
        v if (MINUS_TWO_TO_63..0.0).contains(&v) => Err(NotACount::Negative(v as i64)),
        _ => Err(NotACount::NotUint64),
    }
}

/// A whole number's value as a count, from its magnitude and sign.
fn signed_count(value: i128) -> Result<u64, NotACount> {
    match u64::try_from(value) {
        Ok(count) => Ok(count),
        Err(_) => Err(i64::try_from(value).map_or(NotACount::NotUint64, NotACount::Negative)),
    }
}

/// A decimal's value (`value` × 10^-`scale`) as a count: whole exactly when the digits
/// below the point are zeros.
pub fn decimal_count(value: i256, scale: i8) -> Result<u64, NotACount> {
    let ten = i256::from_i128(10);
    let whole = match scale {
        0 => value,
        // A negative scale multiplies; past i256, far past uint64.
        ..0 => ten
            .checked_pow(u32::from(scale.unsigned_abs()))
            .and_then(|factor| value.checked_mul(factor))
            .ok_or(NotACount::NotUint64)?,
        1.. => match ten.checked_pow(scale as u32) {
            Some(divisor) => match value.checked_div_rem(divisor) {
                Some((whole, rest)) if rest == i256::ZERO => whole,
                _ => return Err(NotACount::NotUint64),
            },
            // 10^scale beyond i256: only zero is whole.
            None if value == i256::ZERO => i256::ZERO,
            None => return Err(NotACount::NotUint64),
        },
    };
    whole.to_i128().map_or(Err(NotACount::NotUint64), signed_count)
}

/// A text's number as a count, read from its digits: `7`, `7.0`, `7.`, `1e3`, `1.5e1`,
/// `-3`; `Ok(None)` for `nan` in any case (no value). Spaces around it are allowed; a
/// leading `+`, which no writer puts there, is not.
pub fn text_count(text: &str) -> Result<Option<u64>, NotACount> {
    let text = text.trim();
    // Plain digits, the common cell, without the general reading below.
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text.parse().map(Some).map_err(|_| NotACount::NotUint64);
    }
    if text.eq_ignore_ascii_case("nan") {
        return Ok(None);
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent_of(exponent).ok_or(NotACount::NotUint64)?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !digits(whole) || !digits(fraction) {
        return Err(NotACount::NotUint64);
    }
    // The digits as one run, the point after `whole`; the significant ones are those
    // from the first nonzero digit to the last.
    let (whole, fraction) = (whole.as_bytes(), fraction.as_bytes());
    let digit = |at: usize| whole.get(at).or_else(|| fraction.get(at - whole.len())).copied().unwrap_or(b'0');
    let total = whole.len() + fraction.len();
    let Some(first) = (0..total).find(|&at| digit(at) != b'0') else { return Ok(Some(0)) };
    let last = (first..total).rev().find(|&at| digit(at) != b'0').unwrap_or(first);
    let significant = (last - first + 1) as i64;
    let point = whole.len() as i64 - first as i64 + exponent;
    // A digit after the point is a fraction; more than 20 before it is above 2^64 - 1.
    if point < significant || point > 20 {
        return Err(NotACount::NotUint64);
    }
    // At most 20 digits: below 10^20 < 2^128, and so is every power of ten on the way.
    let value = (first..=last).fold(0u128, |value, at| value * 10 + u128::from(digit(at) - b'0'));
    let value = value * 10u128.pow((point - significant) as u32);
    let value = i128::try_from(value).map_err(|_| NotACount::NotUint64)?;
    signed_count(if negative { -value } else { value }).map(Some)
}

/// An exponent's digits with an optional sign, saturated: beyond ±2^31 any significant
/// digit is far outside the range or far below the point, as at ±2^31.
fn exponent_of(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.parse::<u32>().unwrap_or(u32::MAX).min(1 << 31);
    Some(if negative { -i64::from(magnitude) } else { i64::from(magnitude) })
}

/// At most this much of a text value is quoted in its row's error.
const QUOTED_TEXT: usize = 64;

/// A value that is not a count, named for its row's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A negative whole number.
    Negative(i64),
    /// Anything else, as the message shows it: `7.5`, `inf`, `"x"`.
    NotUint64(String),
}

impl Fault {
    fn of(why: NotACount, shown: impl FnOnce() -> String) -> Fault {
        match why {
            NotACount::Negative(value) => Fault::Negative(value),
            NotACount::NotUint64 => Fault::NotUint64(shown()),
        }
    }

    /// The row's error: the value at `index` of a list, or the input itself (`None`).
    pub(crate) fn error(&self, game: GameKind, index: Option<u64>) -> ProblemError {
        match self {
            Fault::Negative(value) => ProblemError::NegativeValue { game, value: *value, index },
            Fault::NotUint64(value) => ProblemError::NotUint64 { game, value: value.clone(), index },
        }
    }
}

/// `text` quoted for a message, cut at [`QUOTED_TEXT`] characters.
pub(crate) fn quoted(text: &str) -> String {
    let quoted: String = text.chars().take(QUOTED_TEXT).collect();
    let cut = if quoted.len() < text.len() { "…" } else { "" };
    format!("{quoted:?}{cut}")
}

/// True when a column of `ty` holds numbers that [`Converted`] reads as counts: floats,
/// decimals and strings (integer types are read as they are).
pub fn is_convertible(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

/// A column of floats, decimals or strings, read as counts once for the positions a
/// batch's rows span.
pub(crate) struct Converted {
    /// The position of `counts[0]` in the column.
    first: usize,
    /// Each position's count; 0 where there is none (null, `NaN` or a fault).
    counts: Vec<u64>,
    /// Which positions hold a value (neither null nor `NaN`), from `first` on; `None`
    /// when all do.
    valid: Option<NullBuffer>,
    /// The positions (from `first` on) whose value is not a count, ascending.
    faults: Vec<(usize, Fault)>,
}

impl Converted {
    /// The positions `range` of `array`, read as counts; `None` when `array` is not of a
    /// type [`is_convertible`] accepts.
    pub(crate) fn of(array: &dyn Array, range: Range<usize>) -> Option<Converted> {
        let mut into = Builder::new(range.clone());
        match array.data_type() {
            DataType::Float16 => floats(array.as_primitive::<Float16Type>(), range, &mut into, f64::from),
            DataType::Float32 => floats(array.as_primitive::<Float32Type>(), range, &mut into, f64::from),
            DataType::Float64 => floats(array.as_primitive::<Float64Type>(), range, &mut into, |v| v),
            DataType::Decimal32(..) => decimals::<Decimal32Type>(array, range, &mut into),
            DataType::Decimal64(..) => decimals::<Decimal64Type>(array, range, &mut into),
            DataType::Decimal128(..) => decimals::<Decimal128Type>(array, range, &mut into),
            DataType::Decimal256(..) => decimals::<Decimal256Type>(array, range, &mut into),
            DataType::Utf8 => {
                let array = array.as_string::<i32>();
                texts(|i| array.is_valid(i).then(|| array.value(i)), range, &mut into)
            }
            DataType::LargeUtf8 => {
                let array = array.as_string::<i64>();
                texts(|i| array.is_valid(i).then(|| array.value(i)), range, &mut into)
            }
            DataType::Utf8View => {
                let array = array.as_string_view();
                texts(|i| array.is_valid(i).then(|| array.value(i)), range, &mut into)
            }
            _ => return None,
        }
        Some(into.finish())
    }

    /// The positions (from `first` on) that hold a value, or `None` when all do; for the
    /// input column of `n`, whose positions are its rows, what a mixed batch's game check
    /// reads.
    pub(crate) fn nulls(&self) -> Option<&NullBuffer> {
        self.valid.as_ref()
    }

    /// True when the value at `position` is null or `NaN`.
    #[inline]
    pub(crate) fn is_null(&self, position: usize) -> bool {
        self.valid.as_ref().is_some_and(|valid| valid.is_null(position - self.first))
    }

    /// The count at `position` (not null), or why its value is none.
    #[inline]
    pub(crate) fn get(&self, position: usize) -> Result<u64, &Fault> {
        let at = position - self.first;
        if !self.faults.is_empty() {
            if let Ok(found) = self.faults.binary_search_by_key(&at, |(at, _)| *at) {
                return Err(&self.faults[found].1);
            }
        }
        Ok(self.counts[at])
    }

    /// Every position's count and which positions hold one (neither null, `NaN` nor a
    /// fault; `None` when all do), from `first` on: what a column kernel reads, leaving the
    /// positions without a count to the row path, which names their error.
    pub(crate) fn into_counts(self) -> (Vec<u64>, Option<NullBuffer>) {
        if self.faults.is_empty() {
            return (self.counts, self.valid);
        }
        let len = self.counts.len();
        let mut valid = BooleanBufferBuilder::new(len);
        match &self.valid {
            Some(nulls) => valid.append_buffer(nulls.inner()),
            None => valid.append_n(len, true),
        }
        for (at, _) in &self.faults {
            valid.set_bit(*at, false);
        }
        (self.counts, Some(NullBuffer::new(valid.finish())))
    }

    /// The counts at `range`, once [`Converted::first_gap`] found none missing.
    #[inline]
    pub(crate) fn counts(&self, range: Range<usize>) -> &[u64] {
        &self.counts[range.start - self.first..range.end - self.first]
    }

    /// The first position in `range` that is null or not a count: its place in the range,
    /// and its fault (`None`: null or `NaN`).
    pub(crate) fn first_gap(&self, range: Range<usize>) -> Option<(usize, Option<&Fault>)> {
        let (start, end) = (range.start - self.first, range.end - self.first);
        let null = self
            .valid
            .as_ref()
            .filter(|valid| valid.null_count() > 0)
            .and_then(|valid| (start..end).find(|&at| valid.is_null(at)).map(|at| (at - start, None)));
        let first_fault = self.faults.partition_point(|(at, _)| *at < start);
        let fault = self.faults[first_fault..]
            .first()
            .filter(|(at, _)| *at < end)
            .map(|(at, fault)| (at - start, Some(fault)));
        match (null, fault) {
            (Some(null), Some(fault)) => Some(if null.0 < fault.0 { null } else { fault }),
            (null, fault) => null.or(fault),
        }
    }
}

/// What [`Converted::of`] gathers, a position at a time.
struct Builder {
    first: usize,
    counts: Vec<u64>,
    valid: BooleanBufferBuilder,
    faults: Vec<(usize, Fault)>,
}

impl Builder {
    fn new(range: Range<usize>) -> Self {
        Builder {
            first: range.start,
            counts: Vec::with_capacity(range.len()),
            valid: BooleanBufferBuilder::new(range.len()),
            faults: Vec::new(),
        }
    }

    /// The next position's value: a count, none (null or `NaN`), or a fault, which
    /// `shown` names.
    #[inline]
    fn push(&mut self, count: Result<Option<u64>, NotACount>, shown: impl FnOnce() -> String) {
        self.valid.append(!matches!(count, Ok(None)));
        let count = count.unwrap_or_else(|why| {
            self.faults.push((self.counts.len(), Fault::of(why, shown)));
            None
        });
        self.counts.push(count.unwrap_or(0));
    }

    fn finish(mut self) -> Converted {
        let valid = NullBuffer::new(self.valid.finish());
        Converted {
            first: self.first,
            counts: self.counts,
            valid: (valid.null_count() > 0).then_some(valid),
            faults: self.faults,
        }
    }
}

fn floats<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    range: Range<usize>,
    into: &mut Builder,
    widen: impl Fn(T::Native) -> f64,
) where
    T::Native: std::fmt::Debug,
{
    let values = array.values();
    for i in range {
        let count = match array.is_null(i) {
            true => Ok(None),
            // Widening a float is exact; the message shows the value as written.
            false => float_count(widen(values[i])),
        };
        into.push(count, || format!("{:?}", values[i]));
    }
}

fn decimals<T: DecimalType>(array: &dyn Array, range: Range<usize>, into: &mut Builder)
where
    T::Native: Into<i256>,
{
    let array = array.as_primitive::<T>();
    let (precision, scale) = match array.data_type() {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => (*p, *s),
        _ => unreachable!("a decimal array has a decimal type"),
    };
    let values = array.values();
    for i in range {
        let value = values[i];
        let count = match array.is_null(i) {
            true => Ok(None),
            false => decimal_count(value.into(), scale).map(Some),
        };
        into.push(count, || T::format_decimal(value, precision, scale));
    }
}

fn texts<'a>(cell: impl Fn(usize) -> Option<&'a str>, range: Range<usize>, into: &mut Builder) {
    for i in range {
        match cell(i) {
            None => into.push(Ok(None), String::new),
            Some(text) => into.push(text_count(text), || quoted(text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Decimal128Array, Decimal256Array, Float32Array, Float64Array, StringArray};
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn whole_floats_are_counts_at_any_magnitude() {
        assert_eq!(float_count(7.0), Ok(Some(7)));
        assert_eq!(float_count(-0.0), Ok(Some(0)));
        assert_eq!(float_count(f64::NAN), Ok(None));
        // 2^53 + 2 and the largest float below 2^64: exact, so read as themselves.
        assert_eq!(float_count(9_007_199_254_740_994.0), Ok(Some(9_007_199_254_740_994)));
        assert_eq!(float_count(18_446_744_073_709_549_568.0), Ok(Some(18_446_744_073_709_549_568)));
        assert_eq!(float_count(TWO_TO_64), Err(NotACount::NotUint64));
        assert_eq!(float_count(7.5), Err(NotACount::NotUint64));
        assert_eq!(float_count(f64::INFINITY), Err(NotACount::NotUint64));
        assert_eq!(float_count(f64::NEG_INFINITY), Err(NotACount::NotUint64));
        assert_eq!(float_count(-3.0), Err(NotACount::Negative(-3)));
        assert_eq!(float_count(MINUS_TWO_TO_63), Err(NotACount::Negative(i64::MIN)));
        assert_eq!(float_count(MINUS_TWO_TO_63 * 2.0), Err(NotACount::NotUint64));
        assert_eq!(float_count(-0.5), Err(NotACount::NotUint64));
    }

    #[test]
    fn decimals_are_counts_when_their_digits_below_the_point_are_zeros() {
        let d = |value: i128, scale| decimal_count(i256::from_i128(value), scale);
        assert_eq!(d(18_446_744_073_709_551_615, 0), Ok(u64::MAX));
        assert_eq!(d(18_446_744_073_709_551_616, 0), Err(NotACount::NotUint64));
        assert_eq!(d(700, 2), Ok(7));
        assert_eq!(d(750, 2), Err(NotACount::NotUint64));
        assert_eq!(d(7, -3), Ok(7000));
        assert_eq!(d(-300, 2), Err(NotACount::Negative(-3)));
        assert_eq!(d(0, 76), Ok(0));
        assert_eq!(d(1, 76), Err(NotACount::NotUint64));
        assert_eq!(d(1, 80), Err(NotACount::NotUint64));
        assert_eq!(d(0, 80), Ok(0));
        assert_eq!(d(1, -80), Err(NotACount::NotUint64));
        assert_eq!(decimal_count(i256::MAX, 0), Err(NotACount::NotUint64));
        assert_eq!(decimal_count(i256::MIN, 0), Err(NotACount::NotUint64));
    }

    #[test]
    fn texts_are_counts_when_their_digits_say_so() {
        for (text, expected) in [
            ("7", Ok(Some(7))),
            (" 7 ", Ok(Some(7))),
            ("7.0", Ok(Some(7))),
            ("7.", Ok(Some(7))),
            (".0", Ok(Some(0))),
            ("007", Ok(Some(7))),
            ("1e3", Ok(Some(1000))),
            ("1E+3", Ok(Some(1000))),
            ("1.5e1", Ok(Some(15))),
            ("1500e-2", Ok(Some(15))),
            ("0e99999999999999999999", Ok(Some(0))),
            ("-0", Ok(Some(0))),
            ("18446744073709551615", Ok(Some(u64::MAX))),
            ("18446744073709551615.000", Ok(Some(u64::MAX))),
            ("1.8446744073709551615e19", Ok(Some(u64::MAX))),
            ("1.8446744073709551616e19", Err(NotACount::NotUint64)),
            ("18446744073709551616", Err(NotACount::NotUint64)),
            ("1e20", Err(NotACount::NotUint64)),
            ("1e99999999999999999999", Err(NotACount::NotUint64)),
            ("1e-99999999999999999999", Err(NotACount::NotUint64)),
            ("1.25e1", Err(NotACount::NotUint64)),
            ("7.5", Err(NotACount::NotUint64)),
            ("-3", Err(NotACount::Negative(-3))),
            ("-3.0", Err(NotACount::Negative(-3))),
            ("-9223372036854775808", Err(NotACount::Negative(i64::MIN))),
            ("-9223372036854775809", Err(NotACount::NotUint64)),
            ("nan", Ok(None)),
            ("NaN", Ok(None)),
            ("inf", Err(NotACount::NotUint64)),
            ("+7", Err(NotACount::NotUint64)),
            ("", Err(NotACount::NotUint64)),
            (".", Err(NotACount::NotUint64)),
            ("e3", Err(NotACount::NotUint64)),
            ("1e", Err(NotACount::NotUint64)),
            ("1e+", Err(NotACount::NotUint64)),
            ("1.2.3", Err(NotACount::NotUint64)),
            ("0x10", Err(NotACount::NotUint64)),
            ("1_000", Err(NotACount::NotUint64)),
            ("--1", Err(NotACount::NotUint64)),
        ] {
            assert_eq!(text_count(text), expected, "{text:?}");
        }
    }

    proptest! {
        /// Every count written as Rust writes its float, as a decimal with zeros after the
        /// point, or with an exponent, reads back as itself; the same digits with a
        /// nonzero digit after the point are no count.
        #[test]
        fn a_count_in_any_notation_reads_back(value: u64, zeros in 0usize..4, shift in 0usize..5) {
            let digits = value.to_string();
            prop_assert_eq!(text_count(&digits), Ok(Some(value)));
            prop_assert_eq!(text_count(&format!("{digits}.{}", "0".repeat(zeros))), Ok(Some(value)));
            let shift = shift.min(digits.len() - 1);
            let (head, tail) = digits.split_at(digits.len() - shift);
            let exponent = format!("{head}{}{tail}e{shift}", if tail.is_empty() { "" } else { "." });
            prop_assert_eq!(text_count(&exponent), Ok(Some(value)));
            prop_assert_eq!(text_count(&format!("{digits}.{}1", "0".repeat(zeros))), Err(NotACount::NotUint64));
            prop_assert_eq!(decimal_count(i256::from_i128(i128::from(value) * 1000), 3), Ok(value));
        }

        /// A float is a count exactly when it is whole and within range, and then it is the
        /// integer of its exact digits (`{:.0}` prints them all), as the text rule reads them.
        #[test]
        fn a_float_is_the_count_its_exact_digits_say(bits: u64) {
            let value = f64::from_bits(bits);
            let counted = float_count(value);
            if value.is_nan() {
                prop_assert_eq!(counted, Ok(None));
            } else if !value.is_finite() || value.fract() != 0.0 {
                prop_assert_eq!(counted, Err(NotACount::NotUint64));
            } else {
                prop_assert_eq!(counted, text_count(&format!("{value:.0}")));
            }
        }

        /// The same, for whole floats around the range, which random bits seldom draw.
        #[test]
        fn a_whole_float_near_the_range_is_the_count_its_digits_say(value in -1e19f64..4e19f64) {
            let value = value.trunc();
            prop_assert_eq!(float_count(value), text_count(&format!("{value:.0}")));
        }
    }

    #[test]
    fn a_column_is_converted_once_with_its_gaps_and_faults() {
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            None,
            Some(f64::NAN),
            Some(2.5),
            Some(-4.0),
            Some(3.0),
        ]));
        let converted = Converted::of(floats.as_ref(), 0..6).unwrap();
        assert_eq!(converted.get(0), Ok(1));
        assert!(converted.is_null(1) && converted.is_null(2) && !converted.is_null(3));
        assert_eq!(converted.get(3), Err(&Fault::NotUint64("2.5".into())));
        assert_eq!(converted.get(4), Err(&Fault::Negative(-4)));
        assert_eq!(converted.first_gap(0..1), None);
        assert_eq!(converted.first_gap(0..6), Some((1, None)));
        assert_eq!(converted.first_gap(3..6), Some((0, Some(&Fault::NotUint64("2.5".into())))));
        assert_eq!(converted.first_gap(5..6), None);
        assert_eq!(converted.counts(5..6), [3]);
        // A part of a column: positions keep their numbers.
        let part = Converted::of(floats.as_ref(), 4..6).unwrap();
        assert_eq!(part.first_gap(4..6), Some((0, Some(&Fault::Negative(-4)))));
        assert_eq!(part.get(5), Ok(3));
        assert!(part.nulls().is_none());

        let single: ArrayRef = Arc::new(Float32Array::from(vec![0.1f32]));
        let converted = Converted::of(single.as_ref(), 0..1).unwrap();
        assert_eq!(converted.get(0), Err(&Fault::NotUint64("0.1".into())));

        let decimals: ArrayRef = Arc::new(
            Decimal128Array::from(vec![Some(1_845), None, Some(1_800)])
                .with_precision_and_scale(20, 2)
                .unwrap(),
        );
        let converted = Converted::of(decimals.as_ref(), 0..3).unwrap();
        assert_eq!(converted.get(0), Err(&Fault::NotUint64("18.45".into())));
        assert_eq!(converted.get(2), Ok(18));
        let wide: ArrayRef = Arc::new(Decimal256Array::from(vec![i256::MAX]));
        let converted = Converted::of(wide.as_ref(), 0..1).unwrap();
        assert!(matches!(converted.get(0), Err(Fault::NotUint64(shown)) if shown.starts_with("5789604")));

        let texts: ArrayRef = Arc::new(StringArray::from(vec![Some("7.0"), Some("nan"), None, Some("x")]));
        let converted = Converted::of(texts.as_ref(), 1..4).unwrap();
        assert_eq!(converted.first_gap(1..4), Some((0, None)));
        assert_eq!(converted.get(3), Err(&Fault::NotUint64("\"x\"".into())));
        assert_eq!(Converted::of(texts.as_ref(), 0..1).unwrap().get(0), Ok(7));
        assert!(Converted::of(&arrow_array::Int64Array::from(vec![1]), 0..1).is_none());
    }
}
