//! Stone Game IX (LeetCode 2029) from the counts of stone values modulo 3.
//!
//! With `c0, c1, c2` the counts of values ≡ 0, 1, 2 (mod 3): when `c0` is even, Alice
//! wins iff `c1 ≥ 1` and `c2 ≥ 1`; when it is odd, iff `|c1 − c2| > 2`. Stones ≡ 0 swap
//! turns, so only their parity matters, and Alice may never open with one (0 is
//! divisible by 3). Values are any `u64`; only their residues are summed, so nothing
//! overflows.

mod game;

pub use self::game::{StoneGameIx, StoneGameIxMove};
use super::{Move, Outcome};

/// `x * INVERSE_OF_3 ≡ x / 3 (mod 2^64)` for multiples of 3.
const INVERSE_OF_3: u64 = 0xAAAA_AAAA_AAAA_AAAB;
/// With `x = 3k + r`, `x * INVERSE_OF_3 mod 2^64 = k + r * INVERSE_OF_3` falls in
/// `[0, ONE_THIRD]` for r = 0, `(ONE_THIRD, TWO_THIRDS]` for r = 2, above for r = 1:
/// `k ≤ ONE_THIRD` always, and no sum wraps.
const ONE_THIRD: u64 = u64::MAX / 3;
const TWO_THIRDS: u64 = 2 * ONE_THIRD;

/// Residue counts `[c0, c1, c2]` of the stones.
///
/// One multiplication and two comparisons a stone, with no table to update: `% 3` costs
/// a wide multiply and shifts, and incrementing `counts[r]` chains each stone to the
/// previous one through memory whenever their residues agree.
fn residue_counts(stones: &[u64]) -> [u64; 3] {
    let (mut not_zero, mut one) = (0u64, 0u64);
    for &stone in stones {
        let scaled = stone.wrapping_mul(INVERSE_OF_3);
        not_zero += u64::from(scaled > ONE_THIRD);
        one += u64::from(scaled > TWO_THIRDS);
    }
    [stones.len() as u64 - not_zero, one, not_zero - one]
}

/// Solves Stone Game IX; the winning move is the first stone of the residue to open with.
pub fn solve(stones: &[u64]) -> Outcome {
    let [c0, c1, c2] = residue_counts(stones);
    let opening = if c0 % 2 == 0 {
        // Open with the scarcer of 1 and 2: the opponent then runs out of replies first.
        (c1 >= 1 && c2 >= 1).then_some(if c1 <= c2 { 1 } else { 2 })
    } else if c1 > c2 + 2 {
        // One zero to spend: open with the plentiful residue and swap turns when needed.
        Some(1)
    } else if c2 > c1 + 2 {
        Some(2)
    } else {
        None
    };
    match opening {
        None => Outcome::BOB,
        Some(residue) => {
            let index = stones.iter().position(|&s| s % 3 == residue).map(|i| i as u64);
            Outcome::alice(index.map(|index| Move::StoneGameIx(StoneGameIxMove { index })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::{exhaustive, Player};
    use proptest::prelude::*;

    #[test]
    fn seed_examples() {
        assert_eq!(solve(&[2, 1]).winner, Player::Alice);
        assert_eq!(solve(&[2]).winner, Player::Bob);
        assert_eq!(solve(&[5, 1, 2, 4, 3]).winner, Player::Bob);
    }

    #[test]
    fn parity_of_multiples_of_three() {
        // One stone divisible by 3 flips the even case: [1, 2] is Alice's, [3, 1, 2] Bob's.
        assert_eq!(solve(&[3, 1, 2]).winner, Player::Bob);
        assert_eq!(solve(&[3, 3, 1, 2]).winner, Player::Alice);
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(solve(&[]), Outcome::BOB);
        assert_eq!(solve(&[3]), Outcome::BOB);
        // u64::MAX is a multiple of 3; MAX - 1 and MAX - 2 leave 2 and 1.
        assert_eq!(solve(&[u64::MAX - 1, u64::MAX - 2]).winner, Player::Alice);
        assert_eq!(solve(&[u64::MAX, u64::MAX - 1, u64::MAX - 2]).winner, Player::Bob);
    }

    /// The archived attempt in the seeds (Python), ported line by line: a reasoning error
    /// that the exhaustive comparison below must reject.
    fn archived_wrong_attempt(stones: &[u64]) -> bool {
        let n = stones.len() as i64;
        if n == 1 {
            return false;
        }
        let [c0, c1, c2] = residue_counts(stones).map(|c| c as i64);
        if c1 == 0 {
            return c2 >= 3 && (c0 + 2) % 2 == 1;
        }
        if c2 == 0 {
            return c1 >= 3 && (c0 + 2) % 2 == 1;
        }
        let total = |a: i64, b: i64| {
            let mut t = if a == 2 * b || a == 2 * b + 1 {
                0
            } else if a <= 2 * b {
                a / 2 + c0
            } else {
                b + c0 + 1
            };
            if a % 2 == 1 && a <= 2 * b {
                t += if b > a / 2 { 2 } else { 1 };
            }
            t
        };
        total(c1, c2) % 2 == 1 || total(c2, c1) % 2 == 1
    }

    #[test]
    fn exhaustive_comparison_catches_the_archived_attempt() {
        let wrong = (0..4u64)
            .flat_map(|c0| (0..6u64).flat_map(move |c1| (0..6u64).map(move |c2| (c0, c1, c2))))
            .map(|(c0, c1, c2)| {
                let mut stones = vec![3; c0 as usize];
                stones.extend(std::iter::repeat_n(1, c1 as usize));
                stones.extend(std::iter::repeat_n(2, c2 as usize));
                stones
            })
            .find(|stones| {
                archived_wrong_attempt(stones) != exhaustive::stone_game_ix_alice_wins(stones, 0, true)
            });
        assert!(wrong.is_some(), "the archived attempt should disagree with exhaustive search somewhere");
    }

    proptest! {
        #[test]
        fn residue_counts_match_the_remainder(
            stones in proptest::collection::vec(
                prop_oneof![any::<u64>(), 0u64..16, (0u64..16).prop_map(|d| u64::MAX - d)],
                0..200,
            )
        ) {
            let mut expected = [0u64; 3];
            for &stone in &stones {
                expected[(stone % 3) as usize] += 1;
            }
            prop_assert_eq!(residue_counts(&stones), expected);
        }
    }

    fn stones() -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(
            prop_oneof![0u64..12, Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()],
            0..=9,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        #[test]
        fn matches_exhaustive_search(stones in stones()) {
            let outcome = solve(&stones);
            prop_assert_eq!(outcome.alice_wins(), exhaustive::stone_game_ix_alice_wins(&stones, 0, true));
            match outcome.winning_move {
                Some(Move::StoneGameIx(StoneGameIxMove { index })) => {
                    let mut rest = stones.clone();
                    let first = rest.remove(index as usize);
                    prop_assert!(first % 3 != 0, "opening with a multiple of 3 loses at once");
                    prop_assert!(exhaustive::stone_game_ix_alice_wins(&rest, first % 3, false));
                }
                Some(other) => prop_assert!(false, "wrong move kind {:?}", other),
                None => prop_assert!(!outcome.alice_wins()),
            }
        }
    }
}
