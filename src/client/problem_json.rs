//! One input line → one `Problem`, through the generated protobuf JSON mapping.
//!
//! The fast path is serde_json straight into `pb::Problem`. Only a line that fails is
//! read a second time, with serde_path_to_error, so that its message names the field to
//! blame (`stoneGameIv.n: -5 is not a uint64`) without good lines paying for the path.

use crate::client::batch::LineError;
use crate::convert::ProblemError;
use crate::pb;

/// Parses one input line into a problem, giving it its line number as id when it has none.
pub fn parse_problem(line: &[u8], number: u64) -> Result<pb::Problem, (String, LineError)> {
    let line = strip_bom(line, number);
    match serde_json::from_slice::<pb::Problem>(line) {
        Ok(mut problem) => {
            if problem.id.is_empty() {
                problem.id = number.to_string();
            }
            if problem.game.is_none() {
                let err = LineError::Problem { line: number, source: ProblemError::MissingGame };
                return Err((problem.id, err));
            }
            Ok(problem)
        }
        Err(err) => {
            let reason = json_reason(line).unwrap_or_else(|| column_reason(&err));
            Err((id_of_bad_line(line, number), LineError::Json { line: number, reason }))
        }
    }
}

/// Why `line` is not a problem, with the path of the field to blame in front when the
/// fault is inside one; `None` if it parses after all.
fn json_reason(line: &[u8]) -> Option<String> {
    let mut deserializer = serde_json::Deserializer::from_slice(line);
    let err = match serde_path_to_error::deserialize::<_, pb::Problem>(&mut deserializer) {
        // The problem parses: only what follows it can be wrong.
        Ok(_) => return deserializer.end().err().map(|err| column_reason(&err)),
        Err(err) => err,
    };
    let path = err.path().to_string();
    let reason = column_reason(err.inner());
    // The path of an unknown field ends in that field, which the message names already.
    let path = match reason.starts_with("unknown field") {
        true => path.rsplit_once('.').map_or(".", |(parent, _)| parent),
        false => &path,
    };
    // The root's path is ".".
    Some(match path {
        "." | "" => reason,
        _ => format!("{path}: {reason}"),
    })
}

/// serde_json's message, with its position given as a column: each line is its own
/// document, so its "line 1" would only contradict the real line number.
fn column_reason(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&position) {
        Some(reason) if err.line() == 1 => format!("{reason} at column {}", err.column()),
        _ => text,
    }
}

/// A UTF-8 byte order mark is only meaningful at the start of the file.
fn strip_bom(line: &[u8], number: u64) -> &[u8] {
    match line.strip_prefix(b"\xef\xbb\xbf".as_slice()) {
        Some(rest) if number == 1 => rest,
        _ => line,
    }
}

/// The id a bad line gets: its own `id` when the line is a JSON object with one, else its
/// line number.
fn id_of_bad_line(line: &[u8], number: u64) -> String {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: Option<String>,
    }
    serde_json::from_slice::<IdOnly>(line)
        .ok()
        .and_then(|p| p.id)
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| number.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(line: &str) -> String {
        match parse_problem(line.as_bytes(), 9) {
            Err((_, LineError::Json { reason, .. })) => reason,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn both_field_spellings_parse_and_missing_ids_become_line_numbers() {
        let camel = parse_problem(br#"{"id":"a1","sumGame":{"num":"?3"}}"#, 1).unwrap();
        let snake = parse_problem(br#"{"id":"a1","sum_game":{"num":"?3"}}"#, 1).unwrap();
        assert_eq!(camel, snake);
        let anonymous = parse_problem(br#"{"stoneGameIx":{"stones":[1,"2"]}}"#, 7).unwrap();
        assert_eq!(anonymous.id, "7");
        assert_eq!(
            anonymous.game,
            Some(pb::problem::Game::StoneGameIx(pb::StoneGameIx { stones: vec![1, 2] }))
        );
    }

    #[test]
    fn numbers_may_be_strings_and_have_an_exponent() {
        let iv = |line: &str| match parse_problem(line.as_bytes(), 1).unwrap().game {
            Some(pb::problem::Game::StoneGameIv(g)) => g.n,
            other => panic!("{other:?}"),
        };
        assert_eq!(iv(r#"{"stoneGameIv":{"n":1e3}}"#), 1000);
        assert_eq!(iv(r#"{"stone_game_iv":{"n":"1e3"}}"#), 1000);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":1000.0}}"#), 1000);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":"18446744073709551615"}}"#), u64::MAX);
        let ix = parse_problem(br#"{"stoneGameIx":{"stones":[2E1,"3",4]}}"#, 1).unwrap();
        assert_eq!(ix.game, Some(pb::problem::Game::StoneGameIx(pb::StoneGameIx { stones: vec![20, 3, 4] })));
    }

    #[test]
    fn a_bad_number_names_its_field_its_value_and_its_type() {
        assert_eq!(reason(r#"{"stoneGameIv":{"n":-5}}"#), "stoneGameIv.n: -5 is not a uint64 at column 22");
        assert_eq!(
            reason(r#"{"stone_game_iv":{"n":"x"}}"#),
            r#"stone_game_iv.n: "x" is not a uint64 at column 25"#
        );
        assert_eq!(reason(r#"{"stoneGameIv":{"n":2.5}}"#), "stoneGameIv.n: 2.5 is not a uint64 at column 23");
        assert_eq!(
            reason(r#"{"stoneGameIx":{"stones":[1,2,-3]}}"#),
            "stoneGameIx.stones[2]: -3 is not a uint64 at column 32"
        );
    }

    #[test]
    fn two_games_on_one_line_are_more_than_one_game() {
        assert_eq!(
            reason(r#"{"sumGame":{"num":"11"},"stoneGameIv":{"n":1}}"#),
            "more than one game: stoneGameIv is the second at column 37"
        );
        assert_eq!(
            reason(r#"{"stone_game_iv":{"n":1},"stone_game_iv":{"n":2}}"#),
            "more than one game: stoneGameIv is the second at column 40"
        );
    }

    #[test]
    fn bad_lines_keep_their_id_when_they_have_one() {
        let (id, err) = parse_problem(br#"{"id":"x","sumGame":{"num":"1"},"extra":1}"#, 3).unwrap_err();
        assert_eq!(id, "x");
        assert!(matches!(err, LineError::Json { line: 3, .. }));
        let (id, err) = parse_problem(b"not json", 4).unwrap_err();
        assert_eq!(id, "4");
        assert_eq!(err.to_string(), "line 4: not a problem: expected ident at column 2");
        let (id, err) = parse_problem(br#"{"id":"g"}"#, 5).unwrap_err();
        assert_eq!(id, "g");
        let wire = pb::SolutionError::from(err);
        assert_eq!(wire.code, pb::solution_error::Code::InvalidArgument as i32);
        assert_eq!((wire.reason.as_str(), wire.field.as_str()), ("NO_GAME", "problem.game"));
        assert_eq!(wire.metadata["line"], "5");
        let (_, err) = parse_problem(b"{", 6).unwrap_err();
        assert_eq!(pb::SolutionError::from(err).reason, "INVALID_JSON");
        assert_eq!(reason("{\"id\":\"a\"} x"), "trailing characters at column 12");
        assert_eq!(
            reason(r#"{"stoneGameIv":{"m":1}}"#),
            "stoneGameIv: unknown field `m`, expected `n` at column 19"
        );
        assert!(reason(r#"{"extra":1}"#).starts_with("unknown field `extra`, expected one of `id`"));
    }
}
