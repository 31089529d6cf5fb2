#!/usr/bin/env python3
"""Cross-check gamesolver from a second, independent client: Python grpcio and the
reference protobuf runtime (google.protobuf), stubs generated from the proto file.

- every line of the example file is parsed with json_format (the reference protobuf JSON
  mapping) and solved through Solve, SolveBatch, SolveStream and SolveBatchStream: the four
  RPCs must agree with each other;
- gamesolver-client's output for the same file must parse with json_format and equal the
  answers the Python client got.

Usage: crosscheck.py SERVER_BIN CLIENT_BIN PROBLEMS.jsonl  (needs grpcio, grpcio-tools)
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
                stub = pb2_grpc.GameSolverStub(channel)
                only = [p for _, p in problems]
                unary = [stub.Solve(p, timeout=60) for p in only]
                batch = list(stub.SolveBatch(pb2.ProblemBatch(problems=only), timeout=60).solutions)
                stream = list(stub.SolveStream(iter(only), timeout=60))
                batches = [pb2.ProblemBatch(problems=only[i:i + 7]) for i in range(0, len(only), 7)]
                batch_stream = [s for b in stub.SolveBatchStream(iter(batches), timeout=60) for s in b.solutions]
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
