//! Oracles shared by the fuzz targets: written the plain way, independently of the
//! library's fast paths, so that a target compares two implementations instead of
//! asking the library to agree with itself.

/// Below this, Stone Game IV answers are checked against [`StoneGameIvReference`]:
/// about 10^7 steps to build, once per fuzzing process.
pub const IV_REFERENCE_END: u64 = 1 << 16;

/// Stone Game IV by the definition: `n` is won iff some square move leaves a lost pile.
#[derive(Debug)]
pub struct StoneGameIvReference {
    wins: Vec<bool>,
}

impl StoneGameIvReference {
    /// Classifies every pile below [`IV_REFERENCE_END`].
    pub fn new() -> Self {
        let end = IV_REFERENCE_END as usize;
        let mut wins = vec![false; end];
        for n in 1..end {
            wins[n] = (1..).map(|k| k * k).take_while(|&sq| sq <= n).any(|sq| !wins[n - sq]);
        }
        StoneGameIvReference { wins }
    }

    /// Whether the player to move wins a pile of `n` (below [`IV_REFERENCE_END`]).
    pub fn wins(&self, n: u64) -> bool {
        self.wins[n as usize]
    }

    /// The smallest square that leaves a lost pile, the move the library promises.
    pub fn smallest_winning_take(&self, n: u64) -> Option<u64> {
        (1..).map(|k| k * k).take_while(|&sq| sq <= n).find(|&sq| !self.wins(n - sq))
    }

    /// The P-positions below `end` (at most [`IV_REFERENCE_END`]), as a table file lists them.
    pub fn losing_below(&self, end: u64) -> Vec<u32> {
        (0..end as u32).filter(|&n| !self.wins(u64::from(n))).collect()
    }
}

impl Default for StoneGameIvReference {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_p_positions_are_the_known_ones() {
        // LeetCode 1510's examples: 1 and 4 are won, 2 and 7 lost, 17 lost.
        let reference = StoneGameIvReference::new();
        assert_eq!(reference.losing_below(40), [0, 2, 5, 7, 10, 12, 15, 17, 20, 22, 34, 39]);
        assert_eq!(reference.smallest_winning_take(8), Some(1));
        assert_eq!(reference.smallest_winning_take(7), None);
    }
}
