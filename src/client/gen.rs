//! Deterministic random problem files, for demos, tests and benchmarks.
//!
//! The generator is ChaCha8 seeded from `--seed`, whose output is fixed by its
//! specification, so a seed names the same file on every platform and rand release.

use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::pb::{self, problem::Game};

/// Relative weights of the three games in a generated file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Weight of Sum Game problems.
    pub sum: u32,
    /// Weight of Stone Game IX problems.
    pub ix: u32,
    /// Weight of Stone Game IV problems.
    pub iv: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix { sum: 4, ix: 4, iv: 2 }
    }
}

/// A `--mix` or size flag that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl FromStr for Mix {
    type Err = ParseError;

    /// `sum=4,ix=4,iv=2`; games left out weigh 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut mix = Mix { sum: 0, ix: 0, iv: 0 };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| ParseError(format!("expected GAME=WEIGHT, got {part:?}")))?;
            let weight: u32 =
                weight.trim().parse().map_err(|_| ParseError(format!("bad weight in {part:?}")))?;
            match name.trim() {
                "sum" => mix.sum = weight,
                "ix" => mix.ix = weight,
                "iv" => mix.iv = weight,
                other => return Err(ParseError(format!("unknown game {other:?}; expected sum, ix or iv"))),
            }
        }
        if mix.sum + mix.ix + mix.iv == 0 {
            return Err(ParseError("the mix needs at least one positive weight".into()));
        }
        Ok(mix)
    }
}

impl std::fmt::Display for Mix {
    /// The form [`Mix::from_str`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sum={},ix={},iv={}", self.sum, self.ix, self.iv)
    }
}

/// An inclusive range flag: `N` or `MIN..MAX` (also `MIN..=MAX`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeRange(pub RangeInclusive<u64>);

impl std::fmt::Display for SizeRange {
    /// The form [`SizeRange::from_str`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0.start(), self.0.end()) {
            (lo, hi) if lo == hi => write!(f, "{lo}"),
            (lo, hi) => write!(f, "{lo}..{hi}"),
        }
    }
}

impl FromStr for SizeRange {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number =
            |t: &str| t.trim().parse::<u64>().map_err(|_| ParseError(format!("bad number in {s:?}")));
        let range = match s.split_once("..") {
            Some((lo, hi)) => number(lo)?..=number(hi.strip_prefix('=').unwrap_or(hi))?,
            None => number(s)?..=number(s)?,
        };
        if range.is_empty() {
            return Err(ParseError(format!("empty range {s:?}")));
        }
        Ok(SizeRange(range))
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Problems to write.
    pub count: u64,
    /// Seed of the generator.
    pub seed: u64,
    /// Share of each game.
    pub mix: Mix,
    /// Sum Game string length (rounded down to even).
    pub sum_len: SizeRange,
    /// Stone Game IX number of stones.
    pub ix_len: SizeRange,
    /// Stone Game IX stone values.
    pub ix_value: SizeRange,
    /// Stone Game IV pile sizes.
    pub iv_n: SizeRange,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            count: 1000,
            seed: 0,
            mix: Mix::default(),
            sum_len: SizeRange(2..=16),
            ix_len: SizeRange(1..=12),
            ix_value: SizeRange(1..=1000),
            iv_n: SizeRange(0..=1000),
        }
    }
}

/// Writes `config.count` problems, one JSON line each (the protobuf JSON mapping, as
/// pbjson writes it), with ids `g1`, `g2`, ...
pub fn generate(config: &GenConfig, out: &mut impl Write) -> io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let Mix { sum, ix, iv } = config.mix;
    let total = sum + ix + iv;
    let mut line = Vec::with_capacity(256);
    for i in 1..=config.count {
        let pick = rng.random_range(0..total);
        let game = if pick < sum {
            let len = rng.random_range(config.sum_len.0.clone()) & !1;
            // Each problem has its own share of '?', so that both winners and every
            // kind of winning move show up.
            let unknown = rng.random_range(0..=100u32);
            let num = (0..len)
                .map(|_| match rng.random_range(0..100u32) < unknown {
                    true => '?',
                    false => char::from(b'0' + rng.random_range(0..10u8)),
                })
                .collect();
            Game::SumGame(pb::SumGame { num })
        } else if pick < sum + ix {
            let len = rng.random_range(config.ix_len.0.clone());
            let stones = (0..len).map(|_| rng.random_range(config.ix_value.0.clone())).collect();
            Game::StoneGameIx(pb::StoneGameIx { stones })
        } else {
            Game::StoneGameIv(pb::StoneGameIv { n: rng.random_range(config.iv_n.0.clone()) })
        };
        line.clear();
        serde_json::to_writer(&mut line, &pb::Problem { id: format!("g{i}"), game: Some(game) })?;
        line.push(b'\n');
        out.write_all(&line)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::problem_json::parse_problem;

    #[test]
    fn flags_print_as_they_parse() {
        let defaults = GenConfig::default();
        assert_eq!(defaults.mix.to_string().parse::<Mix>(), Ok(defaults.mix));
        for range in [defaults.sum_len, SizeRange(7..=7)] {
            assert_eq!(range.to_string().parse::<SizeRange>(), Ok(range));
        }
        assert_eq!(SizeRange(7..=7).to_string(), "7");
    }

    fn generated(config: &GenConfig) -> String {
        let mut out = Vec::new();
        generate(config, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn same_seed_same_file_other_seed_other_file() {
        let config = GenConfig { count: 200, seed: 7, ..GenConfig::default() };
        assert_eq!(generated(&config), generated(&config));
        assert_ne!(generated(&config), generated(&GenConfig { seed: 8, ..config.clone() }));
    }

    #[test]
    fn every_line_is_a_valid_problem_within_the_flags() {
        let config = GenConfig {
            count: 500,
            sum_len: SizeRange(3..=9),
            ix_value: SizeRange(5..=6),
            iv_n: SizeRange(10..=20),
            ..GenConfig::default()
        };
        let mut seen = [0; 3];
        for (i, line) in generated(&config).lines().enumerate() {
            let problem = parse_problem(line.as_bytes(), i as u64 + 1).unwrap();
            assert_eq!(problem.id, format!("g{}", i + 1));
            match problem.game.unwrap() {
                Game::SumGame(g) => {
                    seen[0] += 1;
                    assert!(g.num.len() % 2 == 0 && (2..=8).contains(&g.num.len()), "{}", g.num);
                }
                Game::StoneGameIx(g) => {
                    seen[1] += 1;
                    assert!(g.stones.iter().all(|s| (5..=6).contains(s)));
                }
                Game::StoneGameIv(g) => {
                    seen[2] += 1;
                    assert!((10..=20).contains(&g.n));
                }
            }
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    #[test]
    fn flags_parse() {
        assert_eq!("sum=1, iv=3".parse::<Mix>(), Ok(Mix { sum: 1, ix: 0, iv: 3 }));
        assert!("sum=0".parse::<Mix>().is_err());
        assert!("chess=1".parse::<Mix>().is_err());
        assert_eq!("4..=8".parse::<SizeRange>(), Ok(SizeRange(4..=8)));
        assert_eq!("5".parse::<SizeRange>(), Ok(SizeRange(5..=5)));
        assert!("9..2".parse::<SizeRange>().is_err());
    }
}
