#!/usr/bin/env python3
"""Cross-check gamesolver from a second, independent client: Python grpcio and the
reference protobuf runtime (google.protobuf), stubs generated from the proto file.

- every line of the example file is parsed with json_format (the reference protobuf JSON
  mapping) and solved through Solve, SolveBatch, SolveStream and SolveBatchStream: the four
  RPCs must agree with each other;
- a bad problem's status must carry google.rpc ErrorInfo and BadRequest details, and its
  batch solution the same reason, field and metadata;
- gamesolver-client's output for the same file must parse with json_format and equal the
  answers the Python client got.

Usage: crosscheck.py SERVER_BIN CLIENT_BIN PROBLEMS.jsonl  (needs grpcio, grpcio-tools, grpcio-status)
"""
import json
import os
import subprocess
import sys
import tempfile

import grpc
from grpc_tools import protoc
from google.protobuf import json_format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def generate_stubs(out_dir):
    proto_dir = os.path.join(ROOT, "proto")
    args = ["protoc", f"-I{proto_dir}", f"-I{os.path.dirname(protoc.__file__)}/_proto",
            f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
            os.path.join(proto_dir, "gamesolver/v1/gamesolver.proto")]
    if protoc.main(args) != 0:
        sys.exit("crosscheck: protoc failed")
    sys.path.insert(0, out_dir)
    from gamesolver.v1 import gamesolver_pb2, gamesolver_pb2_grpc  # noqa: E402
    return gamesolver_pb2, gamesolver_pb2_grpc


def check_rich_errors(pb2, stub):
    """A bad problem's status carries google.rpc ErrorInfo and BadRequest details (read
    with grpcio-status), and the same reason, field and metadata in a batch solution."""
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    bad = pb2.Problem(id="bad", sum_game=pb2.SumGame(num="12x4"))
    try:
        stub.Solve(pb2.SolveRequest(problem=bad), timeout=60)
        sys.exit("crosscheck: a bad problem was answered")
    except grpc.RpcError as call:
        if call.code() != grpc.StatusCode.INVALID_ARGUMENT:
            sys.exit(f"crosscheck: a bad problem got {call.code()}")
        status = rpc_status.from_call(call)
    if status is None:
        sys.exit("crosscheck: no google.rpc.Status details on a bad problem")
    info, bad_request = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
    for detail in status.details:
        detail.Unpack(info) or detail.Unpack(bad_request)
    want = ("INVALID_CHARACTER", "gamesolver.v1", {"index": "2", "character": "x"})
    if (info.reason, info.domain, dict(info.metadata)) != want:
        sys.exit(f"crosscheck: ErrorInfo is {info}, expected {want}")
    if [v.field for v in bad_request.field_violations] != ["problem.sum_game.num"]:
        sys.exit(f"crosscheck: BadRequest is {bad_request}")
    error = stub.SolveBatch(pb2.SolveBatchRequest(problems=[bad]), timeout=60).solutions[0].error
    if (error.code, error.reason, dict(error.metadata), error.field) != (
            pb2.SolutionError.CODE_INVALID_ARGUMENT, want[0], want[2], "problem.sum_game.num"):
        sys.exit(f"crosscheck: the batch's error is {error}")


def main():
    server_bin, client_bin, problems_path = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        pb2, pb2_grpc = generate_stubs(tmp)
        problems, bad_lines = [], []
        with open(problems_path) as f:
            for number, line in enumerate(f, 1):
                problem = pb2.Problem()
                try:
                    json_format.Parse(line, problem)
                except json_format.ParseError:
                    bad_lines.append(number)
                    continue
                problem.id = problem.id or str(number)
                problems.append((number, problem))

        server = subprocess.Popen([server_bin, "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            addr = server.stdout.readline().strip().removeprefix("listening on ")
            with grpc.insecure_channel(addr) as channel:
                stub = pb2_grpc.GameSolverServiceStub(channel)
                only = [p for _, p in problems]
                unary = [stub.Solve(pb2.SolveRequest(problem=p), timeout=60).solution for p in only]
                batch = list(stub.SolveBatch(pb2.SolveBatchRequest(problems=only), timeout=60).solutions)
                requests = (pb2.SolveStreamRequest(problem=p) for p in only)
                stream = [r.solution for r in stub.SolveStream(requests, timeout=60)]
                batches = [pb2.SolveBatchStreamRequest(problems=only[i:i + 7]) for i in range(0, len(only), 7)]
                batch_stream = [s for b in stub.SolveBatchStream(iter(batches), timeout=60) for s in b.solutions]
                check_rich_errors(pb2, stub)
                for name, answers in [("SolveBatch", batch), ("SolveStream", stream),
                                      ("SolveBatchStream", batch_stream)]:
                    if answers != unary:
                        sys.exit(f"crosscheck: {name} disagrees with Solve")
        finally:
            server.terminate()
            server.wait(timeout=30)

        out = subprocess.run([client_bin, "solve", "--quiet", problems_path],
                             capture_output=True, text=True, timeout=120)
        lines = out.stdout.splitlines()
        by_line = dict(zip((n for n, _ in problems), unary))
        checked = 0
        for number, line in enumerate(lines, 1):
            solution = json_format.Parse(line, pb2.Solution())
            if number in by_line:
                if solution != by_line[number]:
                    sys.exit(f"crosscheck: line {number}: client wrote {line}, Python got {by_line[number]}")
                checked += 1
            elif not solution.HasField("error"):
                sys.exit(f"crosscheck: line {number} is not a problem but has no error: {line}")
        if len(lines) != len(problems) + len(bad_lines):
            sys.exit(f"crosscheck: {len(lines)} output lines for {len(problems) + len(bad_lines)} input lines")
        print(f"crosscheck: {checked} problems agree across Python grpcio (4 RPCs) and "
              f"gamesolver-client; {len(bad_lines)} bad line(s) kept their place")


if __name__ == "__main__":
    main()
