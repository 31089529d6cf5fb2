//! Tables of problems and solutions: Parquet, Arrow IPC (file and stream) and CSV, read
//! and written in batches through the columnar contract ([`crate::columnar`]).
//!
//! `columns` resolves a table's columns (renamed by `--column`) into what is sent and what
//! is written; `keep` the input columns written beside the answers (`--keep`); `read`
//! reads the needed columns in bounded batches (Arrow IPC through `ipc_input`, which
//! checks every message with the Flight door's reader); `csv` parses the text cells of a
//! CSV, whose records `csv_records` bounds in length; `fingerprint` proves what rows an
//! output answers; `answers` checks a server's answer and turns answers into output rows
//! or JSON lines; `write` writes any output format as it goes (Parquet in pieces aligned
//! to its write batch, `aligned`; with kept columns copied from a Parquet input, `copy`)
//! and reads back what a cut-off run left; `resume` continues a cut-off output.

pub(crate) mod aligned;
pub(crate) mod answers;
pub(crate) mod columns;
pub(crate) mod copy;
pub(crate) mod csv;
pub(crate) mod csv_records;
pub(crate) mod fingerprint;
pub(crate) mod ipc_input;
pub(crate) mod keep;
pub(crate) mod read;
pub(crate) mod resume;
pub(crate) mod write;
