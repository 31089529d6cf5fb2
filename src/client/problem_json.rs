//! One input line → one `Problem`, through the generated protobuf JSON mapping.
//!
//! The fast path is serde_json straight into `pb::Problem`. Only a line that fails is
//! read a second time, with serde_path_to_error, so that its message names the field to
//! blame (`stoneGameIv.n: -5 is not a uint64`) without good lines paying for the path.

use std::collections::BTreeMap;

use tonic::Code;

use crate::convert;
use crate::echo;
use crate::pb;
use crate::problem::ProblemError;

/// The error reason of a line (or CSV record) longer than the client's message limit.
pub const LINE_TOO_LONG: &str = "LINE_TOO_LONG";

/// Why one input line is not a problem; it becomes that line's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not JSON, or not a `Problem` in the protobuf JSON mapping.
    #[error("line {line}: not a problem: {reason}")]
    Json {
        /// 1-based line number.
        line: u64,
        /// What the JSON parser said.
        reason: String,
    },
    /// Longer than the largest message the client sends.
    #[error("line {line}: {len} bytes is more than the limit of {limit} bytes")]
    TooLong {
        /// 1-based line number.
        line: u64,
        /// The line's length.
        len: u64,
        /// The limit (`--max-message-bytes`).
        limit: usize,
    },
    /// A CSV record longer than the largest message the client sends.
    #[error("row {row}: {len} bytes is more than the limit of {limit} bytes")]
    RowTooLong {
        /// The row's index among the data rows, from 0.
        row: u64,
        /// The record's length.
        len: u64,
        /// The limit (`--max-message-bytes`).
        limit: usize,
    },
    /// Valid JSON, but no game set.
    #[error("line {line}: {source}")]
    Problem {
        /// 1-based line number.
        line: u64,
        /// The same error the server would give.
        source: ProblemError,
    },
}

impl From<LineError> for pb::SolutionError {
    fn from(err: LineError) -> Self {
        let (reason, mut metadata) = match &err {
            LineError::Problem { source, .. } => (source.reason(), source.metadata()),
            LineError::Json { .. } => (convert::INVALID_JSON, BTreeMap::new()),
            LineError::TooLong { len, limit, .. } | LineError::RowTooLong { len, limit, .. } => (
                LINE_TOO_LONG,
                BTreeMap::from([
                    ("length".to_owned(), len.to_string()),
                    ("limit".to_owned(), limit.to_string()),
                ]),
            ),
        };
        match &err {
            LineError::Problem { line, .. }
            | LineError::Json { line, .. }
            | LineError::TooLong { line, .. } => metadata.insert("line".to_owned(), line.to_string()),
            LineError::RowTooLong { row, .. } => metadata.insert("row".to_owned(), row.to_string()),
        };
        let field = match &err {
            LineError::Problem { source, .. } => source.field(),
            LineError::Json { .. } | LineError::TooLong { .. } | LineError::RowTooLong { .. } => None,
        };
        convert::wire_error(Code::InvalidArgument, reason, field, metadata, err.to_string())
    }
}

/// The solution that stands for a line which is not a problem.
pub fn line_error_solution(id: String, err: LineError) -> pb::Solution {
    pb::Solution { id, error: Some(Box::new(err.into())), ..Default::default() }
}

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
            let reason = json_reason(line).unwrap_or_else(|| describe(&err));
            Err((id_of_bad_line(line, number), LineError::Json { line: number, reason }))
        }
    }
}

/// Why `line` is not a problem, with the path of the field to blame in front when the
/// fault is inside one; `None` if it parses after all.
fn json_reason(line: &[u8]) -> Option<String> {
    if let Some(reason) = not_an_object(line) {
        return Some(reason);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(line);
    let err = match serde_path_to_error::deserialize::<_, pb::Problem>(&mut deserializer) {
        // The problem parses: only what follows it can be wrong.
        Ok(_) => return deserializer.end().err().map(|err| describe(&err)),
        Err(err) => err,
    };
    let reason = describe(err.inner());
    if err.inner().is_eof() {
        // Where a cut-off line stops says nothing about what was cut.
        return Some(reason);
    }
    let path = err.path().to_string();
    // The path of an unknown field ends in that field, which the message names already.
    let path = match reason.starts_with("unknown field") {
        true => path.rsplit_once('.').map_or(".", |(parent, _)| parent),
        false => &path,
    };
    // `?` stands for a place the parser had not named yet (a key being read): the path
    // up to it is what helps.
    let path = path.split_once(".?").map_or(path, |(known, _)| known);
    // The root's path is ".".
    Some(match path {
        "." | "" => reason,
        _ => format!("{path}: {reason}"),
    })
}

/// What to say of a line that does not even start as a JSON object: serde's words
/// (`expected ident`, `expected value`) speak of its own parser, not of the line.
fn not_an_object(line: &[u8]) -> Option<String> {
    let text = line.trim_ascii_start();
    if text.first() == Some(&b'{') {
        return None;
    }
    let all = String::from_utf8_lossy(text);
    Some(format!(
        "expected a JSON object such as {{\"stoneGameIv\":{{\"n\":5}}}}, found {}",
        echo::quoted(&all)
    ))
}

/// serde_json's message for a line, in the line's own terms: a cut-off line is called
/// so, and the position is a column (each line is its own document, so serde's "line 1"
/// would only contradict the real line number). A number is quoted as the line wrote it
/// by the integer reader itself (`json_number`).
fn describe(err: &serde_json::Error) -> String {
    if err.is_eof() {
        return "unexpected end of the line (truncated JSON?)".to_owned();
    }
    let text = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&position) {
        Some(reason) if err.line() == 1 => format!("{} at column {}", echo::message(reason), err.column()),
        _ => echo::message(&text).into_owned(),
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

    /// The pile of a line that is a Stone Game IV problem.
    fn iv(line: &str) -> u64 {
        match parse_problem(line.as_bytes(), 1).unwrap().game {
            Some(pb::problem::Game::StoneGameIv(g)) => g.n,
            other => panic!("{other:?}"),
        }
    }

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
        assert_eq!(iv(r#"{"stoneGameIv":{"n":1e3}}"#), 1000);
        assert_eq!(iv(r#"{"stone_game_iv":{"n":"1e3"}}"#), 1000);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":1000.0}}"#), 1000);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":"18446744073709551615"}}"#), u64::MAX);
        let ix = parse_problem(br#"{"stoneGameIx":{"stones":[2E1,"3",4]}}"#, 1).unwrap();
        assert_eq!(ix.game, Some(pb::problem::Game::StoneGameIx(pb::StoneGameIx { stones: vec![20, 3, 4] })));
    }

    #[test]
    fn a_bad_number_names_its_field_its_value_and_its_type() {
        assert_eq!(reason(r#"{"stoneGameIv":{"n":-5}}"#), "stoneGameIv.n: -5 is not a uint64 at column 23");
        assert_eq!(
            reason(r#"{"stone_game_iv":{"n":"x"}}"#),
            r#"stone_game_iv.n: "x" is not a uint64 at column 26"#
        );
        assert_eq!(
            reason(r#"{"stoneGameIv":{"n":2.5}}"#),
            "stoneGameIv.n: 2.5 is not a uint64: not a whole number at column 24"
        );
        assert_eq!(
            reason(r#"{"stoneGameIx":{"stones":[1,2,-3]}}"#),
            "stoneGameIx.stones[2]: -3 is not a uint64 at column 33"
        );
    }

    #[test]
    fn a_number_is_quoted_as_the_line_wrote_it() {
        assert_eq!(
            reason(r#"{"stoneGameIv":{"n":18446744073709551616}}"#),
            "stoneGameIv.n: 18446744073709551616 is not a uint64 at column 41"
        );
        assert_eq!(
            reason(r#"{"stoneGameIx":{"stones":[1,-1e30]}}"#),
            "stoneGameIx.stones[1]: -1e30 is not a uint64 at column 34"
        );
        assert_eq!(
            reason(r#"{"stoneGameIv":{"n":1e20}}"#),
            "stoneGameIv.n: 1e20 is not a uint64 at column 25"
        );
    }

    #[test]
    fn an_integer_is_taken_only_when_its_digits_are_exactly_one() {
        assert_eq!(iv(r#"{"stoneGameIv":{"n":7.0}}"#), 7);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":100.000}}"#), 100);
        assert_eq!(iv(r#"{"stoneGameIv":{"n":1e19}}"#), 10_000_000_000_000_000_000);
        assert_eq!(
            reason(r#"{"stoneGameIv":{"n":99.99999999999999999}}"#),
            "stoneGameIv.n: 99.99999999999999999 is not a uint64: not a whole number at column 41"
        );
        assert_eq!(
            reason(r#"{"stoneGameIv":{"n":1e-400}}"#),
            "stoneGameIv.n: 1e-400 is not a uint64: not a whole number at column 27"
        );
        assert_eq!(
            reason(r#"{"stoneGameIx":{"stones":[1,"1.5",2]}}"#),
            r#"stoneGameIx.stones[1]: "1.5" is not a uint64: not a whole number at column 34"#
        );
        let (id, err) = parse_problem(br#"{"id":"p","stoneGameIv":{"n":1e-400}}"#, 4).unwrap_err();
        assert_eq!(id, "p");
        assert_eq!(
            err.to_string(),
            "line 4: not a problem: stoneGameIv.n: 1e-400 is not a uint64: not a whole number at column 36"
        );
        assert_eq!(pb::SolutionError::from(err).reason, "INVALID_JSON");
    }

    #[test]
    fn a_long_value_in_a_message_is_cut() {
        let field = "x".repeat(100_000);
        let line = format!(r#"{{"stoneGameIv":{{"{field}":1}}}}"#);
        assert_eq!(
            reason(&line),
            format!("stoneGameIv: unknown field `{}… at column 100018", "x".repeat(1000 - 15))
        );
        let line = format!(r#"{{"sumGame":"{field}"}}"#);
        assert_eq!(
            reason(&line),
            format!("sumGame: invalid type: string \"{}… at column 100013", "x".repeat(1000 - 22))
        );
        let line = format!("[{field}]");
        assert_eq!(
            reason(&line),
            format!(
                r#"expected a JSON object such as {{"stoneGameIv":{{"n":5}}}}, found "[{}…""#,
                "x".repeat(99)
            )
        );
    }

    #[test]
    fn a_cut_off_line_and_a_bare_word_are_named_for_what_they_are() {
        for cut in [r#"{"sumGame":{"num":"12"#, r#"{"sumGame":{"#, r#"{"stoneGameIx":{"stones":[1,2"#, "{"] {
            assert_eq!(reason(cut), "unexpected end of the line (truncated JSON?)", "{cut}");
        }
        let (_, err) = parse_problem(br#"{"sumGame":{"num":"12"#, 3).unwrap_err();
        assert_eq!(err.to_string(), "line 3: not a problem: unexpected end of the line (truncated JSON?)");
        assert_eq!(
            reason("hello"),
            r#"expected a JSON object such as {"stoneGameIv":{"n":5}}, found "hello""#
        );
        assert_eq!(
            reason("[1, 2, 3, 4, 5, 6, 7, 8, 9]"),
            r#"expected a JSON object such as {"stoneGameIv":{"n":5}}, found "[1, 2, 3, 4, 5, 6, 7, 8, 9]""#
        );
        assert_eq!(reason(r#"{"sumGame":{3}}"#), "sumGame: key must be a string at column 13");
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
        assert_eq!(
            err.to_string(),
            r#"line 4: not a problem: expected a JSON object such as {"stoneGameIv":{"n":5}}, found "not json""#
        );
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
