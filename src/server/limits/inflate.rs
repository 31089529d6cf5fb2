//! gzip and zstd request messages, inflated here rather than by tonic so that the
//! inflated bytes are taken from the request budget as they grow.

use std::io::Read;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use super::{units, BUDGET_UNIT, GRPC_HEADER, MESSAGE_COPIES};

/// A compression a request may use.
#[derive(Debug, Clone, Copy)]
pub(super) enum Inflate {
    Gzip,
    Zstd,
}

impl Inflate {
    pub(super) fn from_header(value: &[u8]) -> Option<Inflate> {
        match value {
            b"gzip" => Some(Inflate::Gzip),
            b"zstd" => Some(Inflate::Zstd),
            _ => None,
        }
    }

    /// Inflates `input` into an uncompressed gRPC frame of at most `limit` bytes of
    /// message, taking budget for the output as it grows (never waiting for it).
    pub(super) fn inflate(
        self,
        input: &[u8],
        limit: usize,
        held: &mut OwnedSemaphorePermit,
        budget: &Arc<Semaphore>,
        budget_units: u32,
    ) -> Result<Vec<u8>, Status> {
        let mut reader: Box<dyn Read> = match self {
            Inflate::Gzip => Box::new(flate2::read::GzDecoder::new(input)),
            Inflate::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(input)
                    .map_err(|err| Status::internal(format!("cannot inflate the request: {err}")))?,
            ),
        };
        // The output is the whole gRPC frame, header first, so tonic gets it without a copy.
        let mut out = vec![0u8; GRPC_HEADER];
        let most = GRPC_HEADER + limit.saturating_add(1);
        let mut capacity = (input.len() * 4).clamp(4096, most);
        // The input is already paid for; the output is on top of it while both exist.
        let input_units = held.num_permits() as u32;
        loop {
            let wanted = input_units.saturating_add(units(capacity).saturating_mul(MESSAGE_COPIES));
            if wanted > budget_units {
                return Err(Status::resource_exhausted(format!(
                    "request message inflates past the server's budget of {} bytes for requests in flight",
                    budget_units as usize * BUDGET_UNIT
                )));
            }
            if wanted > held.num_permits() as u32 {
                let more = Arc::clone(budget).try_acquire_many_owned(wanted - held.num_permits() as u32);
                held.merge(more.map_err(|_| {
                    Status::resource_exhausted(
                        "server overloaded: its memory for request messages is in use; retry later",
                    )
                })?);
            }
            out.reserve_exact(capacity - out.len());
            let len = out.len();
            let read = (&mut reader)
                .take((capacity - len) as u64)
                .read_to_end(&mut out)
                .map_err(|err| Status::internal(format!("cannot inflate the request: {err}")))?;
            if out.len() - GRPC_HEADER > limit {
                return Err(Status::resource_exhausted(format!(
                    "request message inflates to more than the limit of {limit} bytes"
                )));
            }
            if read < capacity - len {
                let inflated = u32::try_from(out.len() - GRPC_HEADER).unwrap_or(u32::MAX);
                out[1..GRPC_HEADER].copy_from_slice(&inflated.to_be_bytes());
                return Ok(out);
            }
            capacity = capacity.saturating_mul(2).min(most);
        }
    }
}
