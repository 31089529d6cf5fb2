//! The codec against prost (`src/codec/`): whenever its fast decoder decodes a request
//! (of one problem or a batch) or a batch response, prost must decode the same bytes to
//! the same message; when it
//! gives way, prost decides. The same bytes are read as both messages, and whatever prost
//! decodes must be encoded to prost's own bytes by the fast encoders.
#![no_main]

use gamesolver::codec::{encode_problem_element, FastDecode, FastEncode};
use gamesolver::pb;
use libfuzzer_sys::fuzz_target;
use prost::bytes::BytesMut;
use prost::Message;

fn check<M: FastDecode + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let prost = M::decode(bytes).ok();
    if let Some(fast) = M::decode_fast(bytes) {
        assert_eq!(prost.as_ref().expect("prost decodes what the fast decoder does"), &fast);
    }
    prost
}

fuzz_target!(|bytes: &[u8]| {
    if let Some(request) = check::<pb::SolveBatchStreamRequest>(bytes) {
        let mut out = BytesMut::new();
        for problem in &request.problems {
            encode_problem_element(problem, &mut out);
        }
        let problems = pb::SolveBatchStreamRequest { problems: request.problems, winner_only: false };
        assert_eq!(out.as_ref(), problems.encode_to_vec().as_slice());
    }
    check::<pb::SolveRequest>(bytes);
    check::<pb::SolveStreamRequest>(bytes);
    if let Some(response) = check::<pb::SolveBatchStreamResponse>(bytes) {
        let mut out = Vec::new();
        assert!(response.encode_fast(&mut out));
        assert_eq!(out, response.encode_to_vec());
    }
});
