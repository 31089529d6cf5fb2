#!/usr/bin/env python3
"""Cross-check gamesolver from a second, independent client: Python grpcio and the
reference protobuf runtime (google.protobuf), through the repository's Python package
(clients/python: the generated gamesolver.v1 stubs and gamesolver_client.richerror).

- every line of the example file is parsed with json_format (the reference protobuf JSON
  mapping) and solved through Solve, SolveBatch, SolveStream and SolveBatchStream: the four
  RPCs must agree with each other;
- a bad problem's status must carry google.rpc ErrorInfo and BadRequest details, and its
  batch solution the same reason, field and metadata;
- gamesolver-client's output for the same file must parse with json_format and equal the
  answers the Python client got.

Usage: crosscheck.py SERVER_BIN CLIENT_BIN PROBLEMS.jsonl  (needs the package installed:
pip install ./clients/python)
"""
import select
import subprocess
import sys

import grpc
from google.protobuf import json_format

from gamesolver.v1 import gamesolver_pb2 as pb2, gamesolver_pb2_grpc as pb2_grpc
from gamesolver_client import richerror


def check_rich_errors(stub):
    """A bad problem's status carries google.rpc ErrorInfo and BadRequest details (read
    with the package's richerror), and the same reason, field and metadata in a batch
    solution."""
    bad = pb2.Problem(id="bad", sum_game=pb2.SumGame(num="12x4"))
    try:
        stub.Solve(pb2.SolveRequest(problem=bad), timeout=60)
        sys.exit("crosscheck: a bad problem was answered")
    except grpc.RpcError as call:
        error = richerror.parse(call)
    want = pb2.SolutionError(code=pb2.SolutionError.CODE_INVALID_ARGUMENT, reason="INVALID_CHARACTER",
                             field="problem.sum_game.num", metadata={"index": "2", "character": "x"})
    if not error.message or not error.description:
        sys.exit(f"crosscheck: the status lacks a message or a field description: {error!r}")
    unary = error.solution_error()
    unary.ClearField("message")
    if unary != want:
        sys.exit(f"crosscheck: the status reads as {unary}, expected {want}")
    batch = stub.SolveBatch(pb2.SolveBatchRequest(problems=[bad]), timeout=60).solutions[0].error
    batch.ClearField("message")
    if batch != want:
        sys.exit(f"crosscheck: the batch's error is {batch}, expected {want}")


def main():
    server_bin, client_bin, problems_path = sys.argv[1:4]
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
        if not select.select([server.stdout], [], [], 30)[0]:
            sys.exit("crosscheck: the server printed no address within 30 s")
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
            check_rich_errors(stub)
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
