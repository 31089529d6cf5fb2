//! One input line of the bulk client → `parse_problem`.
//!
//! The README promises that lines are read as pbjson's generated deserializer reads a
//! `Problem`, so serde_json + pbjson is the oracle: the parser accepts exactly the lines
//! it accepts, with the same problem (plus the line number as a missing id). A parsed
//! problem written back as JSON parses to itself; a rejected line becomes an
//! `INVALID_ARGUMENT` error that names its reason and line.
#![no_main]

use gamesolver::client::{parse_problem, LineError};
use gamesolver::problem::ProblemError;
use gamesolver::pb;
use libfuzzer_sys::fuzz_target;

/// The line number every input gets; line 1 is also the only one whose BOM is skipped.
const NUMBER: u64 = 1;

/// Longer lines are skipped: parsing is linear, and short lines reach every branch.
const MAX_LINE_BYTES: usize = 64 * 1024;

fuzz_target!(|bytes: &[u8]| {
    // The reader hands over a line without its '\n' and without one trailing '\r'.
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_LINE_BYTES {
        return;
    }
    let reference = serde_json::from_slice::<pb::Problem>(line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line));
    match parse_problem(line, NUMBER) {
        Ok(problem) => {
            let expected = reference.expect("pbjson rejects a line the parser accepted");
            assert!(problem.game.is_some(), "a problem without a game was accepted");
            assert_eq!(problem.game, expected.game);
            let expected_id = if expected.id.is_empty() { NUMBER.to_string() } else { expected.id };
            assert_eq!(problem.id, expected_id);

            let json = serde_json::to_vec(&problem).expect("a problem serializes");
            assert_eq!(
                parse_problem(&json, NUMBER).as_ref(),
                Ok(&problem),
                "{}",
                String::from_utf8_lossy(&json)
            );
        }
        Err((id, err)) => {
            assert!(!id.is_empty(), "a rejected line has an id");
            match reference {
                Err(_) => assert!(matches!(err, LineError::Json { line: NUMBER, .. }), "{err:?}"),
                Ok(expected) => {
                    assert_eq!(expected.game, None, "pbjson accepts a line the parser rejected: {err}");
                    let missing = LineError::Problem { line: NUMBER, source: ProblemError::MissingGame };
                    assert_eq!(err, missing);
                    let expected_id = if expected.id.is_empty() { NUMBER.to_string() } else { expected.id };
                    assert_eq!(id, expected_id);
                }
            }
            let wire = pb::SolutionError::from(err);
            assert_eq!(wire.code, pb::solution_error::Code::InvalidArgument as i32);
            assert!(!wire.reason.is_empty() && !wire.message.is_empty(), "{wire:?}");
            assert_eq!(wire.metadata.get("line").map(String::as_str), Some("1"));
        }
    }
});
