//! Stone Game IV's table against the exhaustive search and its own baseline.

use std::sync::Arc;

use proptest::prelude::*;

use super::classes::{is_common, FINE};
use super::*;
use crate::games::exhaustive::stone_game_iv_mover_wins;
use crate::games::Player;

fn take(outcome: Outcome) -> u64 {
    match outcome.winning_move {
        Some(Move::StoneGameIv(StoneGameIvMove { take })) => take,
        other => panic!("expected a Stone Game IV move, got {other:?}"),
    }
}

#[test]
fn small_piles_match_the_examples() {
    let table = StoneGameIvTable::new(100);
    assert_eq!(table.solve(0).unwrap(), Outcome::BOB);
    assert_eq!(table.solve(1).unwrap(), Outcome::alice(Some(Move::StoneGameIv(StoneGameIvMove { take: 1 }))));
    assert_eq!(table.solve(2).unwrap(), Outcome::BOB);
    assert_eq!(take(table.solve(4).unwrap()), 4);
    assert_eq!(table.solve(7).unwrap(), Outcome::BOB);
    assert_eq!(table.solve(17).unwrap(), Outcome::BOB);
}

#[test]
fn every_answer_up_to_a_million_agrees_with_the_sieve_and_its_move_wins() {
    let table = StoneGameIvTable::new(1_000_000);
    table.extend_to(1_000_000).unwrap();
    // A lookup, not a search: a million answers and their moves in a debug build.
    let mut losing = vec![false; 1_000_001];
    for p in losing_positions_below(1_000_001) {
        losing[p as usize] = true;
    }
    let is_losing = |n: u64| losing[n as usize];
    for n in 0..=1_000_000 {
        let outcome = table.solve(n).unwrap();
        assert_eq!(outcome.alice_wins(), !is_losing(n), "n = {n}");
        if outcome.alice_wins() {
            let take = take(outcome);
            assert!(take <= n && is_losing(n - take), "n = {n}, take = {take}");
            // The smallest such square.
            assert!((1..).map(|k| k * k).take_while(|&sq| sq < take).all(|sq| !is_losing(n - sq)));
        }
    }
}

/// `count` SplitMix64 piles in [lo, hi).
fn random_piles(lo: u64, hi: u64, count: usize) -> impl Iterator<Item = u64> {
    let mut state = lo ^ hi;
    (0..count).map(move |_| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        lo + (z ^ (z >> 31)) % (hi - lo)
    })
}

#[test]
fn the_indexed_search_finds_the_list_walks_move_small_and_large() {
    let end = 12_000_000;
    let losing = losing_positions_below(end);
    let positions = Positions::new(losing.clone(), end);
    assert!(positions.last_odd_residue.is_some_and(|last| last < 10_000_000));
    let windows = [(0, 3000), (3000, 2_100_000), (9_000_000, 10_000_000), (11_000_000, end)];
    for n in windows.into_iter().flat_map(|(lo, hi)| random_piles(lo, hi, 4000)) {
        let below = losing.partition_point(|&p| p < n);
        let is_losing = losing.get(below) == Some(&n);
        assert_eq!(positions.contains(n), is_losing, "n = {n}");
        if !is_losing {
            assert_eq!(
                positions.smallest_winning_take(n),
                smallest_winning_take(&losing[..below], n),
                "n = {n}"
            );
        }
    }
}

#[test]
fn a_small_pile_needs_extension_until_its_move_table_is_built() {
    let table = StoneGameIvTable::new(3_000_000);
    assert!(table.needs_extension(70_000));
    table.extend_to(70_000).unwrap();
    // The move table grows to the next power of two, and the list with it.
    assert_eq!(table.small_moves_end.load(Ordering::Acquire), 1 << 17);
    assert!(table.covered() >= 1 << 17 && !table.needs_extension((1 << 17) - 1));
    assert!(table.needs_extension(1 << 17));
    // A pile beyond the move table grows it to its full size: solving any smaller
    // pile then never blocks.
    table.extend_to(1 << 21).unwrap();
    assert_eq!(table.small_moves_end.load(Ordering::Acquire), 1 << 21);
    assert!(!table.needs_extension((1 << 21) - 1));
    let searched = smallest_winning_take(&losing_positions_below(69_999), 69_999);
    assert_eq!(
        table.solve(69_999).unwrap().winning_move,
        searched.map(|take| Move::StoneGameIv(StoneGameIvMove { take }))
    );
}

#[test]
fn every_size_of_move_table_answers_as_the_list_does_and_a_restore_keeps_them_right() {
    // Limits below the smallest table, between two sizes, and above the largest.
    for limit in [1000, 100_000, 5_000_000] {
        let table = StoneGameIvTable::new(limit);
        let end = limit.min((1 << 21) - 1) + 1;
        let losing = losing_positions_below(end);
        let answer = |n: u64| {
            let below = losing.partition_point(|&p| p < n);
            smallest_winning_take(&losing[..below], n).map(|take| Move::StoneGameIv(StoneGameIvMove { take }))
        };
        // Piles in rising order grow the table a size at a time.
        let piles: Vec<u64> = [5, 70_000, 140_000, 600_000, (1 << 21) - 1]
            .into_iter()
            .filter(|&n| n <= limit)
            .chain(random_piles(0, end, 300))
            .collect();
        for &n in &piles {
            assert_eq!(table.solve(n).unwrap().winning_move, answer(n), "limit {limit}, n = {n}");
        }
        // A restore that covers more makes no table current; answers stay the same.
        assert!(limit < 5_000_000 || table.covered() <= limit, "the largest limit is restored");
        if table.covered() <= limit {
            table.restore(limit + 1, losing_positions_below(limit + 1)).unwrap();
            assert_eq!(table.small_moves_current.load(Ordering::Acquire), 0);
        }
        for &n in &piles {
            assert_eq!(table.solve(n).unwrap().winning_move, answer(n), "restored, limit {limit}, n = {n}");
        }
    }
}

#[test]
fn beyond_the_limit_is_out_of_range_and_the_table_stops_at_it() {
    let table = StoneGameIvTable::new(1000);
    assert_eq!(
        table.solve(1001),
        Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n: 1001, limit: 1000 })
    );
    table.extend_to(1000).unwrap();
    assert_eq!(table.covered(), 1001);
    assert!(!table.needs_extension(1000) && !table.needs_extension(5000));
    assert_eq!(StoneGameIvTable::new(u64::MAX).limit(), MAX_LIMIT);
}

#[test]
fn limits_up_to_the_maximum_are_taken_and_larger_ones_refused() {
    assert_eq!(StoneGameIvTable::try_new(10_000_000_000).unwrap().limit(), 10_000_000_000);
    assert_eq!(StoneGameIvTable::try_new(MAX_LIMIT).unwrap().limit(), MAX_LIMIT);
    let err = StoneGameIvTable::try_new(MAX_LIMIT + 1).unwrap_err();
    assert_eq!(err, LimitTooLarge { limit: MAX_LIMIT + 1 });
    assert_eq!(err.to_string(), "stone game iv limit 100000000001 is above the maximum 100000000000");
}

#[test]
fn concurrent_callers_get_right_answers_while_an_extension_runs() {
    let table = Arc::new(StoneGameIvTable::new(10_000_000));
    table.extend_to(1000).unwrap();
    let truth = Arc::new(losing_positions_below(10_000_001));
    let threads: Vec<_> = (0..8u64)
        .map(|i| {
            let (table, truth) = (Arc::clone(&table), Arc::clone(&truth));
            std::thread::spawn(move || {
                // Mixed targets: some inside the range, some that need the extension.
                for step in 0..200u64 {
                    let range = [1000, 3_000_000, 10_000_000][(step % 3) as usize];
                    let n = if step == 100 { 9_999_999 } else { (step * 7_919 + i * 1_000_003) % range };
                    let outcome = table.solve(n).unwrap();
                    assert_eq!(outcome.alice_wins(), truth.binary_search(&n).is_err(), "n = {n}");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let (covered, losing) = table.snapshot();
    assert_eq!(covered, 10_000_001);
    assert_eq!(losing, truth[..truth.partition_point(|&p| p < covered)]);
}

#[test]
fn covered_piles_and_early_waiters_do_not_wait_for_the_whole_extension() {
    let table = Arc::new(StoneGameIvTable::new(40_000_000));
    let extender = {
        let table = Arc::clone(&table);
        std::thread::spawn(move || table.extend_to(40_000_000))
    };
    while !table.grower.is_running() {
        std::thread::yield_now();
    }
    // A waiter for a pile the extension reaches early wakes when it is published.
    let waiter = {
        let table = Arc::clone(&table);
        std::thread::spawn(move || table.solve(2_000_000).map(|outcome| outcome.alice_wins()))
    };
    assert_eq!(waiter.join().unwrap(), Ok(true));
    // Piles already covered are answered from the list alone.
    let covered = table.covered();
    for n in (0..covered).step_by((covered / 1000) as usize) {
        table.solve(n).unwrap();
    }
    // Seconds of sieving are left (40·10^6 is far beyond 2·10^6, and debug builds are
    // slow): both of the above finished while the extension still ran.
    assert!(table.grower.is_running() && table.covered() < 40_000_001);
    extender.join().unwrap().unwrap();
    assert_eq!(table.covered(), 40_000_001);
}

#[test]
fn a_panicking_extender_lets_the_next_caller_extend() {
    let table = StoneGameIvTable::new(1_000_000);
    table.extend_to(10).unwrap();
    // An extender that dies while holding the role.
    let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.grower.grow_to(500_000, || table.covered(), |_| panic!("extender died"));
    }));
    assert!(poisoned.is_err());
    assert!(!table.grower.is_running());
    assert!(table.solve(500_000).is_ok());
    assert_eq!(table.snapshot().1, losing_positions_below(table.covered()));
}

#[test]
fn restore_takes_a_valid_list_and_rejects_a_bad_one() {
    let table = StoneGameIvTable::new(2_000_000);
    let losing = losing_positions_below(1_500_000);
    table.restore(1_500_000, losing.clone()).unwrap();
    assert_eq!(table.covered(), 1_500_000);
    // The list covers the pile; Alice's move table (below 2^21) is still to build.
    assert!(table.needs_extension(1_499_999));
    // Growing on from a restored list resyncs the sieve.
    table.extend_to(2_000_000).unwrap();
    assert_eq!(table.snapshot().1, losing_positions_below(2_000_001));

    let fresh = StoneGameIvTable::new(1000);
    let mut wrong = losing.clone();
    wrong.remove(3);
    assert_eq!(fresh.restore(1_500_000, wrong), Err(InvalidLosingList::Wrong { checked: SPOT_CHECK }));
    let mut unsorted = losing.clone();
    unsorted.swap(10, 11);
    assert_eq!(fresh.restore(1_500_000, unsorted), Err(InvalidLosingList::NotIncreasing { index: 11 }));
    assert!(matches!(fresh.restore(10, losing), Err(InvalidLosingList::BeyondCovered { covered: 10, .. })));
    assert_eq!(fresh.covered(), 0);
    // A list larger than the limit is cut at it.
    fresh.restore(1_500_000, losing_positions_below(1_500_000)).unwrap();
    assert_eq!((fresh.covered(), fresh.snapshot().1), (1001, losing_positions_below(1001)));
}

proptest! {
    #[test]
    fn the_near_scan_then_walk_finds_the_baseline_walks_move(
        n in 0u64..1_000_000,
        near in prop_oneof![Just(0u64), 1u64..5000, Just(NEAR)],
    ) {
        static LOSING: std::sync::LazyLock<Vec<u64>> =
            std::sync::LazyLock::new(|| losing_positions_below(1_000_000));
        let losing = &*LOSING;
        let below = &losing[..losing.partition_point(|&p| p < n)];
        prop_assert_eq!(smallest_winning_take_near(below, n, near), baseline::smallest_winning_take(below, n));
    }

    #[test]
    fn winner_is_the_outcome_without_the_move(n in 0u64..20_000) {
        let table = StoneGameIvTable::new(20_000);
        prop_assert_eq!(table.winner(n).unwrap(), table.solve(n).unwrap().winner);
        prop_assert_eq!(table.winner(n).unwrap() == Player::Alice, stone_game_iv_mover_wins(n));
    }

    #[test]
    fn matches_exhaustive_search(n in 0u64..3000) {
        let table = StoneGameIvTable::new(3000);
        let outcome = table.solve(n).unwrap();
        prop_assert_eq!(outcome.winner == Player::Alice, stone_game_iv_mover_wins(n));
    }
}

proptest! {
    // Each case indexes up to 2^22 blocks: a second in a debug build, so few cases;
    // the three ranges and the offsets vary with each.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_indexed_search_finds_the_list_walks_move_on_made_up_lists_above_2_to_the_32(
        set in proptest::collection::btree_set(
            prop_oneof![0u64..3000, (1u64 << 32) - 3000..(1 << 32) + 3000, (2u64 << 32)..(2 << 32) + 2000],
            1..300,
        ),
        offset in 0u64..100_000,
    ) {
        // Not P-positions, but both searches answer "the smallest k² with n − k² in
        // the list" for any list; odd residues end early in some lists, not others.
        let list: Vec<u64> = set.into_iter().collect();
        let covered = list.last().unwrap() + 100_001;
        let positions = Positions::new(list.clone(), covered);
        let piles = [covered - 1 - offset, (1 << 32) + offset, (2 << 32) + offset, offset];
        for n in piles.into_iter().filter(|&n| n < covered) {
            let below = &list[..list.partition_point(|&p| p < n)];
            prop_assert_eq!(positions.smallest_winning_take(n), smallest_winning_take(below, n), "n = {}", n);
        }
    }

    #[test]
    fn the_indexed_search_finds_the_list_walks_move_on_lists_shaped_like_large_ones(
        seed in 0u64..1 << 40,
        rare in 0usize..300,
        base in prop_oneof![Just(0u64), Just(900_000_000), Just((1 << 32) - (1 << 21))],
        offsets in proptest::collection::vec(0u64..300_000, 8),
    ) {
        // As above 10^8: most in the common classes, a few anywhere, so that the
        // search tests the rare ones in each chunk's range instead of asking.
        let classes: Vec<u64> = (0..FINE).filter(|&c| is_common(c)).collect();
        let common = random_piles(seed, seed + (1 << 22), 2000)
            .map(|v| v - seed - (v - seed) % FINE + classes[(v % classes.len() as u64) as usize]);
        let rare = random_piles(seed + 1, seed + 1 + (1 << 22), rare).map(|v| v - seed - 1);
        let set: std::collections::BTreeSet<u64> = common.chain(rare).map(|v| base + v).collect();
        let list: Vec<u64> = set.into_iter().collect();
        let covered = base + (1 << 22) + 300_000;
        let positions = Positions::new(list.clone(), covered);
        for n in offsets.into_iter().map(|offset| base + (1 << 22) + offset) {
            let below = &list[..list.partition_point(|&p| p < n)];
            prop_assert_eq!(positions.smallest_winning_take(n), smallest_winning_take(below, n), "n = {}", n);
        }
    }
}
