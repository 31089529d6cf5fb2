//! Where Stone Game IV's P-positions lie mod 5^j and mod 5^3·13, the measurement behind
//! the move search's common classes (`src/games/stone_game_iv/classes.rs`).
//!
//! `cargo run --release --example iv_classes -- TABLE [FROM]` reads a table file (written
//! by `iv_cold --save` or the server's `--iv-table`) and, for the P-positions above FROM
//! (default 9·10^8), prints for each modulus 5, 25, ..., 15625, 13, 17, 1625 and 27625
//! how many classes hold 95%, 97%, 99% and 99.9% of them and how many hold none, then
//! the classes mod 1625 that hold any (as the `[u64; 26]` mask of `COMMON`).

use std::path::Path;

use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::tables::TableFile;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: iv_classes TABLE [FROM]");
    let from: u64 = args.next().map_or(900_000_000, |from| from.parse().expect("FROM is a number"));
    let table = IvTableFile::load(Path::new(&path)).expect("a table file");
    let above: Vec<u64> = table.losing.into_iter().filter(|&p| p >= from).collect();
    println!("{} P-positions in [{from}, {})", above.len(), table.covered);
    for modulus in [5u64, 25, 125, 625, 3125, 15625, 13, 17, 1625, 27625] {
        let by_count = classes_by_count(&above, modulus);
        let empty = by_count.iter().filter(|&&(count, _)| count == 0).count();
        let shares: Vec<String> = [0.95, 0.97, 0.99, 0.999]
            .into_iter()
            .map(|share| format!("{share}: {}", classes_holding(&by_count, share, above.len()).len()))
            .collect();
        println!("mod {modulus}: classes holding {}; empty: {empty}", shares.join(", "));
    }
    let held: Vec<u64> = classes_by_count(&above, 1625)
        .into_iter()
        .filter(|&(count, _)| count > 0)
        .map(|(_, class)| class)
        .collect();
    let mut mask = [0u64; 26];
    for &class in &held {
        mask[class as usize / 64] |= 1 << (class % 64);
    }
    let words: Vec<String> = mask.iter().map(|word| format!("{word:#018x}")).collect();
    println!("mod 1625, the {} classes holding any, as a mask:\n[{}]", held.len(), words.join(", "));
}

/// (count, class) for every class mod `modulus`, most populous first.
fn classes_by_count(values: &[u64], modulus: u64) -> Vec<(usize, u64)> {
    let mut counts = vec![0; modulus as usize];
    for &p in values {
        counts[(p % modulus) as usize] += 1;
    }
    let mut by_count: Vec<(usize, u64)> = counts.into_iter().zip(0..).collect();
    by_count.sort_unstable_by_key(|&(count, class)| (std::cmp::Reverse(count), class));
    by_count
}

/// The fewest classes, most populous first, that hold at least `share` of `total`.
fn classes_holding(by_count: &[(usize, u64)], share: f64, total: usize) -> Vec<u64> {
    let mut held = 0;
    by_count
        .iter()
        .take_while(|&&(count, _)| {
            let more = (held as f64) < share * total as f64;
            held += count;
            more
        })
        .map(|&(_, class)| class)
        .collect()
}
