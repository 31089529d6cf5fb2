//! The JSON of a Connect call, in the protobuf JSON mapping (pbjson, as the bulk client and
//! grpcurl speak it): a request transcoded into the protobuf frame the service reads,
//! charged to the request budget by its decoded-size bound first; a response written back
//! as JSON; and a bad request's fault named by the path of its field.

use bytes::Bytes;
use prost::Message;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::body::Body;
use tonic::Status;

use super::framing::GRPC_HEADER;
use super::procedure::Procedure;
use crate::convert;
use crate::echo;
use crate::pb;

/// A translated request whose message is JSON: set only by [`ConnectLayer`](super::ConnectLayer), so a peer
/// cannot ask for it, and taken by the limits, which decode the message into the protobuf
/// the service reads ([`JsonBody::transcode`]) once it is whole and inflated, charging
/// the request budget what the decoding takes before it takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonBody(pub(super) Procedure);

impl JsonBody {
    /// The mark of a Connect JSON request, taken off it; `None` for any other request.
    pub(crate) fn take(request: &mut http::Request<Body>) -> Option<JsonBody> {
        request.extensions_mut().remove::<JsonBody>()
    }

    /// The JSON message `json` as the uncompressed gRPC frame of its protobuf, for the
    /// service. `charge(held, decoded)` is asked for the bytes held at each step before
    /// they are taken, with `decoded` what the message may hold decoded
    /// ([`decoded_json_bytes`]): the JSON and that, before a byte of it is decoded; then,
    /// the JSON dropped, that and the protobuf frame, before it is written. A refusal ends
    /// it there. A protobuf message above `max` bytes is refused as tonic refuses one
    /// from a gRPC client. This is CPU work for a large body (60 MiB of JSON takes a
    /// second on one core): call it off the async workers.
    pub(crate) fn transcode(
        self,
        json: Bytes,
        max: usize,
        charge: &mut dyn FnMut(usize, usize) -> Result<(), Status>,
    ) -> Result<Vec<u8>, Status> {
        let decoded = decoded_json_bytes(&json);
        charge(json.len() + decoded, decoded)?;
        match self.0 {
            Procedure::Solve => json_to_frame::<pb::SolveRequest>(json, decoded, max, charge),
            Procedure::SolveBatch => json_to_frame::<pb::SolveBatchRequest>(json, decoded, max, charge),
        }
    }
}

/// Decodes a JSON request, drops the JSON, and encodes the message as one uncompressed
/// gRPC frame, charging the frame (beside the `decoded` message) before it is written.
fn json_to_frame<T: Message + DeserializeOwned>(
    json: Bytes,
    decoded: usize,
    max: usize,
    charge: &mut dyn FnMut(usize, usize) -> Result<(), Status>,
) -> Result<Vec<u8>, Status> {
    let message = json_message::<T>(&json)?;
    // The message owns its strings: the JSON is no longer needed.
    drop(json);
    let len = message.encoded_len();
    if len > max {
        // What tonic says of a protobuf message above the limit, as the limits rewrite it.
        return Err(Status::resource_exhausted(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {max} bytes"
        )));
    }
    charge(decoded + GRPC_HEADER + len, decoded)?;
    let mut framed = Vec::with_capacity(GRPC_HEADER + len);
    framed.push(0);
    // Within `max`, which is below 4 GiB (a gRPC header's length is 32 bits).
    framed.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message
        .encode(&mut framed)
        .map_err(|err| Status::internal(format!("cannot encode the request: {err}")))?;
    Ok(framed)
}

/// What a JSON request in the protobuf JSON mapping may hold once decoded, in bytes, read
/// from its text without decoding it: an upper bound of what serde and pbjson allocate
/// for it, so that it can be charged to the request budget before they do. Each string
/// its length (twice when it has escapes, which serde_json unescapes through a scratch
/// buffer), each object in an array a problem's struct in a vector that grows by
/// doubling, each other value in an array 8 bytes in one (a stone or a pile), and each
/// array the room an integer list starts with. The objects outside arrays (the request,
/// a problem's game) sit inside their parent's struct. The text is not validated: the
/// decoding that follows stops at the first fault, having allocated no more than its
/// part of the bound. Nesting deeper than serde_json's limit ends the count there.
pub(crate) fn decoded_json_bytes(json: &[u8]) -> usize {
    /// A problem's slot in its batch's vector: the struct, twice for the doubling.
    const OBJECT_IN_ARRAY: usize = 2 * std::mem::size_of::<pb::Problem>();
    /// An integer's slot in its list, twice for the doubling.
    const VALUE_IN_ARRAY: usize = 2 * std::mem::size_of::<u64>();
    /// The room an integer list starts with (`json_number::NumberVec`).
    const ARRAY: usize = 16 * std::mem::size_of::<u64>();
    /// serde_json refuses deeper nesting (its recursion limit is 128).
    const DEPTH: usize = 256;
    let mut arrays = [false; DEPTH];
    let mut depth = 0;
    let mut bytes = 0usize;
    let mut at = 0;
    while let Some(&byte) = json.get(at) {
        let in_array = depth > 0 && arrays[depth - 1];
        at += 1;
        match byte {
            b'"' => {
                let start = at;
                let mut escaped = false;
                let mut end = json.len();
                while let Some(&b) = json.get(at) {
                    at += 1;
                    match b {
                        b'\\' => {
                            escaped = true;
                            at += 1;
                        }
                        b'"' => {
                            end = at - 1;
                            break;
                        }
                        _ => {}
                    }
                }
                let len = end.saturating_sub(start);
                bytes += if escaped { 2 * len } else { len };
                bytes += if in_array { VALUE_IN_ARRAY } else { 0 };
            }
            b'{' | b'[' => {
                if depth == DEPTH {
                    break;
                }
                arrays[depth] = byte == b'[';
                depth += 1;
                bytes += match (byte, in_array) {
                    (b'{', true) => OBJECT_IN_ARRAY,
                    (b'{', false) => 0,
                    (_, true) => VALUE_IN_ARRAY + ARRAY,
                    (_, false) => ARRAY,
                };
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b' ' | b'\t' | b'\n' | b'\r' | b':' | b',' => {}
            // A number or a literal (`true`, `null`): one value, to its end.
            _ => {
                while json.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)) {
                    at += 1;
                }
                bytes += if in_array { VALUE_IN_ARRAY } else { 0 };
            }
        }
    }
    bytes
}

/// A protobuf response message of `procedure` as JSON.
pub(super) fn response_to_json(procedure: Procedure, proto: &[u8]) -> Result<Vec<u8>, String> {
    match procedure {
        Procedure::Solve => proto_to_json::<pb::SolveResponse>(proto),
        Procedure::SolveBatch => proto_to_json::<pb::SolveBatchResponse>(proto),
    }
}

/// Decodes a JSON request in the protobuf JSON mapping. Only a body that fails is read a
/// second time, for the path of the field to blame.
fn json_message<T: DeserializeOwned>(json: &[u8]) -> Result<T, Status> {
    serde_json::from_slice::<T>(json).map_err(|err| {
        let reason = json_reason::<T>(json, err);
        // serde quotes an unknown field or a string it did not expect whole.
        convert::invalid_json(format!("invalid JSON request: {}", echo::message(&reason)))
    })
}

/// Why `json` is not a `T`, with the path of the field at fault in front.
fn json_reason<T: DeserializeOwned>(json: &[u8], err: serde_json::Error) -> String {
    if json.trim_ascii().is_empty() {
        return "the body is empty; send one JSON object".to_owned();
    }
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let err = match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Ok(_) => return deserializer.end().err().unwrap_or(err).to_string(),
        // Where a cut-off body stops says nothing about what was cut.
        Err(err) if err.inner().is_eof() => return err.into_inner().to_string(),
        Err(err) => err,
    };
    // `?` stands for a key still being read: the path up to it is what helps.
    let path = err.path().to_string();
    let path = path.split_once(".?").map_or(path.as_str(), |(known, _)| known);
    match path {
        "." | "" | "?" => err.inner().to_string(),
        _ => format!("{path}: {}", err.inner()),
    }
}

/// Decodes a protobuf response message and writes it in the protobuf JSON mapping.
fn proto_to_json<T: Message + Default + Serialize>(proto: &[u8]) -> Result<Vec<u8>, String> {
    let message = T::decode(proto).map_err(|err| format!("the response does not decode: {err}"))?;
    serde_json::to_vec(&message).map_err(|err| format!("the response does not encode as JSON: {err}"))
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    /// `json` transcoded as a `procedure`'s request under `max`, and what was charged.
    fn transcode(procedure: Procedure, json: &[u8], max: usize) -> (Result<Vec<u8>, Status>, Vec<usize>) {
        let mut charged = Vec::new();
        let result = JsonBody(procedure).transcode(Bytes::copy_from_slice(json), max, &mut |held, _| {
            charged.push(held);
            Ok(())
        });
        (result, charged)
    }

    #[test]
    fn a_bad_json_request_names_the_field_at_fault() {
        let message = |json: &[u8]| transcode(Procedure::Solve, json, 1 << 20).0.unwrap_err();
        let status = message(br#"{"problem":{"stoneGameIv":{"n":-5}}}"#);
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "invalid JSON request: problem.stoneGameIv.n: -5 is not a uint64 at line 1 column 34"
        );
        let status = message(b" ");
        assert_eq!(status.message(), "invalid JSON request: the body is empty; send one JSON object");
        let status = message(br#"{"problem":{}} x"#);
        assert_eq!(status.message(), "invalid JSON request: trailing characters at line 1 column 16");
    }

    #[test]
    fn a_json_request_becomes_one_protobuf_frame_charged_before_it_is_decoded_and_written() {
        let json = br#"{"problem":{"sumGame":{"num":"25??"}}}"#;
        let (frame, charged) = transcode(Procedure::Solve, json, 1 << 20);
        let frame = frame.unwrap();
        let request = pb::SolveRequest::decode(&frame[GRPC_HEADER..]).unwrap();
        assert_eq!(frame[..GRPC_HEADER], [0, 0, 0, 0, u8::try_from(frame.len() - GRPC_HEADER).unwrap()]);
        assert_eq!(
            request.problem.unwrap().game,
            Some(pb::problem::Game::SumGame(pb::SumGame { num: "25??".into() }))
        );
        // The JSON and its strings' bytes (the keys' too), then those and the frame.
        let strings = "problem".len() + "sumGame".len() + "num".len() + "25??".len();
        assert_eq!(charged, [json.len() + strings, strings + frame.len()]);

        // A refusal from the budget ends it before anything is decoded.
        let mut asked = 0;
        let json = Bytes::from_static(br#"{"problems":[{}]}"#);
        let refused = JsonBody(Procedure::SolveBatch).transcode(json, 1 << 20, &mut |_, _| {
            asked += 1;
            Err(Status::resource_exhausted("no room"))
        });
        assert_eq!((refused.unwrap_err().message(), asked), ("no room", 1));

        // A protobuf above the message limit is refused as tonic refuses one.
        let (refused, charged) =
            transcode(Procedure::SolveBatch, br#"{"problems":[{"stoneGameIv":{"n":1e19}}]}"#, 12);
        let status = refused.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "Error, decoded message length too large: found 15 bytes, the limit is: 12 bytes"
        );
        assert_eq!(charged.len(), 1);
    }

    #[test]
    fn what_a_json_request_decodes_to_is_bounded_from_its_text() {
        let problem = std::mem::size_of::<pb::Problem>();
        // A batch of objects: a problem's slot each, twice; its keys' bytes.
        let batch = br#"{"problems":[{},{},{}]}"#;
        assert_eq!(decoded_json_bytes(batch), "problems".len() + 128 + 3 * 2 * problem);
        // A list of integers: its room to start with, and 16 bytes an integer.
        let stones = br#"{"problem":{"stoneGameIx":{"stones":[1,2,"3",4e0]}}}"#;
        assert_eq!(decoded_json_bytes(stones), 7 + 11 + 6 + 128 + 4 * 16 + 1);
        // A string with an escape, twice (serde_json's scratch copy).
        assert_eq!(decoded_json_bytes(br#"{"id":"a\"b"}"#), 2 + 2 * 4);
        // Nesting past serde_json's limit ends the count.
        let deep = "[".repeat(100_000);
        assert_eq!(decoded_json_bytes(deep.as_bytes()), 128 + 255 * (128 + 16));

        // The bound holds what the decoded message holds, for every game's problems.
        let json = br#"{"problems":[{"id":"a","sumGame":{"num":"25??"}},{"stoneGameIx":{"stones":[1,2,3]}},
            {"stoneGameIv":{"n":"7"}},{"nimSquare":{"piles":[4,5]}},{}]}"#;
        let request: pb::SolveBatchRequest = serde_json::from_slice(json).unwrap();
        let held: usize = request.problems.iter().map(convert::problem_bytes).sum();
        assert!(decoded_json_bytes(json) >= held + request.problems.capacity() * problem);
    }
}
