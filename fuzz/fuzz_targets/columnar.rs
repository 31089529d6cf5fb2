//! The columnar path: the IPC reader the Flight door and the client share
//! (`src/columnar/ipc/`), and the client's Parquet, Arrow (file and stream) and CSV
//! readers as `solve` reads a table (`client::read_table_problems`). One target for
//! both, so that CI builds and links one binary more, not five; the first byte picks:
//! - 0: a sequence of IPC messages, each a little-endian `u32` header length, the header
//!   (a flatbuffer), a `u32` body length and the body, read one after the other as an
//!   exchange reads them: nothing panics or aborts, a message `check` accepts fails in
//!   `read` only in arrow-ipc's validation of its values, and a batch read has the rows
//!   the check claimed, within the limit; and each batch read is answered by the column
//!   kernels as the row path answers it, for every descriptor;
//! - 1 to 4: the rest is a Parquet, Arrow IPC file, Arrow IPC stream or CSV table, read
//!   whole: nothing panics, aborts or hangs; a bad table is an error.
#![no_main]

use std::io::Write;
use std::path::PathBuf;

use arrow_buffer::Buffer;
use gamesolver::client::format::Format;
use gamesolver::client::{read_table_problems, InputSource};
use gamesolver::columnar::ipc::{Decoded, IpcError, IpcLimits, IpcReader};
use gamesolver::columnar::kernels::{solve_columns, solve_rows};
use gamesolver::columnar::{Descriptor, Games};
use gamesolver::games::Tables;
use libfuzzer_sys::fuzz_target;

/// Small, so that the limits are reached by inputs of a fuzzer's size.
const LIMIT: usize = 1 << 20;

/// The next length-prefixed piece of `input`.
fn piece<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (length, rest) = input.split_first_chunk::<4>()?;
    let length = (u32::from_le_bytes(*length) as usize).min(rest.len());
    let (piece, rest) = rest.split_at(length);
    *input = rest;
    Some(piece)
}

fn messages(mut input: &[u8]) {
    let limits = IpcLimits::new(LIMIT);
    let mut reader = IpcReader::new(limits);
    while let (Some(header), Some(body)) = (piece(&mut input), piece(&mut input)) {
        let claim = reader.check(header, body);
        match (claim, reader.read(header, Buffer::from(body.to_vec()))) {
            (Ok(claim), Ok(Decoded::Batch(batch))) => {
                assert_eq!(batch.num_rows(), claim.rows);
                assert!(claim.rows <= limits.rows);
                kernels_answer_as_rows(&batch);
            }
            (Ok(_), Ok(Decoded::Schema(_) | Decoded::Dictionary)) => {}
            (Ok(_), Err(IpcError::Decode(_))) | (Err(_), Err(_)) => {}
            (Ok(_), Err(err)) => panic!("checked, then refused by a check: {err}"),
            (Err(err), Ok(_)) => panic!("refused by check ({err}), then read"),
        }
        assert!(reader.dictionary_bytes() <= limits.dictionary_bytes);
    }
}

/// Small tables, shared by every input, so that piles beyond them are errors and some
/// batches find them cold, some warm.
fn tables() -> &'static Tables {
    static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| Tables::new(100_000, 10_000))
}

/// The column kernels answer `batch` as the row path does, for every descriptor: the same
/// table of solutions, or the same refusal of its columns.
fn kernels_answer_as_rows(batch: &arrow_array::RecordBatch) {
    for games in Games::ALL {
        for winner_only in [false, true] {
            let descriptor = Descriptor { games, winner_only };
            let rows = solve_rows(batch, descriptor, tables());
            let kernels = solve_columns(batch, descriptor, tables());
            assert_eq!(kernels, rows, "{descriptor:?}");
        }
    }
}

/// A file of this process's own for the table under test.
fn table_path(format: Format) -> PathBuf {
    std::env::temp_dir().join(format!("gamesolver-fuzz-{}.{}", std::process::id(), format.name()))
}

fn table(format: Format, bytes: &[u8]) {
    let path = table_path(format);
    let mut file = std::fs::File::create(&path).expect("a temporary file");
    file.write_all(bytes).expect("written");
    drop(file);
    // Small batches, so that cutting a batch into pieces is reached too.
    let _ = read_table_problems(&InputSource::File(path), format, 64, 4096);
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    match selector % 5 {
        0 => messages(rest),
        1 => table(Format::Parquet, rest),
        2 => table(Format::Arrow, rest),
        3 => table(Format::Arrows, rest),
        _ => table(Format::Csv, rest),
    }
});
