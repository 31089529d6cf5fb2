//! The Arrow Flight door against the real server: `DoExchange` answers every game as
//! `SolveBatch` does, the discovery RPCs describe the tables, and every call-level error
//! and limit has its code and message.

use crate::common;
use crate::production;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{
    FixedSizeListBuilder, Float64Builder, Int64Builder, LargeListBuilder, ListBuilder,
    StringDictionaryBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, LargeStringArray, RecordBatch,
    StringArray, UInt32Array, UInt64Array,
};
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder, FlightRecordBatchStream};
use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{Action, Empty, FlightClient, FlightData, FlightDescriptor, Ticket};
use arrow_schema::{DataType, Field, Schema};
use common::{limits, TestServer};
use futures::{StreamExt, TryStreamExt};
use gamesolver::columnar::{self, Games};
use gamesolver::games::GameKind;
use gamesolver::pb;
use gamesolver::server::ServerConfig;
use gamesolver::solver::SolverConfig;
use tonic::transport::Channel;
use tonic::Code;

/// Upper bound on any wait for the server to act; only reached when a bound is broken.
const PATIENCE: Duration = Duration::from_secs(20);

/// A Flight client without the client-side message limits, over `channel`.
fn flight_client(channel: Channel) -> FlightClient {
    let inner = FlightServiceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    FlightClient::new_from_inner(inner)
}

/// The Flight messages of `batches` under `path`: the descriptor on the first, every
/// batch whole, dictionaries sent as dictionaries.
fn messages(
    path: &[&str],
    batches: Vec<RecordBatch>,
) -> impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static {
    let descriptor = FlightDescriptor::new_path(path.iter().map(|s| s.to_string()).collect());
    FlightDataEncoderBuilder::new()
        .with_max_flight_data_size(usize::MAX)
        .with_dictionary_handling(DictionaryHandling::Resend)
        .with_flight_descriptor(Some(descriptor))
        .build(futures::stream::iter(batches.into_iter().map(Ok)))
}

/// As [`messages`], each batch with a schema message of its own (their schemas may
/// differ), its buffers compressed with `compression` (none, LZ4 frame or zstd).
fn messages_each(
    path: &[&str],
    batches: Vec<RecordBatch>,
    compression: Option<arrow_ipc::CompressionType>,
) -> impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    let options = arrow_ipc::writer::IpcWriteOptions::default().try_with_compression(compression).unwrap();
    futures::stream::iter(batches.into_iter().enumerate()).flat_map(move |(i, batch)| {
        let descriptor = (i == 0).then(|| FlightDescriptor::new_path(path.clone()));
        FlightDataEncoderBuilder::new()
            .with_max_flight_data_size(usize::MAX)
            .with_dictionary_handling(DictionaryHandling::Resend)
            .with_options(options.clone())
            .with_flight_descriptor(descriptor)
            .build(futures::stream::iter([Ok(batch)]))
    })
}

/// One exchange of `batches` under `path`: the answers, or the call's status.
async fn exchange(
    client: &mut FlightClient,
    path: &[&str],
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>, tonic::Status> {
    let answers = client.do_exchange(messages(path, batches)).await.map_err(status_of)?;
    answers.try_collect().await.map_err(status_of)
}

/// The status inside a Flight client's error.
fn status_of(err: FlightError) -> tonic::Status {
    match err {
        FlightError::Tonic(status) => *status,
        other => panic!("not a status: {other}"),
    }
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

/// One row of solutions, as a comparable tuple: alice_wins, the move and value columns
/// (null where the table has none), error_reason, error_message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    alice_wins: Option<bool>,
    move_index: Option<u64>,
    move_digit: Option<u32>,
    move_pile: Option<u64>,
    move_take: Option<u64>,
    nim_value: Option<u32>,
    error_reason: Option<String>,
    error_message: Option<String>,
}

/// The rows of a table of solutions.
fn rows(batch: &RecordBatch) -> Vec<Row> {
    let u64s = |name| {
        batch
            .column_by_name(name)
            .map_or(vec![None; batch.num_rows()], |c| c.as_primitive::<UInt64Type>().iter().collect())
    };
    let u32s = |name| {
        batch
            .column_by_name(name)
            .map_or(vec![None; batch.num_rows()], |c| c.as_primitive::<UInt32Type>().iter().collect())
    };
    let strings = |name| -> Vec<Option<String>> {
        batch.column_by_name(name).unwrap().as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect()
    };
    let alice: Vec<_> = batch.column_by_name("alice_wins").unwrap().as_boolean().iter().collect();
    let (index, digit, pile, take, value) =
        (u64s("move_index"), u32s("move_digit"), u64s("move_pile"), u64s("move_take"), u32s("nim_value"));
    let (reason, message) = (strings("error_reason"), strings("error_message"));
    (0..batch.num_rows())
        .map(|i| Row {
            alice_wins: alice[i],
            move_index: index[i],
            move_digit: digit[i],
            move_pile: pile[i],
            move_take: take[i],
            nim_value: value[i],
            error_reason: reason[i].clone(),
            error_message: message[i].clone(),
        })
        .collect()
}

/// The row a wire solution makes.
fn row_of(solution: &pb::Solution) -> Row {
    use pb::r#move::Game as M;
    let mut row = Row {
        alice_wins: None,
        move_index: None,
        move_digit: None,
        move_pile: None,
        move_take: None,
        nim_value: None,
        error_reason: None,
        error_message: None,
    };
    if let Some(error) = &solution.error {
        row.error_reason = Some(error.reason.clone());
        row.error_message = Some(error.message.clone());
        return row;
    }
    row.alice_wins = Some(solution.alice_wins);
    row.nim_value = solution.nim_value;
    match solution.winning_move.as_ref().and_then(|m| m.game.as_ref()) {
        Some(M::SumGame(m)) => (row.move_index, row.move_digit) = (Some(m.index), Some(m.digit)),
        Some(M::StoneGameIx(m)) => row.move_index = Some(m.index),
        Some(M::StoneGameIv(m)) => row.move_take = Some(m.take),
        Some(M::NimSquare(m)) => (row.move_pile, row.move_take) = (Some(m.pile), Some(m.take)),
        None => {}
    }
    row
}

/// The row of a problem that fails with `err`.
fn error_row(err: gamesolver::problem::ProblemError) -> Row {
    row_of(&gamesolver::convert::solution(String::new(), Err(err)))
}

/// What `SolveBatch` answers to `problems`, as rows.
async fn solve_batch(server: &TestServer, problems: Vec<pb::Problem>, winner_only: bool) -> Vec<Row> {
    let mut client = server.client().await;
    let request = pb::SolveBatchRequest { problems, winner_only };
    client.solve_batch(request).await.unwrap().into_inner().solutions.iter().map(row_of).collect()
}

fn iv(n: u64) -> pb::Problem {
    pb::Problem { id: String::new(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })) }
}

#[tokio::test]
async fn each_game_is_answered_as_solve_batch_answers_it() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let num: ArrayRef = Arc::new(StringArray::from(vec!["25??", "2a", "?", "", "9?5?"]));
    let mut stones = ListBuilder::new(UInt64Builder::new());
    for row in [vec![5, 1, 2], vec![1], vec![], vec![2, 3, 3, 1, 4]] {
        stones.append_value(row.into_iter().map(Some));
    }
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![0, 1, 2, 7, 10, 5_000_000_000]));
    let mut piles = ListBuilder::new(UInt64Builder::new());
    for row in [vec![3, 4], vec![1, 1], vec![], vec![10, 20, 30]] {
        piles.append_value(row.into_iter().map(Some));
    }
    let cases: Vec<(GameKind, ArrayRef)> = vec![
        (GameKind::SumGame, num),
        (GameKind::StoneGameIx, Arc::new(stones.finish())),
        (GameKind::StoneGameIv, n),
        (GameKind::NimSquare, Arc::new(piles.finish())),
    ];
    for (game, column) in cases {
        for winner_only in [false, true] {
            let path = if winner_only { vec![game.label(), "winner_only"] } else { vec![game.label()] };
            let answers = exchange(&mut client, &path, vec![batch(vec![(game.input(), column.clone())])])
                .await
                .unwrap();
            assert_eq!(answers.len(), 1);
            let schema = columnar::output_schema(Games::One(game), None);
            assert_eq!(answers[0].schema().as_ref(), &schema);
            let problems = model::problems_of(game, &column);
            let expected = solve_batch(&server, problems, winner_only).await;
            assert_eq!(rows(&answers[0]), expected, "{path:?}");
            if winner_only {
                assert!(expected.iter().all(|row| row.move_index.is_none() && row.move_take.is_none()));
            }
        }
    }
}

/// Random tables of problems, and what the contract says each row is.
mod model {
    use super::*;
    use gamesolver::problem::ProblemError;
    use proptest::prelude::*;

    /// The wire problems of a one-game column without nulls or negatives.
    pub fn problems_of(game: GameKind, column: &ArrayRef) -> Vec<pb::Problem> {
        use pb::problem::Game as G;
        (0..column.len())
            .map(|i| {
                let game = match game {
                    GameKind::SumGame => {
                        G::SumGame(pb::SumGame { num: column.as_string::<i32>().value(i).into() })
                    }
                    GameKind::StoneGameIv => {
                        G::StoneGameIv(pb::StoneGameIv { n: column.as_primitive::<UInt64Type>().value(i) })
                    }
                    GameKind::StoneGameIx => G::StoneGameIx(pb::StoneGameIx { stones: list(column, i) }),
                    GameKind::NimSquare => G::NimSquare(pb::NimSquare { piles: list(column, i) }),
                };
                pb::Problem { id: String::new(), game: Some(game) }
            })
            .collect()
    }

    fn list(column: &ArrayRef, i: usize) -> Vec<u64> {
        column.as_list::<i32>().value(i).as_primitive::<UInt64Type>().values().to_vec()
    }

    /// One row of a random table: each game's input, or null.
    #[derive(Debug, Clone, Default)]
    pub struct Cells {
        pub num: Option<String>,
        pub stones: Option<Vec<Option<i64>>>,
        pub n: Option<i64>,
        pub piles: Option<Vec<Option<i64>>>,
    }

    /// How a random table writes its columns.
    #[derive(Debug, Clone, Copy)]
    pub struct Format {
        /// utf8, large_utf8, utf8_view, dictionary
        pub num: u8,
        /// int64, uint32, uint64
        pub n: u8,
        /// list of int64, large_list of uint64, fixed_size_list of uint32 (when every list
        /// has one length)
        pub lists: u8,
        /// none, utf8, int64, dictionary
        pub id: u8,
        /// rows added before and after, then sliced off
        pub pad: usize,
        /// the IPC buffers: uncompressed, LZ4 frame, zstd
        pub compression: u8,
    }

    impl Format {
        /// The IPC compression the batches are sent with.
        pub fn compression(&self) -> Option<arrow_ipc::CompressionType> {
            match self.compression {
                1 => Some(arrow_ipc::CompressionType::LZ4_FRAME),
                2 => Some(arrow_ipc::CompressionType::ZSTD),
                _ => None,
            }
        }
    }

    fn elements() -> impl Strategy<Value = Vec<Option<i64>>> {
        let element =
            prop_oneof![12 => (0i64..12).prop_map(Some), 1 => Just(None), 1 => (-5i64..0).prop_map(Some)];
        proptest::collection::vec(element, 0..6)
    }

    fn num() -> impl Strategy<Value = String> {
        prop_oneof![4 => "([0-9?]{2}){0,4}", 1 => "[0-9?x]{0,5}"]
    }

    fn n() -> impl Strategy<Value = i64> {
        prop_oneof![8 => 0i64..3000, 1 => -3i64..0, 1 => Just(5_000_000_000)]
    }

    /// A row of one game (null one time in eight).
    pub fn cells(game: GameKind) -> impl Strategy<Value = Cells> {
        (proptest::bool::weighted(0.125), num(), elements(), n(), elements()).prop_map(
            move |(null, num, stones, n, piles)| {
                let mut cells = Cells::default();
                if !null {
                    match game {
                        GameKind::SumGame => cells.num = Some(num),
                        GameKind::StoneGameIx => cells.stones = Some(stones),
                        GameKind::StoneGameIv => cells.n = Some(n),
                        GameKind::NimSquare => cells.piles = Some(piles),
                    }
                }
                cells
            },
        )
    }

    /// A row of a mixed table: mostly one game, sometimes none or several.
    pub fn mixed_cells() -> impl Strategy<Value = Cells> {
        let one = prop_oneof![
            cells(GameKind::SumGame),
            cells(GameKind::StoneGameIx),
            cells(GameKind::StoneGameIv),
            cells(GameKind::NimSquare)
        ];
        let several =
            (num(), n()).prop_map(|(num, n)| Cells { num: Some(num), n: Some(n), ..Cells::default() });
        prop_oneof![8 => one, 1 => Just(Cells::default()), 1 => several]
    }

    pub fn format() -> impl Strategy<Value = Format> {
        (0u8..4, 0u8..5, 0u8..4, 0u8..4, 0usize..3, 0u8..3)
            .prop_map(|(num, n, lists, id, pad, compression)| Format { num, n, lists, id, pad, compression })
    }

    /// The table of `rows` in `format` (only the columns `games` reads, and the id), and
    /// the cells as that format can hold them (an unsigned column holds no negatives).
    pub fn table(rows: &[Cells], games: Games, format: Format) -> (RecordBatch, Vec<Cells>) {
        let mut cells: Vec<Cells> = rows.to_vec();
        // Floats and decimals hold negatives as signed integers do.
        let unsigned_n = matches!(format.n, 1 | 2);
        let unsigned_lists = matches!(format.lists, 1 | 2);
        for row in &mut cells {
            if unsigned_n {
                row.n = row.n.map(|n| if format.n == 1 { n.abs().min(4_000_000_000) } else { n.abs() });
            }
            if unsigned_lists {
                for list in [&mut row.stones, &mut row.piles].into_iter().flatten() {
                    list.iter_mut().flatten().for_each(|v| *v = v.abs());
                }
            }
        }
        // Padding rows, sliced off after: every column null there.
        let padded: Vec<Cells> = std::iter::repeat_n(Cells::default(), format.pad)
            .chain(cells.iter().cloned())
            .chain(std::iter::repeat_n(Cells::default(), format.pad))
            .collect();
        let mut columns: Vec<(&str, ArrayRef)> = Vec::new();
        match format.id {
            1 => columns.push((
                "id",
                Arc::new(StringArray::from_iter_values((0..padded.len()).map(|i| format!("r{i}")))),
            )),
            2 => columns.push(("id", Arc::new(Int64Array::from_iter_values(0..padded.len() as i64)))),
            3 => {
                let mut ids = StringDictionaryBuilder::<Int32Type>::new();
                ids.extend((0..padded.len()).map(|i| Some(format!("k{}", i % 3))));
                columns.push(("id", Arc::new(ids.finish())));
            }
            _ => {}
        }
        let reads = |game: GameKind| games.kinds().contains(&game);
        if reads(GameKind::SumGame) {
            let values: Vec<Option<&str>> = padded.iter().map(|c| c.num.as_deref()).collect();
            let column: ArrayRef = match format.num {
                0 => Arc::new(StringArray::from(values)),
                1 => Arc::new(LargeStringArray::from(values)),
                2 => Arc::new(arrow_array::StringViewArray::from(values)),
                _ => {
                    let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
                    dictionary.extend(values);
                    Arc::new(dictionary.finish())
                }
            };
            columns.push(("num", column));
        }
        if reads(GameKind::StoneGameIx) {
            columns.push(("stones", lists(padded.iter().map(|c| c.stones.clone()), format.lists)));
        }
        if reads(GameKind::StoneGameIv) {
            let values = padded.iter().map(|c| c.n);
            let column: ArrayRef = match format.n {
                0 => Arc::new(Int64Array::from_iter(values)),
                1 => Arc::new(UInt32Array::from_iter(values.map(|v| v.map(|v| v as u32)))),
                // pandas' type for a column with a missing value, and Spark's for uint64.
                3 => Arc::new(Float64Array::from_iter(values.map(|v| v.map(|v| v as f64)))),
                4 => Arc::new(
                    Decimal128Array::from_iter(values.map(|v| v.map(i128::from)))
                        .with_precision_and_scale(20, 0)
                        .unwrap(),
                ),
                _ => Arc::new(UInt64Array::from_iter(values.map(|v| v.map(|v| v as u64)))),
            };
            columns.push(("n", column));
        }
        if reads(GameKind::NimSquare) {
            columns.push(("piles", lists(padded.iter().map(|c| c.piles.clone()), format.lists)));
        }
        let table = batch(columns).slice(format.pad, cells.len());
        (table, cells)
    }

    /// A list column of `rows` in the format's list type.
    fn lists(rows: impl Iterator<Item = Option<Vec<Option<i64>>>>, format: u8) -> ArrayRef {
        let rows: Vec<_> = rows.collect();
        let lengths: std::collections::HashSet<_> = rows.iter().flatten().map(Vec::len).collect();
        match format {
            0 => {
                let mut builder = ListBuilder::new(Int64Builder::new());
                rows.into_iter().for_each(|row| builder.append_option(row));
                Arc::new(builder.finish())
            }
            3 => {
                let mut builder = ListBuilder::new(Float64Builder::new());
                for row in rows {
                    builder.append_option(row.map(|values| values.into_iter().map(|v| v.map(|v| v as f64))));
                }
                Arc::new(builder.finish())
            }
            // Empty lists are left out of this type: arrow-rs takes the length of a list
            // column of fixed size 0 from its null buffer alone, so rows that are all `[]`
            // (valid, no null buffer) would make a column of no rows.
            2 if lengths.len() <= 1 && !lengths.contains(&0) => {
                let size = lengths.into_iter().next().unwrap_or(0);
                let mut builder = FixedSizeListBuilder::new(UInt32Builder::new(), size as i32);
                for row in rows {
                    match row {
                        Some(values) => {
                            values
                                .into_iter()
                                .for_each(|v| builder.values().append_option(v.map(|v| v as u32)));
                            builder.append(true);
                        }
                        None => {
                            (0..size).for_each(|_| builder.values().append_null());
                            builder.append(false);
                        }
                    }
                }
                Arc::new(builder.finish())
            }
            _ => {
                let mut builder = LargeListBuilder::new(UInt64Builder::new());
                for row in rows {
                    builder.append_option(row.map(|values| values.into_iter().map(|v| v.map(|v| v as u64))));
                }
                Arc::new(builder.finish())
            }
        }
    }

    /// What the contract says a row is: a wire problem (answered as `SolveBatch` answers
    /// it), or the row's own error.
    pub fn expected(cells: &Cells, games: Games) -> Result<pb::Problem, ProblemError> {
        use pb::problem::Game as G;
        let counts = |game: GameKind, list: &[Option<i64>]| -> Result<Vec<u64>, ProblemError> {
            list.iter()
                .enumerate()
                .map(|(i, value)| {
                    let index = Some(i as u64);
                    match value {
                        None => Err(ProblemError::NullInput { game, index }),
                        Some(v) if *v < 0 => Err(ProblemError::NegativeValue { game, value: *v, index }),
                        Some(v) => Ok(*v as u64),
                    }
                })
                .collect()
        };
        let null = |game| ProblemError::NullInput { game, index: None };
        let set: Vec<GameKind> = GameKind::ALL
            .into_iter()
            .filter(|game| games.kinds().contains(game))
            .filter(|game| match game {
                GameKind::SumGame => cells.num.is_some(),
                GameKind::StoneGameIx => cells.stones.is_some(),
                GameKind::StoneGameIv => cells.n.is_some(),
                GameKind::NimSquare => cells.piles.is_some(),
            })
            .collect();
        let game = match (games, set.as_slice()) {
            (Games::One(game), []) => return Err(null(game)),
            (Games::Mixed, []) => return Ok(pb::Problem { id: String::new(), game: None }),
            (_, [game]) => *game,
            (_, several) => return Err(ProblemError::SeveralGames { games: several.to_vec() }),
        };
        let game = match game {
            GameKind::SumGame => G::SumGame(pb::SumGame { num: cells.num.clone().unwrap() }),
            GameKind::StoneGameIx => {
                G::StoneGameIx(pb::StoneGameIx { stones: counts(game, cells.stones.as_ref().unwrap())? })
            }
            GameKind::StoneGameIv => match cells.n.unwrap() {
                n if n < 0 => return Err(ProblemError::NegativeValue { game, value: n, index: None }),
                n => G::StoneGameIv(pb::StoneGameIv { n: n as u64 }),
            },
            GameKind::NimSquare => {
                G::NimSquare(pb::NimSquare { piles: counts(game, cells.piles.as_ref().unwrap())? })
            }
        };
        Ok(pb::Problem { id: String::new(), game: Some(game) })
    }
}

/// Random batches of every game and of `mixed`, in every accepted column type, sliced or
/// not, with nulls, negatives, dictionaries and ids of several types, their IPC buffers
/// uncompressed, LZ4-framed or zstd-compressed as arrow's writer makes them: each passes
/// the IPC reader's checks, and each row is answered as `SolveBatch` answers the same
/// problem, or with the row error the contract names.
#[test]
fn random_tables_are_answered_row_by_row_as_solve_batch_answers_them() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(TestServer::start(ServerConfig::default()));
    let channel = runtime.block_on(server.channel());
    let games = prop_oneof![
        Just(Games::One(GameKind::SumGame)),
        Just(Games::One(GameKind::StoneGameIx)),
        Just(Games::One(GameKind::StoneGameIv)),
        Just(Games::One(GameKind::NimSquare)),
        Just(Games::Mixed)
    ];
    let case = games.prop_flat_map(|games| {
        let row = match games {
            Games::One(game) => model::cells(game).boxed(),
            Games::Mixed => model::mixed_cells().boxed(),
        };
        // At least a row a batch: arrow-flight's encoder sends nothing for an empty one.
        let batches = proptest::collection::vec(proptest::collection::vec(row, 1..24), 1..4);
        (Just(games), model::format(), batches, any::<bool>())
    });
    let mut runner = TestRunner::new(Config { cases: 128, failure_persistence: None, ..Config::default() });
    runner
        .run(&case, |(games, format, batches, winner_only)| {
            runtime.block_on(answered_as_solve_batch(
                &server,
                channel.clone(),
                games,
                format,
                &batches,
                winner_only,
            ))
        })
        .unwrap();
}

/// Large mixed batches of random rows, in several formats: the server solves a batch of
/// small problems a run of rows at a time, and every row, at the runs' edges too, is
/// answered as `SolveBatch` answers it; so is every row of a server that hands all its
/// problems to the pool (`inline_work` 0), where a run takes the rest of its batch along.
#[test]
fn batches_of_several_runs_are_answered_row_by_row_as_solve_batch_answers_them() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let cells = model::mixed_cells();
    let mut sample = |count: usize| -> Vec<model::Cells> {
        (0..count).map(|_| cells.new_tree(&mut runner).unwrap().current()).collect()
    };
    // 4,096 rows a run: four whole runs and a part, two runs and one row, one row short of two runs.
    let batches = vec![sample(4 * 4096 + 1000), sample(2 * 4096 + 1), sample(2 * 4096 - 1)];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for inline_work in [SolverConfig::default().inline_work, 0] {
        let config = ServerConfig {
            solver: SolverConfig { inline_work, ..SolverConfig::default() },
            ..ServerConfig::default()
        };
        let server = runtime.block_on(TestServer::start(config));
        let channel = runtime.block_on(server.channel());
        for (lists, winner_only) in [(0, false), (1, true), (2, false)] {
            let format =
                model::Format { num: lists, n: lists, lists, id: lists + 1, pad: 0, compression: lists };
            let checked = answered_as_solve_batch(
                &server,
                channel.clone(),
                Games::Mixed,
                format,
                &batches,
                winner_only,
            );
            runtime.block_on(checked).unwrap();
        }
    }
}

/// Sends `batches` of rows in `format` through one exchange and checks that each answer
/// holds its table's ids and answers each row as `SolveBatch` answers the same problem,
/// or with the row error the contract names.
async fn answered_as_solve_batch(
    server: &TestServer,
    channel: Channel,
    games: Games,
    format: model::Format,
    batches: &[Vec<model::Cells>],
    winner_only: bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::prelude::*;
    let tables: Vec<_> = batches.iter().map(|rows| model::table(rows, games, format)).collect();
    let sent: Vec<RecordBatch> = tables.iter().map(|(table, _)| table.clone()).collect();
    let mut path = vec![games.name()];
    if winner_only {
        path.push("winner_only");
    }
    let mut client = flight_client(channel);
    let answers = client.do_exchange(messages_each(&path, sent.clone(), format.compression())).await.unwrap();
    let answers: Vec<RecordBatch> = answers.try_collect().await.unwrap();
    prop_assert_eq!(answers.len(), sent.len());
    for (answer, (table, cells)) in answers.iter().zip(&tables) {
        prop_assert_eq!(answer.num_rows(), table.num_rows());
        let id = table.column_by_name("id");
        let expected_schema = columnar::output_schema(
            games,
            id.map(|_| table.schema().field_with_name("id").unwrap().clone()).as_ref(),
        );
        let schema = answer.schema();
        prop_assert_eq!(schema.as_ref(), &expected_schema, "{:?}", format);
        if let Some(id) = id {
            prop_assert_eq!(answer.column(0).as_ref(), id.as_ref());
        }
        let expected: Vec<_> = cells.iter().map(|cells| model::expected(cells, games)).collect();
        let problems: Vec<_> = expected.iter().filter_map(|e| e.as_ref().ok().cloned()).collect();
        let mut solved = solve_batch(server, problems, winner_only).await.into_iter();
        let expected: Vec<Row> =
            expected.into_iter().map(|e| e.map_or_else(error_row, |_| solved.next().unwrap())).collect();
        prop_assert_eq!(rows(answer), expected, "{:?} {:?}", format, cells);
    }
    Ok(())
}

#[tokio::test]
async fn a_zero_row_batch_is_answered_with_zero_rows_and_a_dictionary_and_a_sliced_column_are_read() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    // arrow-flight's encoder sends no message for an empty batch: these are encoded by hand.
    let empty = batch(vec![("n", Arc::new(UInt64Array::from(Vec::<u64>::new())) as ArrayRef)]);
    let mut data = arrow_flight::utils::batches_to_flight_data(&empty.schema(), [&empty, &empty]).unwrap();
    data[0].flight_descriptor = Some(FlightDescriptor::new_path(vec!["stone_game_iv".into()]));
    let answers = client.do_exchange(futures::stream::iter(data.into_iter().map(Ok))).await.unwrap();
    let answers: Vec<RecordBatch> = answers.try_collect().await.unwrap();
    assert_eq!(answers.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [0, 0]);
    assert_eq!(
        answers[0].schema().as_ref(),
        &columnar::output_schema(Games::One(GameKind::StoneGameIv), None)
    );

    let mut num = StringDictionaryBuilder::<Int32Type>::new();
    num.extend([Some("25??"), Some("11"), None, Some("25??")]);
    let num: ArrayRef = Arc::new(num.finish());
    let sliced: ArrayRef = num.slice(1, 3);
    let answers = exchange(&mut client, &["sum_game"], vec![batch(vec![("num", sliced)])]).await.unwrap();
    let expected = solve_batch(
        &server,
        model::problems_of(GameKind::SumGame, &(Arc::new(StringArray::from(vec!["11", "25??"])) as ArrayRef)),
        false,
    )
    .await;
    let got = rows(&answers[0]);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], expected[0]);
    assert_eq!(
        got[1],
        error_row(gamesolver::problem::ProblemError::NullInput { game: GameKind::SumGame, index: None })
    );
    assert_eq!(got[2], expected[1]);
}

#[tokio::test]
async fn the_discovery_rpcs_describe_every_games_tables() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let id = Field::new("id", DataType::Utf8, true);
    let infos: Vec<_> = client.list_flights(bytes::Bytes::new()).await.unwrap().try_collect().await.unwrap();
    assert_eq!(infos.len(), Games::ALL.len());
    for (info, games) in infos.into_iter().zip(Games::ALL) {
        assert_eq!(info.flight_descriptor.as_ref().unwrap().path, [games.name()]);
        assert!(info.endpoint.is_empty() && info.ordered);
        let output = Schema::try_from(arrow_flight::IpcMessage(info.app_metadata.clone())).unwrap();
        assert_eq!(output, columnar::output_schema(games, Some(&id)));
        assert_eq!(info.try_decode_schema().unwrap(), columnar::input_schema(games));
    }
    let descriptor = FlightDescriptor::new_path(vec!["nim_square".into(), "winner_only".into()]);
    let info = client.get_flight_info(descriptor.clone()).await.unwrap();
    assert_eq!(info.flight_descriptor.as_ref(), Some(&descriptor));
    assert_eq!(info.try_decode_schema().unwrap(), columnar::input_schema(Games::One(GameKind::NimSquare)));
    let schema = client.get_schema(FlightDescriptor::new_path(vec!["mixed".into()])).await.unwrap();
    assert_eq!(schema, columnar::input_schema(Games::Mixed));
}

/// The message every method that is not served answers with.
fn not_served(method: &str) -> String {
    format!(
        "{method} is not served: this Flight service solves tables through DoExchange, with a descriptor path \
         [game] or [game, \"winner_only\"] (game: one of sum_game, stone_game_ix, stone_game_iv, nim_square, \
         mixed); ListFlights, GetFlightInfo and GetSchema describe their columns"
    )
}

/// The door's message for an `n` column of booleans: its type, what is read, the cast.
const WRONG_TYPE: &str = "column \"n\" is Boolean; expected whole numbers: an integer type (uint64), or a \
                          float, decimal or string type holding them; cast it first: in pandas df[\"n\"] = \
                          df[\"n\"].astype(\"UInt64\"); in Polars df = df.with_columns(pl.col(\"n\").cast(pl.UInt64)); \
                          in Spark df = df.withColumn(\"n\", F.col(\"n\").cast(\"decimal(20,0)\"))";

#[tokio::test]
async fn each_call_level_error_has_its_code_and_message() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let n = || batch(vec![("n", Arc::new(UInt64Array::from(vec![3])) as ArrayRef)]);
    let unknown = "unknown game \"chess\" in the descriptor: expected one of sum_game, stone_game_ix, \
                   stone_game_iv, nim_square, mixed";
    let cases: Vec<(Vec<&str>, RecordBatch, &str)> = vec![
        (vec!["chess"], n(), unknown),
        (vec![], n(), "the descriptor's path must name a game: one of sum_game, stone_game_ix, stone_game_iv, nim_square, mixed"),
        (vec!["stone_game_iv", "moves"], n(), "unexpected \"moves\" in the descriptor's path: after the game, only \"winner_only\" may follow"),
        (vec!["stone_game_iv"], batch(vec![("n", Arc::new(BooleanArray::from(vec![true])) as ArrayRef)]), WRONG_TYPE),
        (vec!["sum_game"], n(), "no column \"num\": a sum_game batch holds its problems there"),
        (vec!["mixed"], batch(vec![("id", Arc::new(UInt64Array::from(vec![3])) as ArrayRef)]), "no game column: a mixed batch needs at least one of num, stones, n, piles"),
    ];
    for (path, table, message) in cases {
        let status = exchange(&mut client, &path, vec![table]).await.unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::InvalidArgument, message), "{path:?}");
    }
    // A descriptor that is a command, and none at all.
    let command = FlightDescriptor::new_cmd("stone_game_iv");
    let status = client.get_flight_info(command).await.map_err(status_of).unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "the descriptor is a command, not a path: the descriptor's path must name a game: one of sum_game, \
         stone_game_ix, stone_game_iv, nim_square, mixed"
    );
    let bare = FlightDataEncoderBuilder::new().build(futures::stream::iter([Ok(n())]));
    let answers = client.do_exchange(bare).await;
    let failed = match answers {
        Ok(answers) => answers.try_collect::<Vec<_>>().await.map_err(status_of).unwrap_err(),
        Err(err) => status_of(err),
    };
    assert_eq!(failed.code(), Code::InvalidArgument);
    assert_eq!(
        failed.message(),
        "no descriptor in the request: the descriptor's path must name a game: one of sum_game, stone_game_ix, \
         stone_game_iv, nim_square, mixed"
    );
    let status = client
        .get_schema(FlightDescriptor::new_path(vec!["chess".into()]))
        .await
        .map_err(status_of)
        .unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::InvalidArgument, unknown));

    // Every method that is not served.
    let mut inner = client.inner().clone();
    let statuses = [
        ("Handshake", inner.handshake(futures::stream::empty()).await.unwrap_err()),
        ("DoGet", inner.do_get(Ticket::new("x")).await.unwrap_err()),
        ("DoPut", inner.do_put(futures::stream::empty()).await.unwrap_err()),
        ("DoAction", inner.do_action(Action::new("x", "")).await.unwrap_err()),
        (
            "PollFlightInfo",
            inner.poll_flight_info(FlightDescriptor::new_path(vec!["mixed".into()])).await.unwrap_err(),
        ),
    ];
    for (method, status) in statuses {
        assert_eq!((status.code(), status.message()), (Code::Unimplemented, not_served(method).as_str()));
    }
    let actions: Vec<_> =
        inner.list_actions(Empty {}).await.unwrap().into_inner().try_collect().await.unwrap();
    assert!(actions.is_empty());
}

#[tokio::test]
async fn a_new_schema_in_mid_stream_is_read_batch_by_batch() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let first = batch(vec![
        ("id", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
        ("n", Arc::new(UInt64Array::from(vec![2])) as ArrayRef),
    ]);
    let second = batch(vec![
        ("n", Arc::new(Int64Array::from(vec![1, -1])) as ArrayRef),
        ("id", Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef),
    ]);
    let wrong = batch(vec![("n", Arc::new(BooleanArray::from(vec![true])) as ArrayRef)]);
    // Two encoders: each sends its own schema message.
    let data = messages(&["stone_game_iv"], vec![first])
        .chain(FlightDataEncoderBuilder::new().build(futures::stream::iter([Ok(second)])))
        .chain(FlightDataEncoderBuilder::new().build(futures::stream::iter([Ok(wrong)])));
    let decoded = client.do_exchange(data).await.unwrap().into_inner();
    let payloads: Vec<_> = decoded.collect().await;
    let mut answers = Vec::new();
    let mut schemas = 0;
    let mut failure = None;
    for payload in payloads {
        match payload.map(|data| data.payload) {
            Ok(DecodedPayload::RecordBatch(batch)) => answers.push(batch),
            Ok(DecodedPayload::Schema(_)) => schemas += 1,
            Ok(DecodedPayload::None) => {}
            Err(err) => failure = Some(status_of(err)),
        }
    }
    assert_eq!(schemas, 2, "the answers' schema changed once");
    assert_eq!(answers[0].column(0).as_string::<i32>().value(0), "a");
    assert_eq!(answers[1].column(0).as_primitive::<arrow_array::types::Int64Type>().values(), &[7, 8]);
    let expected = solve_batch(&server, vec![iv(1)], false).await;
    assert_eq!(rows(&answers[1])[0], expected[0]);
    assert_eq!(
        rows(&answers[1])[1],
        error_row(gamesolver::problem::ProblemError::NegativeValue {
            game: GameKind::StoneGameIv,
            value: -1,
            index: None
        })
    );
    // The third batch, of a type the door does not read, ends the exchange.
    let failure = failure.expect("the third batch fails the call");
    assert_eq!((failure.code(), failure.message()), (Code::InvalidArgument, WRONG_TYPE));
    assert_eq!(answers.len(), 2);
}

#[tokio::test]
async fn a_batch_above_the_message_limit_is_resource_exhausted_and_the_server_goes_on() {
    let server = TestServer::start(limits(|limits| limits.max_message_bytes = 64 * 1024)).await;
    let mut client = flight_client(server.channel().await);
    let big = batch(vec![("n", Arc::new(UInt64Array::from_iter_values(0..16_384)) as ArrayRef)]);
    let status = exchange(&mut client, &["stone_game_iv"], vec![big]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("the limit is: 65536 bytes"), "{}", status.message());
    // An answer above the limit: 4,000 rows in (32 KB), about 70 KB out.
    let rows = batch(vec![("n", Arc::new(UInt64Array::from_iter_values(0..4_000)) as ArrayRef)]);
    let status = exchange(&mut client, &["stone_game_iv"], vec![rows]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().starts_with("the answer to a batch of 4000 rows is ")
            && status.message().ends_with(" bytes, above the limit of 65536 bytes: send smaller batches"),
        "{}",
        status.message()
    );
    let small = batch(vec![("n", Arc::new(UInt64Array::from(vec![5])) as ArrayRef)]);
    assert_eq!(exchange(&mut client, &["stone_game_iv"], vec![small]).await.unwrap()[0].num_rows(), 1);
}

#[tokio::test]
async fn past_its_byte_share_a_clients_batch_runs_alone_and_a_compressed_one_inflating_past_it_is_refused() {
    use tonic::codec::CompressionEncoding::Gzip;
    let server = TestServer::start(limits(|limits| limits.max_request_bytes_per_peer = Some(1 << 20))).await;
    // 2 MB of piles in one batch, above the whole share (1 MiB): it waits for all of it and runs alone.
    let big = || {
        batch(vec![(
            "n",
            Arc::new(UInt64Array::from_iter_values((0..262_144).map(|i| i % 1000))) as ArrayRef,
        )])
    };
    let mut client = flight_client(server.channel().await);
    let answers = exchange(&mut client, &["stone_game_iv", "winner_only"], vec![big(), big()]).await.unwrap();
    assert_eq!(answers.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [262_144, 262_144]);
    // Compressed, the same batch inflates past what one client may hold.
    let inner = FlightServiceClient::new(server.channel().await).send_compressed(Gzip);
    let mut compressed = FlightClient::new_from_inner(inner);
    let status = exchange(&mut compressed, &["stone_game_iv"], vec![big()]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.message(),
        "request message inflates past the 1048576 bytes of request memory one client may hold"
    );
}

#[tokio::test]
async fn ten_million_stones_in_one_row_are_refused_at_the_default_limit_and_answered_above_it() {
    let stones = || {
        let mut list = ListBuilder::new(UInt64Builder::with_capacity(10_000_000));
        list.values().append_slice(&vec![1; 10_000_000]);
        list.append(true);
        batch(vec![("stones", Arc::new(list.finish()) as ArrayRef)])
    };
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let status = exchange(&mut client, &["stone_game_ix"], vec![stones()]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("the limit is: 67108864 bytes"), "{}", status.message());

    let server = TestServer::start(limits(|limits| limits.max_message_bytes = 256 << 20)).await;
    let mut client = flight_client(server.channel().await);
    let answers = exchange(&mut client, &["stone_game_ix"], vec![stones()]).await.unwrap();
    let expected = solve_batch(
        &server,
        vec![pb::Problem {
            id: String::new(),
            game: Some(pb::problem::Game::StoneGameIx(pb::StoneGameIx { stones: vec![1; 10_000_000] })),
        }],
        false,
    )
    .await;
    assert_eq!(rows(&answers[0]), expected);
}

#[tokio::test]
async fn a_cancelled_exchange_holds_nothing_and_the_next_call_is_admitted() {
    let mut config = limits(|limits| {
        limits.max_calls = 1;
        limits.max_calls_per_peer = Some(1);
    });
    config.observability.metrics_listen = Some(production::metrics_listen());
    let server = TestServer::start(config).await;
    let metrics = server.metrics_addr();
    let mut client = flight_client(server.channel().await);
    // An exchange that has one answer back and stays open.
    let (send, batches) = futures::channel::mpsc::channel::<RecordBatch>(1);
    let data = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["stone_game_iv".into()])))
        .build(batches.map(Ok));
    let mut send = send;
    let _client = &client;
    let mut answers: FlightRecordBatchStream = client.do_exchange(data).await.unwrap();
    send.try_send(batch(vec![("n", Arc::new(UInt64Array::from(vec![4])) as ArrayRef)])).unwrap();
    assert_eq!(answers.next().await.unwrap().unwrap().num_rows(), 1);
    // The limit is held: another call is refused.
    let mut other = flight_client(server.channel().await);
    let status = exchange(&mut other, &["stone_game_iv"], vec![]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Cancelled: the answers dropped, then the requests.
    drop(answers);
    drop(send);
    let in_flight =
        "gamesolver_calls_in_flight{service=\"arrow.flight.protocol.FlightService\",method=\"DoExchange\"}";
    assert_eq!(production::settled(metrics, in_flight, 0.0).await, Some(0.0));
    let admitted = tokio::time::timeout(PATIENCE, async {
        loop {
            match exchange(
                &mut other,
                &["stone_game_iv"],
                vec![batch(vec![("n", Arc::new(UInt64Array::from(vec![2])) as ArrayRef)])],
            )
            .await
            {
                Ok(answers) => return answers,
                Err(status) if status.code() == Code::ResourceExhausted => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(status) => panic!("{status:?}"),
            }
        }
    });
    assert_eq!(admitted.await.expect("admitted once the cancelled call is gone")[0].num_rows(), 1);
    let cancelled = "gamesolver_calls_total{service=\"arrow.flight.protocol.FlightService\",method=\"DoExchange\",code=\"CANCELLED\"}";
    assert_eq!(production::settled(metrics, cancelled, 1.0).await, Some(1.0));
}

#[tokio::test]
async fn metrics_count_flight_calls_by_method_and_problems_by_game() {
    let mut config = ServerConfig::default();
    config.observability.metrics_listen = Some(production::metrics_listen());
    let server = TestServer::start(config).await;
    let metrics = server.metrics_addr();
    let mut client = flight_client(server.channel().await);
    let n: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(-1)]));
    exchange(&mut client, &["stone_game_iv"], vec![batch(vec![("n", n)])]).await.unwrap();
    let num: ArrayRef = Arc::new(StringArray::from(vec![Some("11"), None, None]));
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![Some(3), Some(4), None]));
    exchange(&mut client, &["mixed"], vec![batch(vec![("num", num), ("n", n)])]).await.unwrap();
    let _ = client.list_flights(bytes::Bytes::new()).await.unwrap().try_collect::<Vec<_>>().await.unwrap();
    let _ = client.inner_mut().do_get(Ticket::new("x")).await.unwrap_err();
    let text = production::scrape(metrics).await;
    let calls = |method: &str, code: &str| flight_calls(&text, method, code);
    assert_eq!(calls("DoExchange", "OK"), Some(2.0));
    assert_eq!(calls("ListFlights", "OK"), Some(1.0));
    assert_eq!(calls("DoGet", "UNIMPLEMENTED"), Some(1.0));
    assert!(!text.contains("service=\"unknown\""), "{text}");
    let problems = |game: &str, outcome: &str| {
        production::series(
            &text,
            &format!("gamesolver_problems_total{{game=\"{game}\",outcome=\"{outcome}\"}}"),
        )
    };
    // A row error that names its game is counted under that game.
    assert_eq!(problems("stone_game_iv", "solved"), Some(3.0));
    assert_eq!(problems("stone_game_iv", "NULL_INPUT"), Some(1.0));
    assert_eq!(problems("stone_game_iv", "NEGATIVE_VALUE"), Some(1.0));
    assert_eq!(problems("none", "SEVERAL_GAMES"), Some(1.0));
    assert_eq!(problems("none", "NO_GAME"), Some(1.0));
    assert_eq!(problems("sum_game", "solved"), None);
}

#[tokio::test]
async fn an_exchange_over_tls() {
    use gamesolver::server::TlsSettings;
    use production::{client_tls, write_leaf, TestCa};
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test ca");
    write_leaf(dir.path(), "server", &ca.server("server"));
    let settings = TlsSettings {
        cert: dir.path().join("server.pem"),
        key: dir.path().join("server.key"),
        client_ca: None,
    };
    let server = TestServer::start(ServerConfig { tls: settings.into(), ..ServerConfig::default() }).await;
    let channel = Channel::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(client_tls(&ca, None))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = flight_client(channel);
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![1, 2, 7]));
    let answers = exchange(&mut client, &["stone_game_iv"], vec![batch(vec![("n", n)])]).await.unwrap();
    let expected: Vec<_> = [1, 2, 7].map(|n| row_of(&common::expected(&iv(n), &server.tables))).into();
    assert_eq!(rows(&answers[0]), expected);
}

/// pyarrow's framing: the descriptor alone in a first message without IPC data, and
/// metadata-only messages between batches.
#[tokio::test]
async fn a_descriptor_alone_first_and_metadata_only_messages_are_read_as_pyarrow_sends_them() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = flight_client(server.channel().await);
    let first = FlightData::new().with_descriptor(FlightDescriptor::new_path(vec!["stone_game_iv".into()]));
    let n = batch(vec![("n", Arc::new(UInt64Array::from(vec![1, 2])) as ArrayRef)]);
    let mut data = arrow_flight::utils::batches_to_flight_data(&n.schema(), [&n, &n]).unwrap();
    data.insert(2, FlightData::new().with_app_metadata("between"));
    let messages = std::iter::once(first).chain(data).map(Ok);
    let answers = client.do_exchange(futures::stream::iter(messages)).await.unwrap();
    let answers: Vec<RecordBatch> = answers.try_collect().await.unwrap();
    let expected = solve_batch(&server, vec![iv(1), iv(2)], false).await;
    assert_eq!(answers.iter().map(rows).collect::<Vec<_>>(), [expected.clone(), expected]);
}

/// The count of Flight calls of `method` ended with `code` in a scrape's `text`.
fn flight_calls(text: &str, method: &str, code: &str) -> Option<f64> {
    production::series(
        text,
        &format!("gamesolver_calls_total{{service=\"arrow.flight.protocol.FlightService\",method=\"{method}\",code=\"{code}\"}}"),
    )
}

/// A `FlightDescriptor` as the wire carries it, with its path as bytes: what a client
/// that does not check UTF-8 can send.
#[derive(Clone, PartialEq, prost::Message)]
struct RawDescriptor {
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(bytes = "vec", repeated, tag = "3")]
    path: Vec<Vec<u8>>,
}

/// A `FlightData` carrying only a [`RawDescriptor`].
#[derive(Clone, PartialEq, prost::Message)]
struct RawFlightData {
    #[prost(message, optional, tag = "1")]
    flight_descriptor: Option<RawDescriptor>,
}

/// A descriptor that does not decode (a path that is not UTF-8), or whose type is not
/// PATH, or whose game name is 100 KB, is the caller's error, `INVALID_ARGUMENT` naming
/// what is wrong, in the unary calls and in `DoExchange` (whose `FlightData` tonic's own
/// prost codec decodes), and counted so: never `INTERNAL`, which pages.
#[tokio::test]
async fn a_descriptor_that_does_not_decode_or_is_no_path_is_the_callers_error() {
    let mut config = ServerConfig::default();
    config.observability.metrics_listen = Some(production::metrics_listen());
    let server = TestServer::start(config).await;
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    let get_info = |descriptor: RawDescriptor| {
        let mut grpc = grpc.clone();
        async move {
            grpc.ready().await.unwrap();
            let path =
                http::uri::PathAndQuery::from_static("/arrow.flight.protocol.FlightService/GetFlightInfo");
            let codec = tonic_prost::ProstCodec::<RawDescriptor, arrow_flight::FlightInfo>::default();
            grpc.unary(tonic::Request::new(descriptor), path, codec).await.unwrap_err()
        }
    };
    let not_utf8 = RawDescriptor { r#type: 1, path: vec![b"stone_game_\xff".to_vec()] };
    let status = get_info(not_utf8.clone()).await;
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::InvalidArgument,
            "the request message does not decode: FlightDescriptor.path: invalid string value: data is not UTF-8 \
             encoded"
        )
    );
    let no_game = "the descriptor's path must name a game: one of sum_game, stone_game_ix, stone_game_iv, \
                   nim_square, mixed";
    for (kind, shown) in [(0, "UNKNOWN (0)"), (7, "7"), (-1, "-1")] {
        let status = get_info(RawDescriptor { r#type: kind, path: vec![b"stone_game_iv".to_vec()] }).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{kind}");
        assert_eq!(status.message(), format!("the descriptor's type is {shown}, not PATH: {no_game}"));
    }
    let long = "x".repeat(100_000);
    let status = get_info(RawDescriptor { r#type: 1, path: vec![long.clone().into_bytes()] }).await;
    assert_eq!(
        status.message(),
        format!(
            "unknown game \"{}…\" in the descriptor: expected one of sum_game, stone_game_ix, stone_game_iv, \
             nim_square, mixed",
            "x".repeat(100)
        )
    );
    // The same in DoExchange: the first message's descriptor.
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/arrow.flight.protocol.FlightService/DoExchange");
    let codec = tonic_prost::ProstCodec::<RawFlightData, FlightData>::default();
    let first = RawFlightData { flight_descriptor: Some(not_utf8) };
    let answers = grpc.streaming(tonic::Request::new(futures::stream::iter([first])), path, codec).await;
    let status = match answers {
        Ok(answers) => answers.into_inner().try_collect::<Vec<_>>().await.unwrap_err(),
        Err(status) => status,
    };
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::InvalidArgument,
            "the request message does not decode: FlightDescriptor.path: FlightData.flight_descriptor: invalid \
             string value: data is not UTF-8 encoded"
        )
    );
    let text = production::scrape(server.metrics_addr()).await;
    let calls = |method: &str, code: &str| flight_calls(&text, method, code);
    assert_eq!(calls("GetFlightInfo", "INVALID_ARGUMENT"), Some(5.0));
    assert_eq!(calls("DoExchange", "INVALID_ARGUMENT"), Some(1.0));
    assert!(!text.contains("code=\"INTERNAL\""), "{text}");
    // A long unknown game in a path DoExchange reads: the trailer stays small.
    let mut client = flight_client(server.channel().await);
    let n = batch(vec![("n", Arc::new(UInt64Array::from(vec![3])) as ArrayRef)]);
    let status = exchange(&mut client, &[&long], vec![n]).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().len() < 400, "{} bytes", status.message().len());
}

/// The Flight messages arrow-ipc's `IpcDataGenerator` makes of `batches`, one stream: the
/// schema first (and again when it changes), then each batch's dictionaries and itself.
fn generated(batches: &[RecordBatch]) -> Vec<FlightData> {
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
    let (generator, options) = (IpcDataGenerator::default(), IpcWriteOptions::default());
    let mut context = IpcWriteContext::default();
    let mut tracker = DictionaryTracker::new(false);
    let mut schema = None;
    let mut messages = Vec::new();
    for batch in batches {
        if schema.as_ref() != Some(batch.schema_ref()) {
            tracker = DictionaryTracker::new(false);
            let encoded =
                generator.schema_to_bytes_with_dictionary_tracker(batch.schema_ref(), &mut tracker, &options);
            messages.push(FlightData::from(encoded));
            schema = Some(batch.schema());
        }
        let (dictionaries, data) = generator.encode(batch, &mut tracker, &options, &mut context).unwrap();
        messages.extend(dictionaries.into_iter().map(FlightData::from));
        messages.push(FlightData::from(data));
    }
    messages
}

/// A batch of one `uint64` column `name` of `rows` rows.
fn column_of(name: &str, rows: u64) -> RecordBatch {
    let column: ArrayRef = Arc::new(UInt64Array::from_iter_values(0..rows));
    RecordBatch::try_from_iter([(name, column)]).unwrap()
}

#[test]
fn the_messages_are_arrows_generators_byte_for_byte_their_bodies_in_the_arrays_own_buffers() {
    let mut dictionary =
        arrow_array::builder::StringDictionaryBuilder::<arrow_array::types::Int32Type>::new();
    dictionary.extend([Some("25??"), None, Some("11")]);
    let with_dictionary = RecordBatch::try_from_iter([
        ("id", Arc::new(dictionary.finish()) as ArrayRef),
        ("n", Arc::new(UInt64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef),
    ])
    .unwrap();
    let nulls = RecordBatch::try_from_iter([
        ("n", Arc::new(UInt64Array::from_iter_values(0..1000)) as ArrayRef),
        ("error", Arc::new(StringArray::new_null(1000)) as ArrayRef),
    ])
    .unwrap();
    let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "bb", "ccc", "dddd"]));
    let sliced = RecordBatch::try_from_iter([("id", ids)]).unwrap().slice(1, 3);
    let sent = [
        column_of("n", 100_000),
        column_of("n", 0),
        nulls.clone(),
        nulls.slice(10, 500),
        with_dictionary.clone(),
        with_dictionary,
        sliced,
        column_of("n", 3),
    ];
    let mut encoder = gamesolver::columnar::BatchEncoder::default();
    let mut messages = Vec::new();
    for batch in &sent {
        messages.extend(encoder.messages(batch).unwrap());
    }
    // The values of the first batch's `n` are sent from where they lie.
    let values = sent[0].column(0).to_data().buffers()[0].clone();
    assert!(messages[1].body.iter().any(|piece| piece.as_ptr() == values.as_ptr()));
    let messages: Vec<FlightData> =
        messages.into_iter().map(gamesolver::columnar::FlightMessage::into_flight_data).collect();
    assert_eq!(messages, generated(&sent));
}

#[tokio::test]
async fn answers_on_the_wire_are_arrows_messages_byte_for_byte_compressed_or_not() {
    use tonic::codec::CompressionEncoding;
    let n = |from: u64| {
        let n = (from..from + 5_000).map(|i| i * 7_919 % 1_000_000);
        Arc::new(UInt64Array::from_iter_values(n)) as ArrayRef
    };
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values((0..5_000).map(|i| format!("row-{i}"))));
    let sent =
        vec![batch(vec![("n", n(0))]), batch(vec![("n", n(5_000))]), batch(vec![("id", ids), ("n", n(9))])];
    for compress_responses in [false, true] {
        let mut config = ServerConfig::default();
        config.http2.compress_responses = compress_responses;
        let server = TestServer::start(config).await;
        for encoding in [CompressionEncoding::Gzip, CompressionEncoding::Zstd] {
            let mut client = FlightServiceClient::new(server.channel().await).accept_compressed(encoding);
            let request = messages_each(&["stone_game_iv"], sent.clone(), None).map(Result::unwrap);
            let response = client.do_exchange(request).await.unwrap();
            let sent_encoding =
                response.metadata().get("grpc-encoding").map(|v| v.to_str().unwrap().to_owned());
            assert_eq!(sent_encoding.is_some(), compress_responses, "{sent_encoding:?}");
            let received: Vec<FlightData> = response.into_inner().try_collect().await.unwrap();
            let answers: Vec<RecordBatch> =
                FlightDataDecoder::new(futures::stream::iter(received.clone()).map(Ok))
                    .try_filter_map(|data| async move {
                        Ok(match data.payload {
                            DecodedPayload::RecordBatch(batch) => Some(batch),
                            _ => None,
                        })
                    })
                    .try_collect()
                    .await
                    .unwrap();
            assert_eq!(answers.len(), 3);
            for (answer, problems) in answers.iter().zip(&sent) {
                let n = problems.column_by_name("n").unwrap().as_primitive::<UInt64Type>();
                let expected = solve_batch(&server, n.values().iter().map(|&n| iv(n)).collect(), false).await;
                assert_eq!(rows(answer), expected);
            }
            assert_eq!(received, generated(&answers));
        }
    }
}
