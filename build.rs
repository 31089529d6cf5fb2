//! Protobuf codegen: tonic/prost types, a descriptor set for server reflection, and
//! pbjson serde impls so that the protobuf JSON mapping (what grpcurl and ghz speak)
//! comes from the schema rather than from hand-written code.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment here.
    unsafe { env::set_var("PROTOC", protoc) };

    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let descriptor_path = out_dir.join("gamesolver_descriptor.bin");
    let proto = "proto/gamesolver/v1/gamesolver.proto";
    println!("cargo:rerun-if-changed={proto}");

    // Error metadata as a BTreeMap, so that JSON lines come out the same on every run
    // (prost takes the field's path, pbjson the message's).
    let error = ".gamesolver.v1.SolutionError";
    let metadata = format!("{error}.metadata");
    tonic_prost_build::configure()
        .btree_map(&metadata)
        .file_descriptor_set_path(&descriptor_path)
        .compile_protos(&[proto], &["proto"])?;

    let descriptor_set = std::fs::read(&descriptor_path)?;
    // emit_fields: a solution always says `"aliceWins": false` rather than leaving it out,
    // so every answered line has the same fields (the proto3 JSON mapping allows both).
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor_set)?
        .emit_fields()
        .btree_map([error])
        .build(&[".gamesolver.v1"])?;
    Ok(())
}
