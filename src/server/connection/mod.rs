//! Everything about a connection, from the accepted socket to its close.
//!
//! - `accept.rs`: the accept loop, its bounds, and each connection's handshake under
//!   `--handshake-timeout`.
//! - `admission.rs`: the fair shares among clients (grouped by IPv4 address or IPv6
//!   prefix) of connections, calls and request bytes; the limits layer takes its calls
//!   and bytes from here too.
//! - `state.rs`: what a connection holds while it is open (its slot, its client's share,
//!   its idle and shutdown rules).
//! - `socket.rs`: the byte stream itself, plaintext or TLS, with the forced close after
//!   the age's grace.
//! - `transport.rs`: the HTTP/2 frames the server follows and writes itself (the GOAWAY
//!   of an idle close or a shutdown).
//! - `open_files.rs`: the connection bounds fitted under the open-file limit.

pub(crate) mod accept;
pub(crate) mod admission;
pub(crate) mod open_files;
pub(crate) mod socket;
pub(crate) mod state;
pub(crate) mod transport;
