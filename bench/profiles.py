#!/usr/bin/env python3
"""Two builds of the binaries side by side: the throughput each gives, unary and bulk.

    bench/profiles.py A_DIR B_DIR [--rounds R] [--rows N] [--seconds S] [--work DIR]

A_DIR and B_DIR each hold gamesolver-server and gamesolver-client (for example
target/release and target/dist: `cargo build --release` and `cargo build --profile
dist`). Each round (R, default 5, after one warm-up round) starts A's server, measures,
stops it, then does the same with B's, so that the machine's drift falls on both:

- unary: ghz, `Solve` of small problems (bench/data/solve-fixed.json), 50 workers on one
  connection for S seconds (default 5): calls/s;
- bulk: `gamesolver-client solve FILE.jsonl --server ADDR -o /dev/null` of N problems
  (default 10^6, `gen --seed 3`): problems/s of the whole client process;
- columnar: the same problems as Parquet through the Flight door: problems/s.

The client is the build's own, as a user of that build would run it. It prints each
round's figures, then the medians and the ratios A/B. ghz comes from $GHZ or PATH
(bench/ghz-install.sh installs the pinned version). Every process it starts is stopped.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from server_process import ServerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def unary(ghz, addr, seconds):
    out = subprocess.run([ghz, "--insecure", "--call", "gamesolver.v1.GameSolverService/Solve",
                          "-D", os.path.join(ROOT, "bench/data/solve-fixed.json"), "-c", "50",
                          "-z", f"{seconds}s", "--duration-stop=wait", "--format", "json", addr],
                         check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    errors = sum(count for code, count in report.get("statusCodeDistribution", {}).items() if code != "OK")
    if errors:
        sys.exit(f"profiles.py: {errors} calls failed: {report['statusCodeDistribution']}")
    return report["rps"]


def bulk(client, data, addr, rows):
    started = time.monotonic()
    subprocess.run([client, "solve", data, "--server", addr, "-o", "/dev/null", "--quiet"], check=True)
    return rows / (time.monotonic() - started)


def one_build(bin_dir, ghz, data, args):
    server = ServerProcess([os.path.join(bin_dir, "gamesolver-server"), "--listen", "127.0.0.1:0"],
                           os.path.join(args.work, "server.log"))
    addr = server.addr
    client = os.path.join(bin_dir, "gamesolver-client")
    try:
        return {
            "unary calls/s": unary(ghz, addr, args.seconds),
            "bulk jsonl problems/s": bulk(client, data["jsonl"], addr, args.rows),
            "columnar parquet problems/s": bulk(client, data["parquet"], addr, args.rows),
        }
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a_dir")
    parser.add_argument("b_dir")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--work", default=os.path.join(ROOT, "target/bench-profiles"))
    args = parser.parse_args()
    ghz = os.environ.get("GHZ") or shutil.which("ghz")
    if not ghz:
        sys.exit("profiles.py: no ghz (set GHZ, or run bench/ghz-install.sh)")
    os.makedirs(args.work, exist_ok=True)
    data = {kind: os.path.join(args.work, f"small-{args.rows}.{kind}") for kind in ("jsonl", "parquet")}
    for path in data.values():
        if not os.path.exists(path):
            subprocess.run([os.path.join(args.b_dir, "gamesolver-client"), "gen", "--count", str(args.rows),
                            "--seed", "3", "-o", path], check=True)
    figures = {"A": {}, "B": {}}
    for round_ in range(args.rounds + 1):
        for name, bin_dir in (("A", args.a_dir), ("B", args.b_dir)):
            rates = one_build(bin_dir, ghz, data, args)
            label = "warm-up" if round_ == 0 else f"round {round_}"
            print(f"{label} {name}: " + ", ".join(f"{what} {rate:,.0f}" for what, rate in rates.items()), flush=True)
            if round_:
                for what, rate in rates.items():
                    figures[name].setdefault(what, []).append(rate)
    print(f"A = {args.a_dir}, B = {args.b_dir}; medians of {args.rounds} rounds:")
    for what in figures["A"]:
        a, b = statistics.median(figures["A"][what]), statistics.median(figures["B"][what])
        print(f"  {what}: A {a:,.0f}, B {b:,.0f}, A/B {a / b:.3f}")


if __name__ == "__main__":
    main()
