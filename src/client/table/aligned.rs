//! What both Parquet writers ([`super::write`]'s and [`super::copy`]'s) share: rows
//! handed to the encoder in pieces that start on multiples of its write batch, so that a
//! file's pages depend on its rows alone, not on how the answers were cut into batches (a
//! run resumed from a read-back copy writes the same file as a run never stopped), and
//! Parquet's errors as Arrow's.

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use parquet::errors::ParquetError;

/// A Parquet error as an Arrow one, keeping an I/O error findable (a closed pipe).
pub(super) fn from_parquet(err: ParquetError) -> ArrowError {
    match err {
        ParquetError::ArrowError(message) => ArrowError::ExternalError(message.into()),
        err => ArrowError::ExternalError(Box::new(err)),
    }
}

/// The Parquet encoder's write batch; rows are handed to it in pieces that start on its
/// multiples, which makes the file independent of how the rows came in.
pub(super) const WRITE_BATCH_ROWS: usize = 1024;

/// Hands `rows` to `encode` (a Parquet encoder) in pieces that start on multiples of its
/// write batch, keeping a short tail in `carry` for the next rows.
pub(super) fn write_aligned(
    carry: &mut Option<RecordBatch>,
    schema: &SchemaRef,
    rows: RecordBatch,
    mut encode: impl FnMut(&RecordBatch) -> Result<(), ArrowError>,
) -> Result<(), ArrowError> {
    let mut rest = rows;
    if let Some(head) = carry.take() {
        let need = (WRITE_BATCH_ROWS - head.num_rows()).min(rest.num_rows());
        let joined = arrow_select::concat::concat_batches(schema, [&head, &rest.slice(0, need)])?;
        rest = rest.slice(need, rest.num_rows() - need);
        if joined.num_rows() < WRITE_BATCH_ROWS {
            *carry = Some(joined);
            return Ok(());
        }
        encode(&joined)?;
    }
    let aligned = rest.num_rows() / WRITE_BATCH_ROWS * WRITE_BATCH_ROWS;
    if aligned > 0 {
        encode(&rest.slice(0, aligned))?;
    }
    if aligned < rest.num_rows() {
        *carry = Some(rest.slice(aligned, rest.num_rows() - aligned));
    }
    Ok(())
}
