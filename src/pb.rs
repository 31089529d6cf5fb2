//! Generated protobuf types, gRPC stubs and serde impls (the protobuf JSON mapping).
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("gamesolver.v1");
include!(concat!(env!("OUT_DIR"), "/gamesolver.v1.serde.rs"));

/// Encoded `FileDescriptorSet` of the schema, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("gamesolver_descriptor");
