//! The codec's fast decoder against prost (`src/codec.rs`): whenever it decodes a batch
//! request or response, prost must decode the same bytes to the same message; when it
//! gives way, prost decides. The same bytes are read as both messages.
#![no_main]

use gamesolver::codec::FastDecode;
use gamesolver::pb;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn check<M: FastDecode + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Some(fast) = M::decode_fast(bytes) {
        assert_eq!(M::decode(bytes).expect("prost decodes what the fast decoder does"), fast);
    }
}

fuzz_target!(|bytes: &[u8]| {
    check::<pb::SolveBatchStreamRequest>(bytes);
    check::<pb::SolveBatchStreamResponse>(bytes);
});
