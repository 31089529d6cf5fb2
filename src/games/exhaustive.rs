//! Brute-force minimax straight from the rules, the reference every solver is tested
//! against. Exponential: for small inputs only. Memoised on the full game state.

use std::collections::HashMap;

/// Sum Game: does Alice win from `num` with `alice_to_move` to play next?
///
/// The end result depends only on the two halves' sums, so the state is each half's sum
/// and open '?' count; every move (either half, any digit) is tried.
pub fn sum_game_alice_wins(num: &[u8], alice_to_move: bool) -> bool {
    let half = num.len() / 2;
    let tally = |part: &[u8]| {
        part.iter().fold((0u32, 0u32), |(sum, marks), &b| match b {
            b'?' => (sum, marks + 1),
            digit => (sum + u32::from(digit - b'0'), marks),
        })
    };
    let (left_sum, left_marks) = tally(&num[..half]);
    let (right_sum, right_marks) = tally(&num[half..]);
    let mut memo = HashMap::new();
    sum_state(&mut memo, [left_sum, left_marks, right_sum, right_marks], alice_to_move)
}

fn sum_state(memo: &mut HashMap<([u32; 4], bool), bool>, state: [u32; 4], alice: bool) -> bool {
    let [ls, lq, rs, rq] = state;
    if lq + rq == 0 {
        return ls != rs;
    }
    if let Some(&known) = memo.get(&(state, alice)) {
        return known;
    }
    let mut children = Vec::new();
    for digit in 0..10 {
        if lq > 0 {
            children.push([ls + digit, lq - 1, rs, rq]);
        }
        if rq > 0 {
            children.push([ls, lq, rs + digit, rq - 1]);
        }
    }
    let outcomes = children.into_iter().map(|child| sum_state(memo, child, !alice));
    let result = if alice { outcomes.into_iter().any(|w| w) } else { outcomes.into_iter().all(|w| w) };
    memo.insert((state, alice), result);
    result
}

/// Stone Game IX: does Alice win when the stones `left` remain, `removed` is the sum of
/// those already removed, and `alice_to_move` plays next?
pub fn stone_game_ix_alice_wins(left: &[u64], removed: u64, alice_to_move: bool) -> bool {
    let mut memo = HashMap::new();
    let mut remaining = left.to_vec();
    remaining.sort_unstable();
    ix_state(&mut memo, remaining, removed, alice_to_move)
}

fn ix_state(
    memo: &mut HashMap<(Vec<u64>, u64, bool), bool>,
    left: Vec<u64>,
    removed: u64,
    alice: bool,
) -> bool {
    if left.is_empty() {
        return false; // the stones ran out: Bob wins, whoever moved last
    }
    let key = (left, removed, alice);
    if let Some(&known) = memo.get(&key) {
        return known;
    }
    let (left, removed, alice) = key;
    let mut alice_wins = !alice;
    for i in 0..left.len() {
        if i > 0 && left[i] == left[i - 1] {
            continue;
        }
        let total = (u128::from(removed) + u128::from(left[i])) % 3;
        let child = if total == 0 {
            // The mover made the removed total divisible by 3 and loses.
            !alice
        } else {
            let mut rest = left.clone();
            rest.remove(i);
            ix_state(memo, rest, total as u64, !alice)
        };
        if child == alice {
            alice_wins = alice;
            break;
        }
    }
    memo.insert((left, removed, alice), alice_wins);
    alice_wins
}

/// Stone Game IV: does the player to move win with `n` stones left?
pub fn stone_game_iv_mover_wins(n: u64) -> bool {
    stone_game_iv_wins_below(n as usize + 1)[n as usize]
}

/// Stone Game IV for every pile below `end`, straight from the definition (the seeds'
/// dynamic programme): entry n says whether the player to move with n stones wins.
pub fn stone_game_iv_wins_below(end: usize) -> Vec<bool> {
    let mut wins = vec![false; end];
    for m in 1..end {
        wins[m] = (1..).map(|k| k * k).take_while(|&sq| sq <= m).any(|sq| !wins[m - sq]);
    }
    wins
}
