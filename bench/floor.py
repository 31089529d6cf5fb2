#!/usr/bin/env python3
"""Unary calls against the stack's floor: ghz runs of Solve and of grpc.health.v1 Check on
the production server and on the bare one (examples/bare_server.rs: the same service on a
plain tonic server, no production layers), interleaved round by round, so that every
ratio compares runs made under the same machine load.

For each run: requests/s, p50 and p99 latency (ghz's own figures) and the server's CPU
time a call (utime + stime from /proc/PID/stat over the run, divided by the calls). Prints
one row a run, then the medians and the ratios that docs/performance.md quotes:

- Solve / health on the production server (the layers' cost that Solve pays and health
  does not, plus the solving itself);
- production / bare, for each call (what the production layers cost).

Solve's data is 1,000 varied small problems (a third of each of Sum Game, Stone Game IX
and Stone Game IV, seeded), which ghz cycles through. Run by bench/floor.sh, which builds
the binaries and installs ghz; every process it starts listens on 127.0.0.1 and is stopped
by its PID.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

SVC = "gamesolver.v1.GameSolverService"
TICKS = os.sysconf("SC_CLK_TCK")


def solve_data(path, count=1000, seed=20290):
    """Writes `count` Solve requests, a third of each game, small and varied."""
    rng = random.Random(seed)
    requests = []
    for i in range(count):
        if i % 3 == 0:
            num = "".join("?" if rng.random() < 0.25 else str(rng.randrange(10))
                          for _ in range(2 * rng.randint(1, 8)))
            problem = {"id": f"s{i}", "sumGame": {"num": num}}
        elif i % 3 == 1:
            stones = [str(rng.randrange(1_000_000)) for _ in range(rng.randint(1, 8))]
            problem = {"id": f"s{i}", "stoneGameIx": {"stones": stones}}
        else:
            problem = {"id": f"s{i}", "stoneGameIv": {"n": str(rng.randint(1, 100_000))}}
        requests.append({"problem": problem})
    with open(path, "w") as f:
        json.dump(requests, f)


class Server:
    """A server binary on 127.0.0.1:0; its address comes from its `listening on` line."""

    def __init__(self, name, argv, work):
        self.name = name
        self.log = open(os.path.join(work, f"{name}.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.monotonic() + 30
        self.addr = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("listening on "):
                self.addr = line.split()[-1]
                break
        if self.addr is None:
            self.stop()
            raise SystemExit(f"floor.py: {name} did not print its address")

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def ghz(args, server, call_args, seconds, report):
    base = [args.ghz, "--insecure", "--connections", str(args.connections), "-c", str(args.concurrency)]
    # A discarded warm-up: connections made, tables grown, caches filled.
    subprocess.run([*base, *call_args, "-n", "2000", "-O", "json", "-o", os.devnull, server.addr],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    before = server.cpu_seconds()
    subprocess.run([*base, *call_args, "-z", f"{seconds}s", "--duration-stop=wait", "-O", "json",
                    "-o", report, server.addr], check=True, stdout=subprocess.DEVNULL, timeout=seconds + 60)
    cpu = server.cpu_seconds() - before
    with open(report) as f:
        r = json.load(f)
    codes = r.get("statusCodeDistribution", {})
    if set(codes) - {"OK"}:
        raise SystemExit(f"floor.py: {server.name}: calls not OK: {codes}")
    lat = {p["percentage"]: p["latency"] / 1e6 for p in r["latencyDistribution"]}
    return {"rps": r["rps"], "p50": lat[50], "p99": lat[99], "cpu_us": cpu / r["count"] * 1e6,
            "count": r["count"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--bare-bin", required=True)
    ap.add_argument("--ghz", required=True)
    ap.add_argument("--health-data", required=True, help="bench/data/health.json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--server-args", default="", help="extra flags for gamesolver-server")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="floor-")
    data = os.path.join(work, "solve-1000.json")
    solve_data(data)
    calls = {
        "health": ["--call", "grpc.health.v1.Health/Check", "-D", args.health_data],
        "solve": ["--call", f"{SVC}/Solve", "-D", data],
    }
    servers = []
    try:
        servers.append(Server("production", [args.server_bin, "--listen", "127.0.0.1:0",
                                             *args.server_args.split()], work))
        servers.append(Server("bare", [args.bare_bin, "127.0.0.1:0"], work))
        runs = [(s, c) for s in servers for c in calls]
        results = {(s.name, c): [] for s, c in runs}
        print("| round | server | call | rps | p50 ms | p99 ms | server CPU µs/call |")
        print("|---:|---|---|---:|---:|---:|---:|")
        for round_ in range(args.rounds):
            # Each round starts one run later, so that no pair always goes first.
            order = runs[round_ % len(runs):] + runs[:round_ % len(runs)]
            for server, call in order:
                report = os.path.join(work, f"{server.name}-{call}-{round_}.json")
                r = ghz(args, server, calls[call], args.seconds, report)
                results[(server.name, call)].append(r)
                print(f"| {round_ + 1} | {server.name} | {call} | {r['rps']:.0f} | {r['p50']:.2f} | "
                      f"{r['p99']:.2f} | {r['cpu_us']:.1f} |", flush=True)
    finally:
        for server in servers:
            server.stop()

    med = {key: {m: statistics.median(r[m] for r in rs) for m in ("rps", "p50", "p99", "cpu_us")}
           for key, rs in results.items()}
    print()
    print(f"Medians of {args.rounds} rounds, {args.seconds} s a run, ghz -c {args.concurrency} "
          f"--connections {args.connections}:")
    print()
    print("| server | call | rps | p50 ms | p99 ms | server CPU µs/call |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, call), m in med.items():
        print(f"| {name} | {call} | {m['rps']:.0f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['cpu_us']:.1f} |")
    print()
    print("| ratio | rps | p99 | server CPU a call |")
    print("|---|---:|---:|---:|")

    def ratio(label, a, b):
        print(f"| {label} | {med[a]['rps'] / med[b]['rps']:.3f} | {med[a]['p99'] / med[b]['p99']:.3f} | "
              f"{med[a]['cpu_us'] / med[b]['cpu_us']:.3f} |")

    ratio("production Solve / production health", ("production", "solve"), ("production", "health"))
    ratio("bare Solve / bare health", ("bare", "solve"), ("bare", "health"))
    ratio("production health / bare health", ("production", "health"), ("bare", "health"))
    ratio("production Solve / bare Solve", ("production", "solve"), ("bare", "solve"))
    ratio("production Solve / bare health", ("production", "solve"), ("bare", "health"))


if __name__ == "__main__":
    sys.exit(main())
