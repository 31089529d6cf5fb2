//! Protobuf codegen: tonic/prost types, a descriptor set for server reflection, and
//! pbjson serde impls so that the protobuf JSON mapping (what grpcurl and ghz speak)
//! comes from the schema rather than from hand-written code.
//!
//! Two fixes are applied to pbjson's output (both checked, so that a pbjson release that
//! changes its output fails the build instead of silently dropping them):
//! - integers are read by `crate::json_number::NumberDeserialize`, one pass whether the
//!   JSON has a number or a string, instead of pbjson's untagged-enum reader, which
//!   builds a formatted error and throws it away for every JSON number (see that module);
//! - a second field of a oneof is "more than one game", not "duplicate field".
//!
//! `pbjson-build` is pinned exactly in Cargo.toml because of these rewrites. To move the
//! pin: bump it, run `cargo build`; if a check below fails, read the new generated file
//! (`target/*/build/gamesolver-*/out/gamesolver.v1.serde.rs`) and adapt the rewrite it
//! names; then `cargo test` (the JSON tests in `src/client/problem_json.rs` and
//! `tests/client.rs` pin the messages) and the `line_parser` fuzz target, which holds the
//! bulk client's reader to pbjson's.

use std::{env, fs, path::PathBuf};

use prost::Message;

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
    let error_field = ".gamesolver.v1.Solution.error";
    tonic_prost_build::configure()
        .btree_map(&metadata)
        // A solution without its (rare) error is 64 bytes instead of 168: batches of
        // solutions move a third of the bytes (`cargo bench --bench bulk`; the profile
        // that decided it is in docs/performance.md).
        .boxed(error_field)
        // prost, with a one-pass decoder and encoder for batches (src/codec.rs).
        .codec_path("crate::codec::GrpcCodec")
        .file_descriptor_set_path(&descriptor_path)
        .compile_protos(&[proto], &["proto"])?;

    let descriptor_set = fs::read(&descriptor_path)?;
    // emit_fields: a solution always says `"aliceWins": false` rather than leaving it out,
    // so every answered line has the same fields (the proto3 JSON mapping allows both).
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor_set)?
        .emit_fields()
        .btree_map([error])
        .build(&[".gamesolver.v1"])?;

    let serde_path = out_dir.join("gamesolver.v1.serde.rs");
    let generated = fs::read_to_string(&serde_path)?;
    let generated = replace_number_reader(&generated)?;
    let generated = format_numbers_on_the_stack(&generated)?;
    let generated = oneof_errors(&generated, &oneof_names(&descriptor_set)?)?;
    fs::write(&serde_path, generated)?;
    Ok(())
}

fn replace_number_reader(code: &str) -> Result<String, String> {
    const PBJSON: &str = "::pbjson::private::NumberDeserialize";
    if !code.contains(PBJSON) {
        return Err(format!("pbjson's output no longer uses {PBJSON}: update build.rs"));
    }
    const LIST: &str = "Vec<crate::json_number::NumberDeserialize<_>>";
    let code = code.replace(PBJSON, "crate::json_number::NumberDeserialize");
    if !code.contains(LIST) {
        return Err(format!("pbjson's output no longer reads repeated integers as {LIST}: update build.rs"));
    }
    Ok(code.replace(LIST, "crate::json_number::NumberVec<_>"))
}

/// pbjson writes a 64-bit integer as a string through `ToString`, an allocation per
/// number; `itoa` formats it in a buffer on the stack, to the same digits.
fn format_numbers_on_the_stack(code: &str) -> Result<String, String> {
    const PREFIX: &str = "ToString::to_string(&self.";
    const SUFFIX: &str = ").as_str()";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    let mut replaced = 0;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + PREFIX.len()..];
        let field =
            &tail[..tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len())];
        match tail[field.len()..].strip_prefix(SUFFIX) {
            Some(after) => {
                out.push_str(&format!("::itoa::Buffer::new().format(self.{field})"));
                rest = after;
                replaced += 1;
            }
            None => {
                out.push_str(PREFIX);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    if replaced == 0 {
        return Err(format!(
            "pbjson's output no longer writes integers with {PREFIX}..{SUFFIX}: update build.rs"
        ));
    }
    Ok(out)
}

/// The names of the schema's real oneofs (not proto3 `optional`'s synthetic ones).
fn oneof_names(descriptor_set: &[u8]) -> Result<Vec<String>, prost::DecodeError> {
    let set = prost_types::FileDescriptorSet::decode(descriptor_set)?;
    let mut names: Vec<String> = set
        .file
        .iter()
        .flat_map(|file| &file.message_type)
        .flat_map(|message| {
            let synthetic = |index: usize| {
                message.field.iter().any(|f| f.oneof_index == Some(index as i32) && f.proto3_optional())
            };
            message
                .oneof_decl
                .iter()
                .enumerate()
                .filter(move |(i, _)| !synthetic(*i))
                .map(|(_, o)| o.name().to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Turns pbjson's `duplicate_field("stoneGameIv")` under a oneof's guard
/// (`if game__.is_some()`) into "more than one game: stoneGameIv is the second".
fn oneof_errors(code: &str, oneofs: &[String]) -> Result<String, String> {
    const DUPLICATE: &str = "return Err(serde::de::Error::duplicate_field(";
    let mut code = code.to_owned();
    for oneof in oneofs {
        let guard = format!("if {oneof}__.is_some() {{");
        let mut out = String::with_capacity(code.len());
        let mut rest = code.as_str();
        let mut replaced = 0;
        while let Some(at) = rest.find(&guard) {
            let (head, tail) = rest.split_at(at + guard.len());
            out.push_str(head);
            let body = tail.trim_start();
            let field_and_rest = body
                .strip_prefix(DUPLICATE)
                .ok_or_else(|| format!("unexpected pbjson output after `{guard}`: update build.rs"))?;
            let (field, after) = field_and_rest
                .split_once(')')
                .ok_or_else(|| format!("unexpected pbjson output after `{guard}`: update build.rs"))?;
            out.push_str(&tail[..tail.len() - body.len()]);
            out.push_str(&format!(
                "return Err(serde::de::Error::custom(concat!(\"more than one {oneof}: \", {field}, \" is the second\"))"
            ));
            rest = after;
            replaced += 1;
        }
        out.push_str(rest);
        if replaced == 0 {
            return Err(format!("pbjson's output has no guard for oneof {oneof}: update build.rs"));
        }
        code = out;
    }
    Ok(code)
}
