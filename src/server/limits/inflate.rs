//! gzip and zstd request messages, inflated here rather than by tonic so that the
//! inflated bytes are taken from the request budget as they grow.

use std::io::Read;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use super::{units, BUDGET_UNIT, GRPC_HEADER, MESSAGE_COPIES};
use crate::server::connection::admission::{Refusal, Share};

/// The largest zstd window a request may use (2^24 = 16 MiB; `zstd -19` uses 8 MiB):
/// the decoder allocates the window a frame asks for before producing any output, so
/// it is bounded here rather than counted.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// A slot among the inflations allowed at once, one a core: each holds a decoder's
/// window and a growing output, so their number bounds the memory outside the budget.
pub(super) fn slot() -> BoxFuture<'static, Option<OwnedSemaphorePermit>> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    let slots = SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        Arc::new(Semaphore::new(cores))
    });
    let slots = Arc::clone(slots);
    // The semaphore is never closed.
    Box::pin(async move { slots.acquire_owned().await.ok() })
}

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
    /// message, taking budget into `held` for the output before it grows (never waiting
    /// for it).
    pub(super) fn inflate(self, input: &[u8], limit: usize, held: &mut Share) -> Result<Vec<u8>, Status> {
        // A body that does not inflate is the caller's fault, not the server's.
        let broken =
            |err: std::io::Error| Status::invalid_argument(format!("cannot inflate the request: {err}"));
        let mut reader: Box<dyn Read> = match self {
            Inflate::Gzip => Box::new(flate2::read::GzDecoder::new(input)),
            Inflate::Zstd => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(broken)?;
                decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(broken)?;
                Box::new(decoder)
            }
        };
        // The output is the whole gRPC frame, header first, so tonic gets it without a copy.
        let mut out = vec![0u8; GRPC_HEADER];
        let most = GRPC_HEADER + limit.saturating_add(1);
        // Not `clamp`: below 4 KiB of limit, `most` is the smaller bound.
        let mut capacity = (input.len() * 4).max(4096).min(most);
        // The input is already paid for; the output is on top of it while both exist.
        let input_units = held.amount();
        loop {
            let wanted = input_units + units(capacity) * MESSAGE_COPIES;
            if wanted > held.amount() {
                held.try_grow(wanted - held.amount()).map_err(|refusal| match refusal {
                    Refusal::PeerCap => Status::resource_exhausted(format!(
                        "request message inflates past the {} bytes of request memory one client may hold",
                        held.cap() * BUDGET_UNIT
                    )),
                    Refusal::Full { .. } => Status::resource_exhausted(
                        "server overloaded: its memory for request messages is in use; retry later",
                    ),
                })?;
            }
            out.reserve_exact(capacity - out.len());
            let len = out.len();
            let read = (&mut reader).take((capacity - len) as u64).read_to_end(&mut out).map_err(broken)?;
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
