//! Any bytes as a Stone Game IV table file → `IvTableFile::decode` → the live table.
//!
//! A file is either rejected with an error naming it, or it is a table the server can
//! trust: its list passes `check_losing_list` and `StoneGameIvTable::restore`, a file
//! in the current version is the only encoding of itself (one in the older `u32`
//! version encodes to a file that reads back the same), and below 2^16 it is exactly
//! the P-positions by the definition.
//!
//! The first input byte says how to read the rest: odd means "with its checksum fixed",
//! so that mutations reach the checks behind the CRC-32 (libFuzzer cannot forge one: a
//! 10-minute run without this never got a mutated file past it), even means "as is",
//! which keeps the checksum's own rejection covered.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use gamesolver::games::stone_game_iv::DEFAULT_LIMIT;
use gamesolver::games::StoneGameIvTable;
use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::tables::{TableFile, TableFileError};
use gamesolver_fuzz::{StoneGameIvReference, IV_REFERENCE_END};
use libfuzzer_sys::fuzz_target;

const CRC_BYTES: usize = 4;

/// The version `IvTableFile::encode` writes.
const CURRENT_VERSION: [u8; 4] = 2u32.to_le_bytes();

/// The name errors give the input.
const PATH: &str = "fuzz-input.ivtable";

fn iv_reference() -> &'static StoneGameIvReference {
    static REFERENCE: OnceLock<StoneGameIvReference> = OnceLock::new();
    REFERENCE.get_or_init(StoneGameIvReference::new)
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, file)) = input.split_first() else {
        return;
    };
    let mut bytes = file.to_vec();
    if mode % 2 == 1 && bytes.len() >= CRC_BYTES {
        let end = bytes.len() - CRC_BYTES;
        let crc = crc32fast::hash(&bytes[..end]);
        bytes[end..].copy_from_slice(&crc.to_le_bytes());
    }
    match IvTableFile::decode(&bytes, Path::new(PATH)) {
        Ok(file) => {
            if file.covered <= IV_REFERENCE_END {
                let reference: Vec<u64> =
                    iv_reference().losing_below(file.covered).into_iter().map(u64::from).collect();
                assert_eq!(file.losing, reference, "covered {}", file.covered);
            }
            let encoded = file.encode();
            if bytes[8..12] == CURRENT_VERSION {
                assert_eq!(encoded, bytes);
            } else {
                assert_eq!(IvTableFile::decode(&encoded, Path::new(PATH)).expect("re-encoded"), file);
            }

            // `restore` runs `check_losing_list` first; calling it here too would add a
            // third sieve of 2^20 numbers to every valid file, the run's main cost.
            let table = StoneGameIvTable::new(DEFAULT_LIMIT);
            table.restore(file.covered, file.losing.clone()).expect("a loaded list passes check_losing_list");
            let covered = file.covered.min(DEFAULT_LIMIT + 1);
            let kept = file.losing.into_iter().filter(|&p| p < covered).collect();
            assert_eq!(table.snapshot(), (covered, kept));
        }
        Err(err) => {
            assert!(!matches!(err, TableFileError::Io { .. }), "{err}");
            let message = err.to_string();
            assert!(message.starts_with(&format!("{PATH}: ")), "{message}");
        }
    }
});
