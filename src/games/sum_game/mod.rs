//! Sum Game (LeetCode 1927) in one pass over the string.
//!
//! With `n0, q0` the digit sum and '?' count of the left half and `n1, q1` of the right,
//! let `D = 2(n0 - n1) - 9(q1 - q0)`. Bob wins iff `D == 0` (an even count of '?' is
//! implied: `D` is odd when the count is odd). A move on a '?' changes `D` by `±(2d - 9)`,
//! so at most 9 either way; Alice keeps `D` away from zero by moving it 9 further from
//! zero each turn (a left '?' to 9 or a right '?' to 0 adds 9; the mirror subtracts 9),
//! and Bob can take back at most 9.

use std::ops::RangeInclusive;

use rand::RngExt;

mod game;

pub use self::game::{SumGame, SumGameMove};
use super::{Move, Outcome, SolveError};

/// Bytes side by side in one row: two SSE2 registers' worth, so the row loop becomes
/// a handful of vector instructions.
const LANES: usize = 32;
/// Rows per block: a lane adds at most 9 a row, and 28 × 9 = 252 still fits a `u8`.
const ROWS: usize = 28;
/// Bytes per block; the per-lane `u8` sums are widened once per block.
const BLOCK: usize = LANES * ROWS;

/// Digit sum and '?' count of one half, and where its first '?' is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct HalfTally {
    digits: u64,
    marks: u64,
    first_mark: Option<usize>,
}

impl HalfTally {
    /// Adds `part`, which starts at `offset` in the half and holds only digits and '?'.
    fn add(&mut self, offset: usize, part: &[u8], digits: u64, marks: u64) {
        self.digits += digits;
        self.marks += marks;
        if self.first_mark.is_none() && marks > 0 {
            self.first_mark = part.iter().position(|&b| b == b'?').map(|i| offset + i);
        }
    }
}

/// Tallies whole rows, at most `ROWS` of them: `(digit sum, '?' count, all valid)`.
///
/// Branch-free over fixed-size rows so that LLVM keeps 32 `u8` lanes in vector registers;
/// the lanes are widened and summed once at the end.
fn tally_rows(rows: &[u8]) -> (u64, u64, bool) {
    debug_assert!(rows.len().is_multiple_of(LANES) && rows.len() <= BLOCK);
    let (mut digits, mut marks, mut bad) = ([0u8; LANES], [0u8; LANES], [0u8; LANES]);
    for row in rows.chunks_exact(LANES) {
        let row: &[u8; LANES] = row.try_into().expect("chunks_exact");
        for lane in 0..LANES {
            let byte = row[lane];
            let digit = byte.wrapping_sub(b'0');
            let is_digit = digit <= 9;
            let is_mark = byte == b'?';
            digits[lane] += if is_digit { digit } else { 0 };
            marks[lane] += u8::from(is_mark);
            bad[lane] |= u8::from(!is_digit & !is_mark);
        }
    }
    (widen(digits), widen(marks), bad == [0; LANES])
}

/// The sum of the lanes, eight at a time in a `u64`: adjacent bytes into 16-bit fields
/// (each at most 2 × 255), then the four fields by one multiplication (at most 8 × 255).
fn widen(lanes: [u8; LANES]) -> u64 {
    const LOW_BYTES: u64 = 0x00FF_00FF_00FF_00FF;
    lanes
        .chunks_exact(8)
        .map(|word| {
            let word = u64::from_le_bytes(word.try_into().expect("chunks_exact"));
            let pairs = (word & LOW_BYTES) + ((word >> 8) & LOW_BYTES);
            pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48
        })
        .sum()
}

/// Tallies fewer than `LANES` bytes one at a time, branch-free, as [`tally_rows`] does.
fn tally_tail(tail: &[u8]) -> (u64, u64, bool) {
    let (mut digits, mut marks, mut bad) = (0u32, 0u32, false);
    for &byte in tail {
        let digit = byte.wrapping_sub(b'0');
        let is_digit = digit <= 9;
        let is_mark = byte == b'?';
        digits += if is_digit { u32::from(digit) } else { 0 };
        marks += u32::from(is_mark);
        bad |= !is_digit & !is_mark;
    }
    (u64::from(digits), u64::from(marks), !bad)
}

/// Tallies `half`, or returns the offset of its first byte that is neither digit nor '?'.
fn tally(half: &[u8]) -> Result<HalfTally, usize> {
    let mut total = HalfTally::default();
    for (index, block) in half.chunks(BLOCK).enumerate() {
        let (rows, tail) = block.split_at(block.len() / LANES * LANES);
        // Short strings, the common case, skip the lanes' set-up and widening.
        let (row_digits, row_marks, rows_valid) =
            if rows.is_empty() { (0, 0, true) } else { tally_rows(rows) };
        let (tail_digits, tail_marks, tail_valid) = tally_tail(tail);
        let offset = index * BLOCK;
        if !(rows_valid && tail_valid) {
            let bad = block.iter().position(|&b| !b.is_ascii_digit() && b != b'?');
            return Err(offset + bad.unwrap_or(0));
        }
        total.add(offset, block, row_digits + tail_digits, row_marks + tail_marks);
    }
    Ok(total)
}

/// A random string for `gamesolver-client gen`, its length drawn from `len` and rounded
/// down to even.
pub fn random(rng: &mut impl RngExt, len: RangeInclusive<u64>) -> String {
    let len = rng.random_range(len) & !1;
    // Each problem has its own share of '?', so that both winners and every kind of
    // winning move show up.
    let unknown = rng.random_range(0..=100u32);
    (0..len)
        .map(|_| match rng.random_range(0..100u32) < unknown {
            true => '?',
            false => char::from(b'0' + rng.random_range(0..10u8)),
        })
        .collect()
}

/// Solves a Sum Game string; the winning move fills the first '?'.
pub fn solve(num: &str) -> Result<Outcome, SolveError> {
    let bytes = num.as_bytes();
    let half = bytes.len() / 2;
    let invalid = |index: usize| SolveError::InvalidCharacter {
        index: index as u64,
        found: num.get(index..).and_then(|rest| rest.chars().next()).unwrap_or(char::REPLACEMENT_CHARACTER),
    };
    let left = tally(&bytes[..half]).map_err(invalid)?;
    let right = tally(&bytes[half..]).map_err(|offset| invalid(half + offset))?;
    if bytes.len() % 2 == 1 {
        return Err(SolveError::OddLength { len: bytes.len() as u64 });
    }

    // i128: a string of 2^63 digits cannot arrive, but the bound costs nothing to state.
    let d = 2 * (i128::from(left.digits) - i128::from(right.digits))
        - 9 * (i128::from(right.marks) - i128::from(left.marks));
    if d == 0 {
        return Ok(Outcome::BOB);
    }
    let Some(index) = left.first_mark.or(right.first_mark.map(|i| half + i)) else {
        // No '?' left: the sums differ and the game is already over.
        return Ok(Outcome::alice(None));
    };
    let on_left = index < half;
    // Push D further from zero: +9 is a left '?' to 9 or a right '?' to 0.
    let digit = if (d > 0) == on_left { 9 } else { 0 };
    Ok(Outcome::alice(Some(Move::SumGame(SumGameMove { index: index as u64, digit }))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::{exhaustive, Player};
    use proptest::prelude::*;

    fn winner(num: &str) -> Player {
        solve(num).unwrap().winner
    }

    #[test]
    fn seed_examples() {
        assert_eq!(winner("5023"), Player::Bob);
        assert_eq!(winner("25??"), Player::Alice);
        assert_eq!(winner("?3295???"), Player::Bob);
    }

    #[test]
    fn integer_division_trap() {
        // An odd count of '?' is Alice's: `(q1 - q0) * 9 / 2` rounds and can fake a tie.
        assert_eq!(winner("4?"), Player::Alice);
        assert_eq!(winner("?5"), Player::Alice);
        assert_eq!(winner("9?"), Player::Alice);
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(solve("").unwrap(), Outcome::BOB);
        assert_eq!(solve("12").unwrap(), Outcome::alice(None));
        assert_eq!(solve("??").unwrap(), Outcome::BOB);
    }

    #[test]
    fn bad_inputs_name_the_place() {
        assert_eq!(solve("12a4").unwrap_err(), SolveError::InvalidCharacter { index: 2, found: 'a' });
        assert_eq!(solve("12é4").unwrap_err(), SolveError::InvalidCharacter { index: 2, found: 'é' });
        assert_eq!(solve("123").unwrap_err(), SolveError::OddLength { len: 3 });
        let mut long = "1".repeat(3 * BLOCK);
        long.replace_range(2 * BLOCK + 7..2 * BLOCK + 8, " ");
        assert_eq!(
            solve(&long).unwrap_err(),
            SolveError::InvalidCharacter { index: (2 * BLOCK + 7) as u64, found: ' ' }
        );
    }

    #[test]
    fn large_input_counts_across_blocks() {
        let num = format!("{}{}", "9".repeat(5 * BLOCK + 3), "?".repeat(5 * BLOCK + 3));
        // 2 * 9 * len = 9 * len: Bob mirrors every pair to 9.
        let len = (5 * BLOCK + 3) as u64;
        let expected = if len.is_multiple_of(2) { Player::Bob } else { Player::Alice };
        assert_eq!(winner(&num), expected);
    }

    /// The tally of `half` counted the plain way, one byte at a time.
    fn plain_tally(half: &[u8]) -> Result<HalfTally, usize> {
        let mut total = HalfTally::default();
        for (i, &b) in half.iter().enumerate() {
            match b {
                b'0'..=b'9' => total.digits += u64::from(b - b'0'),
                b'?' => {
                    total.marks += 1;
                    total.first_mark.get_or_insert(i);
                }
                _ => return Err(i),
            }
        }
        Ok(total)
    }

    /// Long strings, across several blocks, with runs that push every lane to its limit.
    fn long_half() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![8 => b'0'..=b'9', 1 => Just(b'?'), 4 => Just(b'9')];
        (
            proptest::collection::vec(byte, 0..4 * BLOCK),
            any::<bool>(),
            any::<proptest::sample::Index>(),
            any::<u8>(),
        )
            .prop_map(|(mut half, spoil, at, bad)| {
                if spoil && !half.is_empty() && !bad.is_ascii_digit() && bad != b'?' {
                    let at = at.index(half.len());
                    half[at] = bad;
                }
                half
            })
    }

    fn sum_game_string() -> impl Strategy<Value = String> {
        (0usize..=5)
            .prop_flat_map(|pairs| {
                proptest::collection::vec(prop_oneof![Just('?'), proptest::char::range('0', '9')], 2 * pairs)
            })
            .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn tally_matches_a_plain_count(half in long_half()) {
            prop_assert_eq!(tally(&half), plain_tally(&half));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn matches_exhaustive_search(num in sum_game_string()) {
            let outcome = solve(&num).unwrap();
            let bytes = num.as_bytes().to_vec();
            prop_assert_eq!(outcome.alice_wins(), exhaustive::sum_game_alice_wins(&bytes, true));
            match outcome.winning_move {
                Some(Move::SumGame(SumGameMove { index, digit })) => {
                    prop_assert!(outcome.alice_wins());
                    let mut after = bytes.clone();
                    prop_assert_eq!(after[index as usize], b'?');
                    after[index as usize] = b'0' + digit;
                    prop_assert!(exhaustive::sum_game_alice_wins(&after, false), "move {} {} does not win", index, digit);
                }
                Some(other) => prop_assert!(false, "wrong move kind {:?}", other),
                None => prop_assert!(!outcome.alice_wins() || !num.contains('?')),
            }
        }
    }
}
