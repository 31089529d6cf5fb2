//! A game's input column as kernels read it: counts as `u64` values with which rows hold
//! one, read once for the batch. A `uint64` column's values are used where they lie;
//! another integer type is cast once (a negative value becomes a gap), and floats,
//! decimals and strings are converted once by the rule of [`super::super::numbers`]. A
//! gap (null, `NaN`, negative, not a count) is left to the row path, which names its
//! error.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::Array;
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_schema::DataType;

use super::super::input::Offsets;
use super::super::numbers::{self, Converted};

/// A column of counts.
pub(super) struct Counts {
    pub(super) values: ScalarBuffer<u64>,
    /// The positions that hold a count; `None` when all do.
    pub(super) valid: Option<NullBuffer>,
}

impl Counts {
    /// `array` read as counts; `None` for a type that holds no numbers.
    pub(super) fn of(array: &dyn Array) -> Option<Counts> {
        let ty = array.data_type();
        if *ty == DataType::UInt64 {
            let array = array.as_primitive::<UInt64Type>();
            return Some(Counts { values: array.values().clone(), valid: live(array.nulls()) });
        }
        if ty.is_integer() {
            // A safe cast makes each negative value a null: that row's gap.
            let cast = arrow_cast::cast(array, &DataType::UInt64).ok()?;
            let cast = cast.as_primitive::<UInt64Type>();
            return Some(Counts { values: cast.values().clone(), valid: live(cast.nulls()) });
        }
        if numbers::is_convertible(ty) {
            let (values, valid) = Converted::of(array, 0..array.len())?.into_counts();
            return Some(Counts { values: values.into(), valid: live(valid.as_ref()) });
        }
        None
    }

    /// The count at `at`, if it holds one.
    #[inline]
    pub(super) fn get(&self, at: usize) -> Option<u64> {
        match &self.valid {
            Some(valid) if valid.is_null(at) => None,
            _ => Some(self.values[at]),
        }
    }

    /// The counts at `range` when every one holds a count.
    #[inline]
    pub(super) fn all(&self, range: std::ops::Range<usize>) -> Option<&[u64]> {
        let whole = match &self.valid {
            Some(valid) => valid.inner().slice(range.start, range.len()).count_set_bits() == range.len(),
            None => true,
        };
        whole.then(|| &self.values[range])
    }
}

/// Nulls that are there: `None` when every position is valid.
fn live(nulls: Option<&NullBuffer>) -> Option<NullBuffer> {
    nulls.filter(|nulls| nulls.null_count() > 0).cloned()
}

/// A list column of counts: list, large_list or fixed_size_list.
pub(super) struct Lists<'a> {
    offsets: Offsets<'a>,
    /// Where the first row's list starts in the child, which `items` begins at.
    first: usize,
    nulls: Option<NullBuffer>,
    items: Counts,
}

impl<'a> Lists<'a> {
    /// `array` read as lists of counts; `None` for another type.
    pub(super) fn of(array: &'a dyn Array) -> Option<Lists<'a>> {
        let (offsets, child) = Offsets::of(array)?;
        let mut lists = Lists { offsets, first: 0, nulls: live(array.nulls()), items: Counts::empty() };
        let first = lists.start(0);
        lists.first = first;
        // Only the items the rows span are read (a slice of a large array converts no more).
        let span = child.slice(first, lists.start(array.len()) - first);
        lists.items = Counts::of(span.as_ref())?;
        Some(lists)
    }

    /// Where the list in `row` starts in the child.
    #[inline]
    fn start(&self, row: usize) -> usize {
        self.offsets.start(row)
    }

    /// The counts of the list in `row`, when it is there and every item holds one.
    #[inline]
    pub(super) fn get(&self, row: usize) -> Option<&[u64]> {
        if self.nulls.as_ref().is_some_and(|nulls| nulls.is_null(row)) {
            return None;
        }
        self.items.all(self.start(row) - self.first..self.start(row + 1) - self.first)
    }
}

impl Counts {
    fn empty() -> Counts {
        Counts { values: ScalarBuffer::from(Vec::new()), valid: None }
    }
}
