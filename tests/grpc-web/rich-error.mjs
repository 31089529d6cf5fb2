// google.rpc.ErrorInfo and BadRequest from their protobuf bytes, for the node checks
// (grpc-web.test.mjs, connect.test.mjs): the contract does not import google/rpc, so
// there are no generated types for them.
import { BinaryReader } from "@bufbuild/protobuf/wire";

// ErrorInfo: reason = 1, domain = 2, metadata = 3 (map entries: key = 1, value = 2).
export function decodeErrorInfo(bytes) {
  const reader = new BinaryReader(bytes);
  const info = { reason: "", domain: "", metadata: {} };
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) info.reason = reader.string();
    else if (field === 2) info.domain = reader.string();
    else if (field === 3) {
      const [key, value] = decodePair(reader.bytes());
      info.metadata[key] = value;
    } else reader.skip(wireType);
  }
  return info;
}

// BadRequest: field_violations = 1, each a FieldViolation (field = 1, description = 2).
export function decodeBadRequest(bytes) {
  const reader = new BinaryReader(bytes);
  const violations = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) {
      const [name, description] = decodePair(reader.bytes());
      violations.push({ field: name, description });
    } else reader.skip(wireType);
  }
  return { fieldViolations: violations };
}

// The two string fields (1 and 2) of a small message.
function decodePair(bytes) {
  const reader = new BinaryReader(bytes);
  let first = "";
  let second = "";
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) first = reader.string();
    else if (field === 2) second = reader.string();
    else reader.skip(wireType);
  }
  return [first, second];
}
