#!/usr/bin/env python3
"""Solves a Parquet file of problems with Ray Data, each block through gamesolver servers.

    python examples/ray_job.py INPUT.parquet OUTPUT_DIR --server HOST:PORT [--server ...]
        [--workers N] [--blocks N] [--winner-only]

``map_batches(batch_format="pyarrow")`` hands each block to
:func:`gamesolver_client.flight.solve_table`, which starts with a server of its own and
fails over to the others when one stops answering; the answers are written as Parquet to
OUTPUT_DIR. Needs ray[data] and the package with its ``flight`` extra:
pip install './clients/python[flight]' 'ray[data]'
"""
import argparse
import os

import pyarrow as pa
import ray

from gamesolver_client import flight


class Solver:
    """One per Ray worker process: each block starts with the next server in turn, from
    a place of the worker's own, so that blocks spread over the servers."""

    def __init__(self, servers, winner_only):
        self.servers, self.winner_only = servers, winner_only
        self.turn = os.getpid()

    def __call__(self, block: pa.Table) -> pa.Table:
        self.turn += 1
        first = self.turn % len(self.servers)
        servers = self.servers[first:] + self.servers[:first]
        return flight.solve_table(block, servers, "mixed", winner_only=self.winner_only, retry_for=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--server", action="append", required=True, help="a server; repeat for more")
    parser.add_argument("--winner-only", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=0,
                        help="split the rows into this many blocks first (0: as read)")
    args = parser.parse_args()

    ray.init(include_dashboard=False, log_to_driver=False)
    problems = ray.data.read_parquet(args.input)
    if args.blocks:
        problems = problems.repartition(args.blocks)
    # A solver mostly waits on its server: half a CPU each leaves the readers and writers
    # theirs (on 2 cores, whole CPUs for 2 solvers starve the Parquet read).
    answers = problems.map_batches(Solver, fn_constructor_args=(args.server, args.winner_only),
                                   batch_format="pyarrow", batch_size=65536, concurrency=args.workers,
                                   num_cpus=0.5)
    answers.write_parquet(args.output)
    ray.shutdown()


if __name__ == "__main__":
    main()
