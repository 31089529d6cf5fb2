//! The codec against prost: every message the fast encoder writes is prost's bytes, and
//! every message the fast decoder takes decodes as prost decodes it.

use proptest::prelude::*;
use prost::bytes::BytesMut;

use super::wire::{LEN_1, LEN_4, VARINT_1, VARINT_2};
use super::*;
use crate::convert;
use crate::games::{GameKind, Input, InputShape, MoveValues};
use pb::problem::Game as G;

const LEN_3: u8 = 3 << 3 | 2;

/// Any input of `shape`.
fn input(shape: InputShape) -> BoxedStrategy<Input> {
    match shape {
        InputShape::Text => ".{0,12}".prop_map(Input::Text).boxed(),
        InputShape::Integer => any::<u64>().prop_map(Input::Integer).boxed(),
        InputShape::Integers => {
            proptest::collection::vec(any::<u64>(), 0..20).prop_map(Input::Integers).boxed()
        }
    }
}

/// Any game's problem, or none.
fn game() -> impl Strategy<Value = Option<G>> {
    let game = proptest::sample::select(GameKind::ALL.to_vec()).prop_flat_map(|kind| {
        input(kind.input_shape()).prop_map(move |input| G::from(kind.with_input(input).expect("its shape")))
    });
    proptest::option::weighted(0.8, game)
}

fn problem() -> impl Strategy<Value = pb::Problem> {
    (".{0,8}", game()).prop_map(|(id, game)| pb::Problem { id, game })
}

/// Any game's move with any values (a `uint32` field's kept to its low 32 bits), a
/// move without a game, or none.
fn winning_move() -> impl Strategy<Value = Option<pb::Move>> {
    let values = any::<MoveValues>();
    let game = (proptest::sample::select(GameKind::ALL.to_vec()), values).prop_map(|(kind, mut values)| {
        values[kind.move_fields().len()..].fill(0);
        convert::wire_move(kind, values)
    });
    proptest::option::of(proptest::option::weighted(0.8, game).prop_map(|game| pb::Move { game }))
}

fn error() -> impl Strategy<Value = Option<Box<pb::SolutionError>>> {
    proptest::option::of(
        (any::<i32>(), ".{0,8}", proptest::collection::btree_map(".{0,4}", ".{0,4}", 0..3)).prop_map(
            |(code, message, metadata)| {
                Box::new(pb::SolutionError { code, message, metadata, ..Default::default() })
            },
        ),
    )
}

fn solution() -> impl Strategy<Value = pb::Solution> {
    (".{0,8}", any::<bool>(), any::<i32>(), winning_move(), error(), proptest::option::of(any::<u32>()))
        .prop_map(|(id, alice_wins, winner, winning_move, error, nim_value)| pb::Solution {
            id,
            alice_wins,
            winner,
            winning_move,
            error,
            nim_value,
        })
}

/// `bytes` decoded both ways: when the fast decoder answers, prost must agree.
fn check<M: FastDecode + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let fast = M::decode_fast(bytes);
    if let Some(fast) = &fast {
        assert_eq!(&M::decode(bytes).expect("prost decodes what the fast decoder does"), fast);
    }
    fast
}

/// `bytes` as each request, decoded both ways; what prost decodes holds at most what
/// [`decoded_request_bytes`] says, and exactly that when the fast decoder takes it.
fn check_requests(bytes: &[u8]) {
    let counted =
        |problems: &[pb::Problem]| problems.iter().map(crate::convert::problem_bytes).sum::<usize>();
    let fast = check::<pb::SolveBatchStreamRequest>(bytes);
    if let Ok(decoded) = pb::SolveBatchStreamRequest::decode(bytes) {
        let counted = counted(&decoded.problems);
        match fast {
            Some(_) => assert_eq!(decoded_request_bytes(bytes, false), counted),
            None => assert!(decoded_request_bytes(bytes, false) >= counted),
        }
    }
    let fast = check::<pb::SolveRequest>(bytes);
    check::<pb::SolveStreamRequest>(bytes);
    if let Ok(decoded) = pb::SolveRequest::decode(bytes) {
        let counted = counted(decoded.problem.as_slice());
        match fast {
            Some(_) => assert_eq!(decoded_request_bytes(bytes, true), counted),
            None => assert!(decoded_request_bytes(bytes, true) >= counted),
        }
    }
}

#[test]
fn a_stone_or_a_pile_is_charged_8_bytes_decoded_whatever_its_wire_size() {
    let problem = |game| pb::Problem { id: "s".into(), game: Some(game) };
    let base = std::mem::size_of::<pb::Problem>() + 1;
    for stones in [vec![1; 1000], vec![u64::MAX; 1000]] {
        let ix = problem(G::StoneGameIx(pb::StoneGameIx { stones: stones.clone() }));
        let nim = problem(G::NimSquare(pb::NimSquare { piles: stones }));
        for problem in [ix, nim] {
            let bytes = pb::SolveRequest { problem: Some(problem), winner_only: false }.encode_to_vec();
            assert_eq!(decoded_request_bytes(&bytes, true), base + 8000);
            // Two problems in a one-problem request: prost merges them, growing the
            // vectors by doubling, which count twice.
            let twice = [bytes.clone(), bytes].concat();
            assert_eq!(decoded_request_bytes(&twice, true), 2 + 2 * 2 * (base - 1 + 8000));
            assert_eq!(decoded_request_bytes(&twice, false), 2 * (base + 8000));
        }
    }
    // Unpacked stones, which prost takes and grows: twice.
    let unpacked = [LEN_1, 9, LEN_1, 1, b's', LEN_3, 4, VARINT_1, 7, VARINT_1, 9];
    assert_eq!(decoded_request_bytes(&unpacked, false), 1 + 2 * (base - 1 + 16));
}

proptest! {
    #[test]
    fn requests_prost_writes_decode_fast_and_alike(
        problems in proptest::collection::vec(problem(), 0..20),
        winner_only: bool,
    ) {
        let request = pb::SolveBatchStreamRequest { problems: problems.clone(), winner_only };
        let bytes = request.encode_to_vec();
        prop_assert_eq!(check::<pb::SolveBatchStreamRequest>(&bytes), Some(request));
        let request = pb::SolveBatchRequest { problems: problems.clone(), winner_only };
        prop_assert_eq!(check::<pb::SolveBatchRequest>(&bytes), Some(request));
        // What they decode to, read from the wire: what a stream's admission counts.
        let counted: usize = problems.iter().map(crate::convert::problem_bytes).sum();
        prop_assert_eq!(decoded_request_bytes(&bytes, false), counted);
        let problem = problems.into_iter().next();
        let request = pb::SolveRequest { problem: problem.clone(), winner_only };
        let bytes = request.encode_to_vec();
        prop_assert_eq!(check::<pb::SolveRequest>(&bytes), Some(request));
        let request = pb::SolveStreamRequest { problem: problem.clone(), winner_only };
        prop_assert_eq!(check::<pb::SolveStreamRequest>(&bytes), Some(request));
        prop_assert_eq!(decoded_request_bytes(&bytes, true), problem.as_ref().map_or(0, crate::convert::problem_bytes));
    }

    #[test]
    fn responses_prost_writes_decode_fast_and_alike(solutions in proptest::collection::vec(solution(), 0..20)) {
        let response = pb::SolveBatchStreamResponse { solutions: solutions.clone() };
        let bytes = response.encode_to_vec();
        prop_assert_eq!(check::<pb::SolveBatchStreamResponse>(&bytes), Some(response));
        prop_assert_eq!(check::<pb::SolveBatchResponse>(&bytes), Some(pb::SolveBatchResponse { solutions }));
    }

    #[test]
    fn damaged_messages_decode_as_prost_decodes_them(
        problems in proptest::collection::vec(problem(), 1..6),
        solutions in proptest::collection::vec(solution(), 1..6),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        for mut bytes in [
            pb::SolveBatchStreamRequest { problems, winner_only: true }.encode_to_vec(),
            pb::SolveBatchStreamResponse { solutions }.encode_to_vec(),
        ] {
            for (at, byte) in &edits {
                let at = at.index(bytes.len());
                bytes[at] = *byte;
            }
            check_requests(&bytes);
            check::<pb::SolveBatchStreamResponse>(&bytes);
            let cut = &bytes[..cut.index(bytes.len())];
            check_requests(cut);
            check::<pb::SolveBatchStreamResponse>(cut);
        }
    }

    #[test]
    fn any_bytes_decode_as_prost_decodes_them(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        check_requests(&bytes);
        check::<pb::SolveBatchStreamResponse>(&bytes);
    }
}

proptest! {
    #[test]
    fn problems_are_encoded_as_prost_encodes_them(problems in proptest::collection::vec(problem(), 0..20)) {
        let mut out = BytesMut::new();
        for problem in &problems {
            encode_problem_element(problem, &mut out);
        }
        let expected = pb::SolveBatchStreamRequest { problems, winner_only: false }.encode_to_vec();
        prop_assert_eq!(out.as_ref(), expected.as_slice());
    }
}

proptest! {
    #[test]
    fn solutions_are_encoded_as_prost_encodes_them(solutions in proptest::collection::vec(solution(), 0..20)) {
        let response = pb::SolveBatchStreamResponse { solutions };
        let mut out = vec![7];
        prop_assert!(response.encode_fast(&mut out));
        let expected = response.encode_to_vec();
        prop_assert_eq!(&out[1..], expected.as_slice());
    }
}

#[test]
fn defaults_are_left_out_as_prost_leaves_them_out() {
    let problems = [
        pb::Problem::default(),
        pb::Problem { id: String::new(), game: Some(G::SumGame(pb::SumGame::default())) },
        pb::Problem { id: "a".into(), game: Some(G::StoneGameIx(pb::StoneGameIx::default())) },
        pb::Problem { id: "b".into(), game: Some(G::StoneGameIv(pb::StoneGameIv { n: 0 })) },
        pb::Problem {
            id: "c".into(),
            game: Some(G::StoneGameIx(pb::StoneGameIx { stones: vec![0, u64::MAX] })),
        },
    ];
    for problem in problems {
        let mut out = BytesMut::new();
        encode_problem_element(&problem, &mut out);
        let expected =
            pb::SolveBatchStreamRequest { problems: vec![problem], winner_only: false }.encode_to_vec();
        assert_eq!(out.as_ref(), expected.as_slice());
    }
}

#[test]
fn what_prost_must_decide_is_left_to_it() {
    let decodes_fast = |bytes: &[u8]| pb::SolveBatchStreamRequest::decode_fast(bytes).is_some();
    // An unknown field, skipped by prost.
    assert!(!decodes_fast(&[0x18, 1]));
    // A game given twice: prost merges the second into the first.
    assert!(!decodes_fast(&[LEN_1, 8, LEN_3, 2, LEN_1, 0, LEN_3, 2, LEN_1, 0]));
    // Unpacked stones, which prost takes too.
    assert!(!decodes_fast(&[LEN_1, 4, LEN_3, 2, VARINT_1, 7]));
    // An 11-byte varint and a tenth byte above 1, which prost refuses.
    assert!(!decodes_fast(&[VARINT_2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0]));
    assert!(!decodes_fast(&[VARINT_2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 2]));
    // A length past the end, and an id that is not UTF-8.
    assert!(!decodes_fast(&[LEN_1, 9, LEN_1, 0]));
    assert!(!decodes_fast(&[LEN_1, 3, LEN_1, 1, 0xff]));
    // What every library writes, with the tenth varint byte at its largest.
    assert!(decodes_fast(&[VARINT_2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]));
    assert!(decodes_fast(&[LEN_1, 5, LEN_1, 1, b'a', LEN_4, 0]));
    assert!(decodes_fast(&[LEN_1, 7, LEN_1, 1, b'a', LEN_4, 2, VARINT_1, 5]));
}

#[test]
fn a_message_left_to_prost_is_not_consumed() {
    let mut buf: &[u8] = &[0x18, 1, VARINT_2, 1];
    assert_eq!(take_fast::<pb::SolveBatchStreamRequest>(&mut buf), None);
    assert_eq!(buf.len(), 4);
    let mut buf: &[u8] = &[VARINT_2, 1];
    let request = take_fast::<pb::SolveBatchStreamRequest>(&mut buf);
    assert_eq!(request, Some(pb::SolveBatchStreamRequest { problems: vec![], winner_only: true }));
    assert!(buf.is_empty());
}
