//! Every game through every fact of the registry.

use super::*;
use proptest::prelude::*;

/// One of every game, drawn by its own generator within its default sizes.
fn one_of_each() -> Vec<Game> {
    let mut rng = rand::rng();
    let sizes = |kind: GameKind| -> Vec<_> {
        kind.sizes().iter().map(|size| size.default.0.max(1)..=size.default.1.max(1)).collect()
    };
    GameKind::ALL.into_iter().map(|kind| kind.random(&mut rng, &sizes(kind))).collect()
}

/// What no two games may share, each name with the game that declares it.
fn declared_names() -> Vec<(&'static str, String, GameKind)> {
    let mut names = Vec::new();
    for kind in GameKind::ALL {
        let mut name = |what: &'static str, value: String| names.push((what, value, kind));
        name("label", kind.label().into());
        name("name", kind.name().into());
        name("JSON field", kind.json_field().into());
        name("input path", kind.input_path().into());
        // An input column may be named as no other game's input nor any move's column.
        name("column", kind.input().into());
        name("gen --mix key", kind.mix_key().into());
        kind.sizes().iter().for_each(|size| name("gen flag", format!("--{}", size.flag)));
        if let Some(table) = kind.table() {
            name("table name", table.name.into());
        }
        let mut shape: Vec<_> = kind.move_fields().iter().map(|field| field.name()).collect();
        shape.sort();
        name("move shape", format!("{{{}}}", shape.join(", ")));
    }
    names
}

/// No two games share a name, an input column, a move shape, a `gen` key or flag, or a
/// table name: the first two games found sharing one are named, with what they share.
#[test]
fn no_two_games_share_a_name_a_column_a_move_shape_or_a_flag() {
    let mut seen: std::collections::HashMap<(&str, String), GameKind> = Default::default();
    for (what, value, kind) in declared_names() {
        assert!(!value.is_empty(), "{} declares an empty {what}", kind.label());
        if let Some(other) = seen.insert((what, value.clone()), kind) {
            panic!("{} and {} both declare the {what} {value:?}", other.label(), kind.label());
        }
    }
    let mut columns: std::collections::HashMap<&str, MoveField> = Default::default();
    for kind in GameKind::ALL {
        let fields = kind.move_fields();
        assert!(!fields.is_empty() && fields.len() <= MOST_MOVE_FIELDS, "{}: {fields:?}", kind.label());
        for field in fields {
            assert_eq!(field.column(), format!("move_{}", field.name()), "{}", kind.label());
            let owner = columns.entry(field.name()).or_insert(*field);
            assert_eq!(owner, field, "{} declares the move field {} anew", kind.label(), field.name());
            if let Some(&(_, _, other)) =
                declared_names().iter().find(|(what, value, _)| *what == "column" && value == field.column())
            {
                panic!("{} and {} both declare the column {:?}", other.label(), kind.label(), field.column());
            }
        }
    }
    assert_eq!(MoveField::ALL.len(), columns.len());
    for kind in GameKind::ALL {
        assert_eq!(kind.input_path(), format!("problem.{}.{}", kind.label(), kind.input()));
        assert_eq!(GameKind::from_label(kind.label()), Some(kind));
    }
    assert_eq!(GameKind::from_label("chess"), None);
}

/// Every game takes an input of its own shape, and only of that shape.
#[test]
fn every_game_is_made_from_an_input_of_its_shape() {
    let inputs = [Input::Text("25??".into()), Input::Integer(7), Input::Integers(vec![1, 2])];
    for kind in GameKind::ALL {
        for input in inputs.clone() {
            let shape = input.shape();
            let game = kind.with_input(input);
            assert_eq!(game.is_some(), shape == kind.input_shape(), "{kind:?} from {shape:?}");
            assert!(game.is_none_or(|game| game.kind() == kind), "{kind:?}");
        }
    }
}

/// Every game's place in [`GameKind::ALL`] is its index; every game's input is of its
/// shape and makes the same game again.
#[test]
fn every_game_has_its_place_and_its_input() {
    let games = one_of_each();
    assert_eq!(games.iter().map(Game::kind).collect::<Vec<_>>(), GameKind::ALL);
    for (at, game) in games.iter().enumerate() {
        let kind = game.kind();
        assert_eq!(kind.index(), at);
        let input = game.input().to_owned();
        assert_eq!(input.shape(), kind.input_shape());
        assert_eq!(kind.with_input(input).as_ref(), Some(game));
        assert_eq!(game.borrowed().to_owned(), *game);
    }
    let with_values: Vec<_> = GameKind::ALL.into_iter().filter(|kind| kind.has_nim_value()).collect();
    assert_eq!(with_values, [GameKind::NimSquare]);
}

/// Every game with table facts has a table in [`Tables`] and no other does, each
/// answering its own game up to its default limit.
#[test]
fn every_table_game_has_its_table_and_its_facts() {
    let tables = Tables::default();
    let with_tables: Vec<_> = tables.each().iter().map(|table| table.game()).collect();
    let with_facts: Vec<_> = GameKind::ALL.into_iter().filter(|kind| kind.table().is_some()).collect();
    assert_eq!(with_tables, with_facts);
    let names: std::collections::HashSet<_> =
        with_facts.iter().map(|kind| kind.table().unwrap().name).collect();
    assert_eq!(names.len(), with_facts.len(), "two tables share a name");
    for table in tables.each() {
        let facts = table.game().table().unwrap();
        assert_eq!(table.limit(), facts.default_limit);
        assert!(facts.default_limit <= facts.max_limit);
        assert_eq!(table.game().limit_flag(), Some(format!("--{}-max-n", facts.name)));
        let beyond = SolveError::OutOfRange {
            game: table.game(),
            n: facts.default_limit + 1,
            limit: facts.default_limit,
        };
        assert_eq!(table.extend_to(facts.default_limit + 1), Err(beyond));
    }
}

#[test]
fn a_pile_beyond_the_limit_names_the_flag_that_raises_it() {
    let out_of_range = |game, n, limit| SolveError::OutOfRange { game, n, limit }.to_string();
    assert_eq!(
        out_of_range(GameKind::StoneGameIv, 1_000_000_000_000, 1_000_000_000),
        "stone game iv: n = 1000000000000 is beyond the limit 1000000000 of this server \
         (raise it with --iv-max-n, at most 100000000000)"
    );
    assert_eq!(
        out_of_range(GameKind::StoneGameIv, 1_000_000_000_000, 100_000_000_000),
        "stone game iv: n = 1000000000000 is beyond the limit 100000000000 of this server \
         (already the most --iv-max-n allows)"
    );
    assert_eq!(
        out_of_range(GameKind::NimSquare, 1001, 1000),
        "nim square: n = 1001 is beyond the limit 1000 of this server \
         (raise it with --grundy-max-n, at most 4294967295)"
    );
    let table_games: Vec<_> = GameKind::ALL.into_iter().filter(|game| game.limit_flag().is_some()).collect();
    assert_eq!(table_games, [GameKind::StoneGameIv, GameKind::NimSquare]);
}

proptest! {
    /// Any string at all gets an answer or an error that points at the offending
    /// character; nothing panics.
    #[test]
    fn any_sum_game_string_is_answered_or_located(num in "\\PC{0,40}|[0-9?]{0,40}|[0-9?x]{0,40}") {
        let table = Tables::new(100, 100);
        match Game::SumGame(num.clone()).solve(&table) {
            Ok(_) => prop_assert!(num.len() % 2 == 0 && num.bytes().all(|b| b.is_ascii_digit() || b == b'?')),
            Err(SolveError::InvalidCharacter { index, found }) => {
                let index = index as usize;
                prop_assert!(num.is_char_boundary(index));
                prop_assert_eq!(num[index..].chars().next(), Some(found));
                prop_assert!(num[..index].bytes().all(|b| b.is_ascii_digit() || b == b'?'));
            }
            Err(SolveError::OddLength { len }) => prop_assert_eq!(len as usize, num.len()),
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    #[test]
    fn stone_game_iv_beyond_the_limit_is_out_of_range(n in 101u64..) {
        let table = Tables::new(100, 100);
        prop_assert_eq!(Game::StoneGameIv(n).solve(&table), Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: 100 }));
        prop_assert_eq!(Game::StoneGameIv(n).winner(&table), Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: 100 }));
    }

    /// The winner alone agrees with the exhaustive search, for every game.
    #[test]
    fn winner_matches_exhaustive_search(
        sum in "([0-9?]{2}){0,4}",
        ix in proptest::collection::vec(0u64..10, 0..7),
        iv in 0u64..2000,
    ) {
        let table = Tables::new(2000, 100);
        let alice = |game: Game| game.winner(&table).unwrap().winner == Player::Alice;
        prop_assert_eq!(alice(Game::SumGame(sum.clone())), exhaustive::sum_game_alice_wins(sum.as_bytes(), true));
        prop_assert_eq!(alice(Game::StoneGameIx(ix.clone())), exhaustive::stone_game_ix_alice_wins(&ix, 0, true));
        prop_assert_eq!(alice(Game::StoneGameIv(iv)), exhaustive::stone_game_iv_mover_wins(iv));
    }
}

/// The lists of games outside the crate follow the registry: the Python helper reads its
/// games from the generated stubs (made from the proto, as `pb` is), which name every
/// game; the README's table names every game.
#[test]
fn the_lists_of_games_outside_the_crate_are_the_registrys() {
    let read =
        |path: &str| std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let flight = read("clients/python/src/gamesolver_client/flight.py");
    let derived = "GAMES = tuple(field.name for field in gamesolver_pb2.Problem.DESCRIPTOR.oneofs_by_name[\"game\"].fields)";
    assert!(flight.contains(derived), "flight.py's GAMES is not read from the stubs");
    // The stubs' type hints list a message's fields; they and the stubs are made together.
    let hints = read("clients/python/src/gamesolver/v1/gamesolver_pb2.pyi");
    let labels: Vec<_> = GameKind::ALL.iter().map(|kind| format!("{:?}", kind.label())).collect();
    let slots = format!("class Problem(_message.Message):\n    __slots__ = (\"id\", {})", labels.join(", "));
    assert!(hints.contains(&slots), "the Python stubs' games are not the registry's: run .ci/generate.sh");
    let readme = read("README.md");
    for kind in GameKind::ALL {
        assert!(
            readme.contains(&format!("| **{}**", kind.title())),
            "README.md's table of games lacks {}",
            kind.title()
        );
    }
}
