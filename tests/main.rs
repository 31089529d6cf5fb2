//! The integration tests, one module a file, as one test binary: linking the library
//! and its dependencies once instead of once a file is most of what `cargo test` saves
//! (docs/performance.md, "Build and test times"). A test that needs a process of its own
//! (the global tracing subscriber, rayon's global pool) is `tests/process_wide.rs`.
//! `cargo test --test integration limits::` runs one file's tests.

mod common;
mod production;

mod client;
mod client_columnar;
mod client_datasets;
mod client_embedded;
mod client_lying_server;
mod client_messages;
mod client_retry;
mod client_tls;
mod connect;
mod connections;
mod doors_agree;
mod fairness;
mod flight;
mod flight_ipc;
mod grpc_web;
mod in_process;
mod limits;
mod metrics;
mod metrics_endpoint;
mod nim_square;
mod otel;
mod server_binary;
mod service;
mod tls;
mod transport_frames;
