#!/usr/bin/env python3
"""The columnar door against the bulk path users had, and against the solver's own rate.

    bench/flight.py BIN_DIR SOLVE_RATE [--rows N] [--rounds R] [--batch-rows B] [--work DIR]

BIN_DIR holds gamesolver-server and gamesolver-client (the dist profile's, for figures),
SOLVE_RATE the solve_rate example's binary. It writes N Stone Game IV problems (n up to
10^6; default 10^7) as JSON lines and as Parquet with the same seed, starts one server,
and then, R rounds interleaved (default 5), after one warm-up round:

- jsonl: `gamesolver-client solve FILE.jsonl --server ADDR -o /dev/null`, the bulk path:
  JSON lines, protobuf batches, SolveBatchStream;
- flight: pyarrow.flight's DoExchange of the same rows as Arrow batches of B rows (default
  65,536), moves on, every answer read; one thread writes while the other reads;
- in-process: SOLVE_RATE on the Parquet file: the fan-out alone, no door (the limit).

It prints each round's problems/s and the medians with the ratios flight/jsonl and
flight/in-process. Needs pyarrow. The server and every process it starts are stopped.
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

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq


def jsonl_round(client, data, addr, rows):
    started = time.monotonic()
    subprocess.run([client, "solve", data, "--server", addr, "-o", "/dev/null", "--quiet"], check=True)
    return rows / (time.monotonic() - started)


def flight_round(addr, table, batch_rows):
    client = flight.FlightClient(f"grpc://{addr}")
    batches = table.to_batches(max_chunksize=batch_rows)
    started = time.monotonic()
    writer, reader = client.do_exchange(flight.FlightDescriptor.for_path("stone_game_iv"))

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


def in_process_round(solve_rate, parquet):
    out = subprocess.run([solve_rate, parquet, "--rounds", "1"], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"([0-9.]+) problems/s", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin_dir")
    parser.add_argument("solve_rate")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-rows", type=int, default=65536)
    parser.add_argument("--work", default="target/bench-flight")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    client = os.path.join(args.bin_dir, "gamesolver-client")
    jsonl = os.path.join(args.work, f"iv-{args.rows}.jsonl")
    parquet = os.path.join(args.work, f"iv-{args.rows}.parquet")
    for path in (jsonl, parquet):
        if not os.path.exists(path):
            subprocess.run([client, "gen", "--count", str(args.rows), "--seed", "3", "--mix", "iv=1",
                            "--iv-n", "0..1000000", "-o", path], check=True)
    table = pq.read_table(parquet, columns=["n"])
    server = ServerProcess([os.path.join(args.bin_dir, "gamesolver-server"), "--listen", "127.0.0.1:0"],
                           os.path.join(args.work, "server.log"))
    addr = server.addr
    try:
        figures = {"jsonl": [], "flight": [], "in-process": []}
        for round_ in range(args.rounds + 1):
            rates = {
                "jsonl": jsonl_round(client, jsonl, addr, args.rows),
                "flight": flight_round(addr, table, args.batch_rows),
                "in-process": in_process_round(args.solve_rate, parquet),
            }
            label = "warm-up" if round_ == 0 else f"round {round_}"
            print(f"{label}: " + ", ".join(f"{name} {rate:,.0f}/s" for name, rate in rates.items()), flush=True)
            if round_:
                for name, rate in rates.items():
                    figures[name].append(rate)
        medians = {name: statistics.median(rates) for name, rates in figures.items()}
        print("medians: " + ", ".join(f"{name} {rate:,.0f} problems/s" for name, rate in medians.items()))
        print(f"flight/jsonl {medians['flight'] / medians['jsonl']:.2f}x, "
              f"flight/in-process {medians['flight'] / medians['in-process']:.2f}x")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
