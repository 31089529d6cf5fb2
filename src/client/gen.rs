//! Deterministic random problem files, for demos, tests and benchmarks.
//!
//! The generator is ChaCha8 seeded from `--seed`, whose output is fixed by its
//! specification, so a seed names the same file on every platform and rand release.

use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::str::FromStr;

use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, ListArray, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::format::Format;
use crate::client::table::write::{TableWriter, ROW_GROUP_ROWS};
use crate::columnar;
use crate::convert;
use crate::games::{GameKind, InputRef, InputShape, SizeFact};
use crate::pb;

/// Relative weights of the games in a generated file, in [`GameKind::ALL`]'s order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix(pub [u32; GameKind::ALL.len()]);

impl Mix {
    /// The weight of `game`.
    pub fn weight(&self, game: GameKind) -> u32 {
        self.0[GameKind::ALL.iter().position(|&g| g == game).expect("every game is in ALL")]
    }

    /// `(game, weight)` for every game.
    fn weights(&self) -> impl Iterator<Item = (GameKind, u32)> + '_ {
        GameKind::ALL.into_iter().zip(self.0)
    }
}

impl Default for Mix {
    /// Each game's [`GameKind::mix_weight`]: Sum Game, Stone Game IX and Stone Game IV
    /// as 4:4:2; Nim Square only when asked.
    fn default() -> Self {
        Mix(GameKind::ALL.map(GameKind::mix_weight))
    }
}

/// A `--mix` or size flag that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl FromStr for Mix {
    type Err = ParseError;

    /// `sum=4,ix=4,iv=2,nim=1`; games left out weigh 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut mix = Mix([0; GameKind::ALL.len()]);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| ParseError(format!("expected GAME=WEIGHT, got {part:?}")))?;
            let weight: u32 =
                weight.trim().parse().map_err(|_| ParseError(format!("bad weight in {part:?}")))?;
            let Some(index) = GameKind::ALL.iter().position(|game| game.mix_key() == name.trim()) else {
                let keys: Vec<_> = GameKind::ALL.iter().map(|game| game.mix_key()).collect();
                return Err(ParseError(format!(
                    "unknown game {:?}; expected one of {}",
                    name.trim(),
                    keys.join(", ")
                )));
            };
            mix.0[index] = weight;
        }
        if mix.0.iter().all(|&weight| weight == 0) {
            return Err(ParseError("the mix needs at least one positive weight".into()));
        }
        Ok(mix)
    }
}

impl std::fmt::Display for Mix {
    /// The form [`Mix::from_str`] reads, games of weight 0 left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<_> = self
            .weights()
            .filter(|&(_, w)| w > 0)
            .map(|(game, w)| format!("{}={w}", game.mix_key()))
            .collect();
        f.write_str(&parts.join(","))
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

/// What to generate: the flags of `gamesolver-client gen` (each field's doc is its help
/// text; its default is [`GenConfig::default`]'s).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct GenConfig {
    /// Problems to write.
    #[arg(long)]
    pub count: u64,
    /// Seed; the same seed writes the same file.
    #[arg(long, default_value_t = GenConfig::default().seed)]
    pub seed: u64,
    /// Relative weights of the games.
    #[arg(long, default_value_t = GenConfig::default().mix)]
    pub mix: Mix,
    /// Each game's sizes: `--sum-len`, `--ix-len`, `--ix-value`, `--iv-n`, `--nim-piles`,
    /// `--nim-n` ([`GameKind::sizes`]).
    #[command(flatten)]
    pub sizes: Sizes,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig { count: 1000, seed: 0, mix: Mix::default(), sizes: Sizes::default() }
    }
}

/// The ranges every game's problems are drawn within, one a [`GameKind::sizes`] flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(Vec<Vec<RangeInclusive<u64>>>);

impl Default for Sizes {
    /// Each size's [`SizeFact::default`].
    fn default() -> Self {
        Sizes(
            GameKind::ALL
                .map(|kind| kind.sizes().iter().map(|size| size.default.0..=size.default.1).collect())
                .into(),
        )
    }
}

impl Sizes {
    /// The ranges of `kind`'s sizes, in the order of [`GameKind::sizes`].
    pub fn of(&self, kind: GameKind) -> &[RangeInclusive<u64>] {
        &self.0[kind.index()]
    }

    /// These sizes with `flag`'s (`sum-len`) set to `range`, or `None` when no game has
    /// that flag.
    pub fn with(mut self, flag: &str, range: RangeInclusive<u64>) -> Option<Self> {
        let (kind, at) =
            size_flags().find(|(_, _, size)| size.flag == flag).map(|(kind, at, _)| (kind, at))?;
        self.0[kind.index()][at] = range;
        Some(self)
    }
}

/// Every game's size flags: the game, the size's place among its sizes, its facts.
fn size_flags() -> impl Iterator<Item = (GameKind, usize, SizeFact)> {
    GameKind::ALL
        .into_iter()
        .flat_map(|kind| kind.sizes().iter().enumerate().map(move |(at, &size)| (kind, at, size)))
}

impl clap::Args for Sizes {
    fn augment_args(command: clap::Command) -> clap::Command {
        command.args(size_flags().map(|(_, _, size)| {
            let default = SizeRange(size.default.0..=size.default.1).to_string();
            clap::Arg::new(size.flag)
                .long(size.flag)
                .help(size.help)
                .value_name(size.flag.to_uppercase().replace('-', "_"))
                .default_value(default)
                .value_parser(|value: &str| value.parse::<SizeRange>())
        }))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

impl clap::FromArgMatches for Sizes {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut sizes = Sizes::default();
        sizes.update_from_arg_matches(matches)?;
        Ok(sizes)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (kind, at, size) in size_flags() {
            if let Some(range) = matches.get_one::<SizeRange>(size.flag) {
                self.0[kind.index()][at] = range.0.clone();
            }
        }
        Ok(())
    }
}

/// Writes `config.count` problems, one JSON line each (the protobuf JSON mapping, as
/// pbjson writes it), with ids `g1`, `g2`, ...
pub fn generate(config: &GenConfig, out: &mut impl Write) -> io::Result<()> {
    let mut line = Vec::with_capacity(256);
    for problem in problems(config) {
        line.clear();
        serde_json::to_writer(&mut line, &problem)?;
        line.push(b'\n');
        out.write_all(&line)?;
    }
    out.flush()
}

/// Rows of a generated table written at a time.
const TABLE_BATCH_ROWS: usize = 1 << 16;

/// Writes the problems [`generate`] writes as a table in `format` (Parquet, Arrow IPC or
/// CSV): the column `id`, then the input column of each game the mix has (`num`,
/// `stones`, `n`, `piles`), null where a row is another game's.
pub fn generate_table(
    config: &GenConfig,
    format: Format,
    out: Box<dyn Write + Send>,
) -> Result<(), ArrowError> {
    let kinds: Vec<GameKind> =
        GameKind::ALL.into_iter().filter(|&kind| config.mix.weight(kind) > 0).collect();
    let mut fields = vec![Field::new(columnar::ID, DataType::Utf8, false)];
    fields.extend(kinds.iter().map(|&kind| Field::new(kind.input(), columnar::input_type(kind), true)));
    let schema = Arc::new(Schema::new(fields));
    let mut writer = TableWriter::new(format, out, &schema, 0, ROW_GROUP_ROWS)?;
    let mut rows = ProblemRows::default();
    for problem in problems(config) {
        rows.push(problem);
        if rows.len() == TABLE_BATCH_ROWS {
            writer.write(&rows.finish(&schema, &kinds)?, &[])?;
        }
    }
    if rows.len() > 0 {
        writer.write(&rows.finish(&schema, &kinds)?, &[])?;
    }
    writer.finish()?;
    Ok(())
}

/// Problems collected into columns: the ids, then one input column a game.
struct ProblemRows {
    ids: StringBuilder,
    inputs: Vec<InputBuilder>,
}

/// A game's input column being built, by its [`InputShape`].
enum InputBuilder {
    Text(StringBuilder),
    Integer(UInt64Builder),
    Integers(ListBuilder<UInt64Builder>),
}

impl Default for ProblemRows {
    fn default() -> Self {
        let inputs = GameKind::ALL.map(|kind| match kind.input_shape() {
            InputShape::Text => InputBuilder::Text(StringBuilder::new()),
            InputShape::Integer => InputBuilder::Integer(UInt64Builder::new()),
            InputShape::Integers => InputBuilder::Integers(ListBuilder::new(UInt64Builder::new())),
        });
        ProblemRows { ids: StringBuilder::new(), inputs: inputs.into() }
    }
}

impl ProblemRows {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn push(&mut self, problem: pb::Problem) {
        self.ids.append_value(&problem.id);
        let (kind, input) = match problem.game.as_ref().map(convert::wire_input) {
            Some((kind, input)) => (Some(kind), Some(input)),
            None => (None, None),
        };
        for (builder, game) in self.inputs.iter_mut().zip(GameKind::ALL) {
            let input = input.filter(|_| kind == Some(game));
            match (builder, input) {
                (InputBuilder::Text(builder), Some(InputRef::Text(text))) => builder.append_value(text),
                (InputBuilder::Integer(builder), Some(InputRef::Integer(n))) => builder.append_value(n),
                (InputBuilder::Integers(builder), Some(InputRef::Integers(values))) => {
                    builder.values().append_slice(values);
                    builder.append(true);
                }
                (InputBuilder::Text(builder), _) => builder.append_null(),
                (InputBuilder::Integer(builder), _) => builder.append_null(),
                (InputBuilder::Integers(builder), _) => builder.append_null(),
            }
        }
    }

    /// The rows pushed so far, as a table of `schema` holding `kinds`' columns.
    fn finish(&mut self, schema: &SchemaRef, kinds: &[GameKind]) -> Result<RecordBatch, ArrowError> {
        let item = Arc::new(Field::new_list_field(DataType::UInt64, false));
        let inputs: Vec<ArrayRef> = self
            .inputs
            .iter_mut()
            .map(|builder| match builder {
                InputBuilder::Text(builder) => Arc::new(builder.finish()) as ArrayRef,
                InputBuilder::Integer(builder) => Arc::new(builder.finish()),
                InputBuilder::Integers(builder) => {
                    let (_, offsets, values, nulls) = builder.finish().into_parts();
                    Arc::new(ListArray::new(Arc::clone(&item), offsets, values, nulls))
                }
            })
            .collect();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(self.ids.finish())];
        columns.extend(kinds.iter().map(|kind| Arc::clone(&inputs[kind.index()])));
        RecordBatch::try_new(Arc::clone(schema), columns)
    }
}

/// The problems of `config`, in order, with ids `g1`, `g2`, ...: the same whatever they
/// are written as.
pub fn problems(config: &GenConfig) -> impl Iterator<Item = pb::Problem> + '_ {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let total: u32 = config.mix.0.iter().sum();
    (1..=config.count).map(move |i| {
        let mut pick = rng.random_range(0..total);
        let kind = config
            .mix
            .weights()
            .find(|&(_, weight)| match pick < weight {
                true => true,
                false => {
                    pick -= weight;
                    false
                }
            })
            .map(|(game, _)| game)
            .expect("pick is below the total weight");
        let game = kind.random(&mut rng, config.sizes.of(kind)).into();
        pb::Problem { id: format!("g{i}"), game: Some(game) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::problem_json::parse_problem;

    #[test]
    fn flags_print_as_they_parse() {
        let defaults = GenConfig::default();
        assert_eq!(defaults.mix.to_string().parse::<Mix>(), Ok(defaults.mix));
        for range in [SizeRange(defaults.sizes.of(GameKind::SumGame)[0].clone()), SizeRange(7..=7)] {
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
            sizes: [
                ("sum-len", 3..=9),
                ("ix-value", 5..=6),
                ("iv-n", 10..=20),
                ("nim-piles", 2..=3),
                ("nim-n", 30..=40),
            ]
            .into_iter()
            .try_fold(Sizes::default(), |sizes, (flag, range)| sizes.with(flag, range))
            .unwrap(),
            mix: "sum=4,ix=4,iv=2,nim=2".parse().unwrap(),
            ..GenConfig::default()
        };
        // Each game's sizes as the flags above set them: a length (or the number), then
        // the values of a list.
        let within =
            |kind: GameKind, at: usize, value: usize| config.sizes.of(kind)[at].contains(&(value as u64));
        let mut seen = [0; GameKind::ALL.len()];
        for (i, line) in generated(&config).lines().enumerate() {
            let problem = parse_problem(line.as_bytes(), i as u64 + 1).unwrap();
            assert_eq!(problem.id, format!("g{}", i + 1));
            let (kind, input) = convert::wire_input(problem.game.as_ref().unwrap());
            seen[kind.index()] += 1;
            let fits = match input {
                InputRef::Text(text) => text.len() % 2 == 0 && within(kind, 0, text.len() + 1),
                InputRef::Integer(n) => within(kind, 0, n as usize),
                InputRef::Integers(values) => {
                    within(kind, 0, values.len())
                        && values.iter().all(|&value| within(kind, 1, value as usize))
                }
            };
            assert!(fits, "{line}");
        }
        let mixed: Vec<_> = GameKind::ALL.map(|kind| config.mix.weight(kind) > 0).into();
        assert!(seen.iter().zip(mixed).all(|(&n, mixed)| (n > 50) == mixed), "{seen:?}");
    }

    #[test]
    fn a_table_holds_the_same_problems_as_the_lines() {
        use crate::client::input::InputSource;
        use crate::client::table::columns::{ColumnMap, InputColumns};
        use crate::client::table::csv::parse_cells;
        use crate::client::table::read::TableSource;
        use crate::columnar::Games;
        use arrow_array::cast::AsArray;

        let config =
            GenConfig { count: 300, seed: 5, mix: Mix([1; GameKind::ALL.len()]), ..GenConfig::default() };
        let expected: Vec<pb::Problem> = problems(&config).collect();
        let dir = tempfile::tempdir().unwrap();
        for format in [Format::Parquet, Format::Arrow, Format::Arrows, Format::Csv] {
            let path = dir.path().join(format!("p.{}", format.name()));
            generate_table(&config, format, Box::new(std::fs::File::create(&path).unwrap())).unwrap();
            let source = TableSource::open(&InputSource::File(path), format).unwrap();
            let csv = format == Format::Csv;
            let columns =
                InputColumns::resolve(source.schema(), &ColumnMap::default(), "p", csv, false).unwrap();
            let mut reader = source.reader(columns.projection(), 128, 1 << 20, 1 << 20).unwrap();
            let mut got = Vec::new();
            while let Some(batch) = reader.next_batch().unwrap() {
                let first = reader.rows() - batch.num_rows() as u64;
                let (batch, rejected) = match csv {
                    true => parse_cells(&columns, &batch, first).unwrap(),
                    false => (batch, Vec::new()),
                };
                assert!(rejected.is_empty());
                let request = columns.request(&batch, first).unwrap();
                let games = columnar::problems(&request, Games::Mixed).unwrap();
                for (row, game) in games.into_iter().enumerate() {
                    let id = request.column(0).as_string::<i32>().value(row).to_owned();
                    got.push(pb::Problem { id, game: Some(game.unwrap().into()) });
                }
            }
            assert_eq!(got, expected, "{format}");
        }
    }

    /// Every game has a `--mix` key and a generator that makes its problems, and the
    /// default mix is each game's weight.
    #[test]
    fn every_game_has_its_mix_key_and_its_generator() {
        for kind in GameKind::ALL {
            let mix: Mix = format!("{}=1", kind.mix_key()).parse().unwrap();
            assert_eq!(mix.weight(kind), 1);
            assert_eq!(Mix::default().weight(kind), kind.mix_weight());
            let config = GenConfig { count: 5, mix, ..GenConfig::default() };
            assert!(problems(&config).all(|problem| crate::convert::game_kind(&problem) == Some(kind)));
        }
    }

    /// Every game's sizes are flags of `gen`, defaulting to the registry's ranges.
    #[test]
    fn every_size_is_a_flag_with_its_default() {
        #[derive(Debug, clap::Parser)]
        struct Gen {
            #[command(flatten)]
            config: GenConfig,
        }
        use clap::Parser;
        let parsed = Gen::try_parse_from(["gen", "--count", "1"]).unwrap().config;
        assert_eq!(parsed, GenConfig { count: 1, ..GenConfig::default() });
        for (kind, at, size) in size_flags() {
            assert_eq!(parsed.sizes.of(kind)[at], size.default.0..=size.default.1, "{}", size.flag);
            let flag = format!("--{}", size.flag);
            let parsed = Gen::try_parse_from(["gen", "--count", "1", &flag, "3..5"]).unwrap().config;
            assert_eq!(parsed.sizes, Sizes::default().with(size.flag, 3..=5).unwrap(), "{flag}");
            let err = Gen::try_parse_from(["gen", "--count", "1", &flag, "9..2"]).unwrap_err();
            assert!(err.to_string().contains("empty range \"9..2\""), "{err}");
        }
        assert_eq!(size_flags().count(), GameKind::ALL.map(|kind| kind.sizes().len()).iter().sum::<usize>());
        assert_eq!(Sizes::default().with("chess-len", 1..=2), None);
    }

    #[test]
    fn flags_parse() {
        let mix = "sum=1, iv=3".parse::<Mix>().unwrap();
        assert_eq!(
            GameKind::ALL.map(|kind| mix.weight(kind)),
            GameKind::ALL.map(|kind| [("sum", 1), ("iv", 3)]
                .into_iter()
                .find(|&(key, _)| key == kind.mix_key())
                .map_or(0, |(_, weight)| weight))
        );
        assert_eq!("nim=2".parse::<Mix>().unwrap().weight(GameKind::NimSquare), 2);
        assert_eq!("sum=1,nim=2".parse::<Mix>().unwrap().to_string(), "sum=1,nim=2");
        assert!("sum=0".parse::<Mix>().is_err());
        assert!("chess=1".parse::<Mix>().is_err());
        assert_eq!("4..=8".parse::<SizeRange>(), Ok(SizeRange(4..=8)));
        assert_eq!("5".parse::<SizeRange>(), Ok(SizeRange(5..=5)));
        assert!("9..2".parse::<SizeRange>().is_err());
    }
}
