#!/usr/bin/env python3
"""Asks a gamesolver server for one answer and prints the winner and move.

    python examples/solve.py [--server 127.0.0.1:50051] [--num '25??']

The problem is a Sum Game; a bad string such as 12x4 shows the rich error details.
Needs the package: pip install ./clients/python
"""
import argparse
import sys

import grpc
from gamesolver.v1 import gamesolver_pb2 as pb, gamesolver_pb2_grpc
from gamesolver_client import richerror


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051", help="the server's address (plaintext)")
    parser.add_argument("--num", default="25??", help="the Sum Game string: digits and '?', even length")
    args = parser.parse_args()

    with grpc.insecure_channel(args.server) as channel:
        stub = gamesolver_pb2_grpc.GameSolverServiceStub(channel)
        request = pb.SolveRequest(problem=pb.Problem(id="example", sum_game=pb.SumGame(num=args.num)))
        try:
            solution = stub.Solve(request, timeout=10).solution
        except grpc.RpcError as call:
            error = richerror.parse(call)
            print(f"solve: {error}, metadata {error.metadata}", file=sys.stderr)
            return 1
    print("winner:", pb.Winner.Name(solution.winner))
    if solution.winning_move.HasField("sum_game"):
        move = solution.winning_move.sum_game
        print(f"move: write {move.digit} at index {move.index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
