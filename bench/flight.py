#!/usr/bin/env python3
"""The columnar door against the bulk path users had, what they would write instead, and the solver's own rate.

    bench/flight.py BIN_DIR SOLVE_RATE [--rows N] [--rounds R] [--batch-rows B] [--work DIR]
                    [--mixed] [--skip NAME ...] [--base BASE_BIN_DIR]

BIN_DIR holds gamesolver-server and gamesolver-client (the dist profile's, for figures),
SOLVE_RATE the solve_rate example's binary. It writes N Stone Game IV problems (n up to
10^6; default 10^7) as JSON lines and as Parquet with the same seed, starts one server,
and then, R rounds interleaved (default 5), after one warm-up round:

- jsonl: `gamesolver-client solve FILE.jsonl --server ADDR -o /dev/null`, the bulk path:
  JSON lines, protobuf batches, SolveBatchStream;
- flight: pyarrow.flight's DoExchange of the same rows as Arrow batches of B rows (default
  65,536), moves on, every answer read; one thread writes while the other reads;
- numpy: what a data engineer writes instead (Stone Game IV only): a P-position table and a
  move table to 10^6 in numpy, built once (not timed), then `~is_p[n]` and `take[n]`, two
  gathers, into an Arrow table of `alice_wins` and `move_take` with the move's validity;
- kernels: SOLVE_RATE --kernels on the Parquet file: the door's column kernels alone, no
  transport, one thread;
- in-process: SOLVE_RATE on the Parquet file: the row fan-out alone, no door;
- ceiling: the same exchange against bench/flight_ceiling.py, a pyarrow Flight server that
  solves nothing and answers each batch with one of the answer's shape and bytes, made once:
  what pyarrow.flight moves at all on this machine (Stone Game IV only); echo: the same
  server sending each problem batch back as it came;
- flight-base: with --base, the flight path against BASE_BIN_DIR's server, for an A/B in
  one run.

With --mixed the problems are the four games (`gen`'s default mix) and the exchange's
descriptor `mixed`; numpy is then skipped. It prints each round's problems/s and the
medians with the ratios of flight, flight-base, ceiling and kernels to numpy and the others. Needs pyarrow and
numpy. The server and every process it starts are stopped.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

from server_process import ServerProcess

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq


def jsonl_round(client, data, addr, rows):
    started = time.monotonic()
    subprocess.run([client, "solve", data, "--server", addr, "-o", "/dev/null", "--quiet"], check=True)
    return rows / (time.monotonic() - started)


def flight_round(addr, table, batch_rows, games):
    client = flight.FlightClient(f"grpc://{addr}")
    batches = table.to_batches(max_chunksize=batch_rows)
    started = time.monotonic()
    writer, reader = client.do_exchange(flight.FlightDescriptor.for_path(games))

    def write():
        writer.begin(table.schema)
        for batch in batches:
            writer.write_batch(batch)
        writer.done_writing()

    sender = threading.Thread(target=write)
    sender.start()
    answered = 0
    while answered < table.num_rows:
        answered += reader.read_chunk().data.num_rows
    took = time.monotonic() - started
    sender.join()
    writer.close()
    client.close()
    return table.num_rows / took


def in_process_round(solve_rate, parquet, *flags):
    out = subprocess.run([solve_rate, parquet, "--rounds", "1", *flags], check=True, capture_output=True,
                         text=True).stdout
    return float(re.search(r"([0-9.]+) problems/s", out).group(1))


def numpy_tables(limit):
    """The DIY tables to `limit`: whether each n is a P-position, and Alice's smallest winning
    square (0 where she has none), by the definition, a square at a time over the whole range."""
    is_p = np.zeros(limit + 1, dtype=bool)
    take = np.zeros(limit + 1, dtype=np.uint64)
    # n is a P-position iff no square move reaches one, decided in increasing n: each
    # P-position marks what it is a square away from, and a later (nearer) one overwrites
    # the move with its smaller square.
    winning = np.zeros(limit + 1, dtype=bool)
    squares = np.arange(1, int(limit ** 0.5) + 1, dtype=np.int64) ** 2
    for n in range(limit + 1):
        if not winning[n]:
            is_p[n] = True
            reach = n + squares
            reach = reach[reach <= limit]
            winning[reach] = True
            take[reach] = (reach - n).astype(np.uint64)
    return is_p, take


def numpy_round(tables, n):
    """The two gathers and the Arrow table they make: `alice_wins`, and `move_take` valid
    where Alice wins (the same packed bits as the validity, no copy of the gathered moves)."""
    is_p, take = tables
    started = time.monotonic()
    alice = ~is_p[n]
    moves = take[n]
    bits = pa.py_buffer(np.packbits(alice, bitorder="little"))
    answer = pa.table({
        "alice_wins": pa.BooleanArray.from_buffers(pa.bool_(), len(n), [None, bits]),
        "move_take": pa.Array.from_buffers(pa.uint64(), len(n), [bits, pa.py_buffer(moves)]),
    })
    took = time.monotonic() - started
    assert answer.num_rows == len(n)
    return len(n) / took


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin_dir")
    parser.add_argument("solve_rate")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-rows", type=int, default=65536)
    parser.add_argument("--work", default="target/bench-flight")
    parser.add_argument("--mixed", action="store_true", help="the four games, descriptor mixed")
    parser.add_argument("--skip", nargs="*", default=[], help="paths not to run: jsonl, flight, numpy, ...")
    parser.add_argument("--base", help="a second BIN_DIR whose server runs the flight-base path")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    client = os.path.join(args.bin_dir, "gamesolver-client")
    name = "mixed" if args.mixed else "iv"
    mix = [] if args.mixed else ["--mix", "iv=1", "--iv-n", "0..1000000"]
    jsonl = os.path.join(args.work, f"{name}-{args.rows}.jsonl")
    parquet = os.path.join(args.work, f"{name}-{args.rows}.parquet")
    for path in (jsonl, parquet):
        if not os.path.exists(path):
            subprocess.run([client, "gen", "--count", str(args.rows), "--seed", "3", *mix, "-o", path], check=True)
    table = pq.read_table(parquet)
    table = table.select([c for c in table.column_names if c != "id"])
    games = "mixed" if args.mixed else "stone_game_iv"
    skip = set(args.skip) | ({"numpy", "ceiling", "echo"} if args.mixed else set())
    if not args.base:
        skip.add("flight-base")
    diy = None
    if "numpy" not in skip:
        built = time.monotonic()
        diy = numpy_tables(1_000_000)
        print(f"numpy tables built in {time.monotonic() - built:.1f} s (not timed below)", flush=True)
        n = table.column("n").to_numpy()
    servers = {}
    here = os.path.dirname(os.path.abspath(__file__))
    commands = {
        "flight": [os.path.join(args.bin_dir, "gamesolver-server"), "--listen", "127.0.0.1:0"],
        "flight-base": [os.path.join(args.base or "", "gamesolver-server"), "--listen", "127.0.0.1:0"],
        "ceiling": [sys.executable, os.path.join(here, "flight_ceiling.py")],
        "echo": [sys.executable, os.path.join(here, "flight_ceiling.py"), "--echo"],
    }
    try:
        for name, argv in commands.items():
            if name == "flight" or name not in skip:
                servers[name] = ServerProcess(argv, os.path.join(args.work, f"{name}.log"), name=name)
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    addr = servers["flight"].addr
    paths = {
        "jsonl": lambda: jsonl_round(client, jsonl, addr, args.rows),
        "flight": lambda: flight_round(addr, table, args.batch_rows, games),
        "flight-base": lambda: flight_round(servers["flight-base"].addr, table, args.batch_rows, games),
        "ceiling": lambda: flight_round(servers["ceiling"].addr, table, args.batch_rows, games),
        "echo": lambda: flight_round(servers["echo"].addr, table, args.batch_rows, games),
        "numpy": lambda: numpy_round(diy, n),
        "kernels": lambda: in_process_round(args.solve_rate, parquet, "--kernels"),
        "in-process": lambda: in_process_round(args.solve_rate, parquet),
    }
    paths = {name: run for name, run in paths.items() if name not in skip}
    try:
        figures = {name: [] for name in paths}
        for round_ in range(args.rounds + 1):
            rates = {name: run() for name, run in paths.items()}
            label = "warm-up" if round_ == 0 else f"round {round_}"
            print(f"{label}: " + ", ".join(f"{name} {rate:,.0f}/s" for name, rate in rates.items()), flush=True)
            if round_:
                for name, rate in rates.items():
                    figures[name].append(rate)
        medians = {name: statistics.median(rates) for name, rates in figures.items()}
        print("medians: " + ", ".join(f"{name} {rate:,.0f} problems/s" for name, rate in medians.items()))
        ratios = [("flight", "jsonl"), ("flight", "numpy"), ("flight-base", "numpy"), ("ceiling", "numpy"),
                  ("echo", "numpy"), ("flight", "ceiling"), ("flight", "flight-base"), ("kernels", "numpy"),
                  ("flight", "in-process")]
        print(", ".join(f"{a}/{b} {medians[a] / medians[b]:.2f}x" for a, b in ratios if a in medians and b in medians))
    finally:
        for server in servers.values():
            server.stop()


if __name__ == "__main__":
    main()
