#!/usr/bin/env python3
"""Unary calls against the stack's floor: ghz runs of Solve and of grpc.health.v1 Check on
the production server and on the bare one (examples/bare_server.rs: the same service on a
plain tonic server, no production layers), interleaved round by round, so that every
ratio compares runs made under the same machine load.

For each run: requests/s, p50 and p99 latency (ghz's own figures), the server's CPU time a
call (utime + stime from /proc/PID/stat over the run, divided by the calls), its context
switches a call (all its threads, /proc/PID/task/*/status) and ghz's own CPU time a call.
Prints one row a run, then the medians and the ratios that docs/performance.md quotes:

- Solve / health on the production server (the layers' cost that Solve pays and health
  does not, the solving itself and, free-running, the different rates ghz sends them at);
- production / bare, for each call (what the production layers cost).

With `--rps R`, every run is held to R calls a second (ghz's own limiter, the same flag
for every run), so that the server's CPU a call compares at equal arrival rates: it rises
when calls arrive more slowly (fewer calls a wakeup), and ghz, which shares the machine's
cores, sets the rate of the free-running runs. Pick R below what every run reaches.

Solve's data is 1,000 varied small problems (a third of each of Sum Game, Stone Game IX
and Stone Game IV, seeded), which ghz cycles through. Run by bench/floor.sh, which builds
the binaries and installs ghz; every process it starts listens on 127.0.0.1 and is stopped
by its PID.
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile

from server_process import ServerProcess

SVC = "gamesolver.v1.GameSolverService"


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


def start_server(name, argv, work):
    """A server binary on 127.0.0.1:0, logging to WORK/NAME.log."""
    try:
        return ServerProcess(argv, os.path.join(work, f"{name}.log"), name=name)
    except RuntimeError as err:
        raise SystemExit(f"floor.py: {err}")


def ghz(args, server, call_args, seconds, report):
    base = [args.ghz, "--insecure", "--connections", str(args.connections), "-c", str(args.concurrency)]
    # A discarded warm-up: connections made, tables grown, caches filled.
    subprocess.run([*base, *call_args, "-n", "2000", "-O", "json", "-o", os.devnull, server.addr],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    rate = ["--rps", str(args.rps)] if args.rps else []
    before = server.cpu_seconds(), server.context_switches(), children_cpu_seconds()
    subprocess.run([*base, *call_args, *rate, "-z", f"{seconds}s", "--duration-stop=wait", "-O", "json",
                    "-o", report, server.addr], check=True, stdout=subprocess.DEVNULL, timeout=seconds + 60)
    cpu, switches, ghz_cpu = (after - b for after, b in zip(
        (server.cpu_seconds(), server.context_switches(), children_cpu_seconds()), before))
    with open(report) as f:
        r = json.load(f)
    codes = r.get("statusCodeDistribution", {})
    if set(codes) - {"OK"}:
        raise SystemExit(f"floor.py: {server.name}: calls not OK: {codes}")
    lat = {p["percentage"]: p["latency"] / 1e6 for p in r["latencyDistribution"]}
    count = r["count"]
    return {"rps": r["rps"], "p50": lat[50], "p99": lat[99], "cpu_us": cpu / count * 1e6,
            "switches": switches / count, "ghz_us": ghz_cpu / count * 1e6, "count": count}


def children_cpu_seconds():
    """CPU time of the children that have ended (the ghz runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
    ap.add_argument("--rps", type=int, default=0,
                    help="hold every run to this many calls a second (0: as fast as ghz goes)")
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
        servers.append(start_server("production", [args.server_bin, "--listen", "127.0.0.1:0",
                                                   *args.server_args.split()], work))
        servers.append(start_server("bare", [args.bare_bin, "127.0.0.1:0"], work))
        runs = [(s, c) for s in servers for c in calls]
        results = {(s.name, c): [] for s, c in runs}
        print("| round | server | call | rps | p50 ms | p99 ms | server CPU µs/call | switches/call "
              "| ghz CPU µs/call |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
        for round_ in range(args.rounds):
            # Each round starts one run later, so that no pair always goes first.
            order = runs[round_ % len(runs):] + runs[:round_ % len(runs)]
            for server, call in order:
                report = os.path.join(work, f"{server.name}-{call}-{round_}.json")
                r = ghz(args, server, calls[call], args.seconds, report)
                results[(server.name, call)].append(r)
                print(f"| {round_ + 1} | {server.name} | {call} | {r['rps']:.0f} | {r['p50']:.2f} | "
                      f"{r['p99']:.2f} | {r['cpu_us']:.1f} | {r['switches']:.3f} | {r['ghz_us']:.0f} |",
                      flush=True)
    finally:
        for server in servers:
            server.stop()

    metrics = ("rps", "p50", "p99", "cpu_us", "switches", "ghz_us")
    med = {key: {m: statistics.median(r[m] for r in rs) for m in metrics} for key, rs in results.items()}
    print()
    held = f", every run held to {args.rps} calls/s" if args.rps else ""
    print(f"Medians of {args.rounds} rounds, {args.seconds} s a run, ghz -c {args.concurrency} "
          f"--connections {args.connections}{held}:")
    print()
    print("| server | call | rps | p50 ms | p99 ms | server CPU µs/call | switches/call | ghz CPU µs/call |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (name, call), m in med.items():
        print(f"| {name} | {call} | {m['rps']:.0f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['cpu_us']:.1f} | "
              f"{m['switches']:.3f} | {m['ghz_us']:.0f} |")
    if args.rps:
        slow = [f"{name} {call} round {i + 1} ({r['rps']:.0f})" for (name, call), rs in results.items()
                for i, r in enumerate(rs) if r["rps"] < 0.98 * args.rps]
        print()
        print(f"Runs below 98% of {args.rps} calls/s: {', '.join(slow) if slow else 'none'}")
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

    # The same ratio round by round: each compares two runs a few seconds apart.
    print()
    print("Round by round, production Solve / production health (median):")
    print()
    pairs = list(zip(results[("production", "solve")], results[("production", "health")]))
    for label, m in (("rps", "rps"), ("p99", "p99"), ("server CPU a call", "cpu_us")):
        ratios = [solve[m] / health[m] for solve, health in pairs]
        print(f"- {label}: {' '.join(f'{r:.3f}' for r in ratios)} ({statistics.median(ratios):.3f})")


if __name__ == "__main__":
    sys.exit(main())
