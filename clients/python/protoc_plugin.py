#!/usr/bin/env python3
"""A protoc plugin that runs one of grpcio-tools' built-in generators for buf.

grpcio-tools bundles protoc with the ``python``, ``pyi`` and ``grpc_python`` generators
compiled in, and no ``protoc-gen-*`` executables; buf runs only plugins (and protoc's own
built-ins, which do not include ``grpc_python``). This bridges the two: it reads buf's
CodeGeneratorRequest, hands its files to grpcio-tools' protoc as a descriptor set, and
answers with what that protoc wrote. buf.gen.yaml runs it as

    local: [python3, clients/python/protoc_plugin.py, GENERATOR]

with the pinned grpcio-tools' venv first on PATH (.ci/generate.sh).
"""
import os
import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    generator = sys.argv[1]
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL)
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = os.path.join(tmp, "descriptors.pb")
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        with open(descriptors, "wb") as f:
            f.write(descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString())
        args = ["protoc", f"--descriptor_set_in={descriptors}", f"--{generator}_out={out}"]
        if request.parameter:
            args.append(f"--{generator}_opt={request.parameter}")
        if protoc.main(args + list(request.file_to_generate)) != 0:
            response.error = f"grpcio-tools' protoc --{generator}_out failed"
        else:
            for path in sorted(pathlib.Path(out).rglob("*")):
                if path.is_file():
                    response.file.add(name=path.relative_to(out).as_posix(), content=path.read_text())
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
