//! The caller's share of the server's request memory, as a door sees it.
//!
//! The limits layer counts a request's bytes as they arrive and gives them back when the
//! call reads its next message. A Flight exchange holds more, and for longer: a batch's
//! decoded arrays (and what its compressed buffers inflate to) until it is answered, its
//! dictionaries while they are held. The layer puts a [`CallMemory`] in the request's
//! extensions, and the door takes those bytes from it before it decodes them, so that
//! they count against `--max-request-bytes-in-flight` like every other request byte. A
//! handle rather than a charge in the layer, because only the door knows how long what it
//! decoded is held (a dictionary across messages, a batch across the read-ahead).

use std::sync::Arc;

use tonic::Status;

/// Memory held for a call, given back when dropped.
pub struct MemoryHold(#[expect(dead_code, reason = "held for its drop")] Box<dyn Send + Sync>);

impl MemoryHold {
    /// Holds `guard` (whatever gives the memory back when dropped).
    pub(crate) fn new(guard: impl Send + Sync + 'static) -> Self {
        MemoryHold(Box::new(guard))
    }
}

impl std::fmt::Debug for MemoryHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryHold")
    }
}

/// A call's share of the request memory.
pub(crate) trait RequestMemory: Send + Sync + std::fmt::Debug {
    /// Holds `bytes` for the request message just read, in place of what its bytes were
    /// charged as they arrived; a refusal is the status that ends the call.
    fn hold_message(&self, bytes: usize) -> Result<MemoryHold, Status>;

    /// Holds `bytes` more for the call; a refusal is the status that ends the call.
    fn hold(&self, bytes: usize) -> Result<MemoryHold, Status>;
}

/// The handle the limits layer puts in a call's request extensions.
#[derive(Debug, Clone)]
pub(crate) struct CallMemory(pub(crate) Arc<dyn RequestMemory>);
