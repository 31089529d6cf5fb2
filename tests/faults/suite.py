#!/usr/bin/env python3
"""Faults on the wire: gamesolver-client and a grpcio unary client through Toxiproxy.

Loopback never drops, delays or cuts, so every call here goes through a Toxiproxy proxy
in front of a real gamesolver-server, and each case puts one toxic on it:

- a fault the client must ride out (latency, bandwidth, resets, slicing, a per-connection
  byte limit): the bulk client exits 0 and its output is byte-identical to an embedded
  run's;
- a permanent fault (a black hole, a byte limit too small for one answer), put on once
  the output has begun: the client exits 1 within --retry-for of the fault (it counts a
  silence with batches in flight as a failure, so a black hole is not left to its
  HTTP/2 keepalive); the toxic is then removed and --resume completes the same output,
  byte-identical;
- in every case, unary Solve calls with a 2 s deadline end OK (with the right answer),
  UNAVAILABLE or DEADLINE_EXCEEDED, never later than the deadline plus 1 s.

Prints one line a case and closes with `N passed, M failed`; exits 1 on any failure.
Every process it starts listens on 127.0.0.1 only and is stopped by its PID on the way
out (and killed with this process, through PR_SET_PDEATHSIG). Run by .ci/faults.sh,
which installs Toxiproxy, builds the binaries and makes the venv; docs/reliability-faults.md
says what each case asserts and why its numbers are what they are.

Usage: suite.py --server-bin B --client-bin B --toxiproxy-server B --toxiproxy-cli B
                --work DIR [--count N] [--only CASE ...]
"""
import argparse
import ctypes
import filecmp
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The children this suite starts fork from a process with grpcio loaded; with grpcio's fork
# handlers on, a child can abort in them before it execs (`ev_epoll1_linux.cc: Check
# failed: wakeup_fd_->Wakeup().ok()`, exit -6 in 0.0 s, one CI run). The children exec at
# once and use no gRPC of this process, so the handlers are not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402  (after the fork setting, which grpcio reads at import)

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository's Python package (clients/python), installed into the venv by .ci/faults.sh.
from gamesolver.v1 import gamesolver_pb2, gamesolver_pb2_grpc  # noqa: E402

# Retry period of the runs that must give up; short, so the suite stays under 5 minutes.
PERMANENT_RETRY_FOR = 8.0
# Slack for process start-up, backoff (at most 2 s) and the writer's drain (at most 5 s).
MARGIN = 8.0
# How much earlier than --retry-for after the fault the client may give up: it counts
# from its last answer, which the fault may find a moment old.
EARLY = 1.0
# The client's exit code when every server was given up on (README, "Exit codes").
GAVE_UP = 1
UNARY_DEADLINE = 2.0
UNARY_SLACK = 1.0
UNARY_CALLS = 4


def die_with_parent():
    """Children get SIGKILL if this process dies, whatever kills it."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process with its log; stopped by PID."""

    def __init__(self, name, argv, work, stdout=subprocess.DEVNULL):
        self.name = name
        self.log_path = os.path.join(work, f"{name}.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=stdout, stderr=self.log, stdin=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Toxiproxy:
    """toxiproxy-server on a loopback port, driven through toxiproxy-cli."""

    def __init__(self, server_bin, cli_bin, work):
        self.cli_bin = cli_bin
        port = free_port()
        self.api = f"http://127.0.0.1:{port}"
        self.process = Process("toxiproxy", [server_bin, "-host", "127.0.0.1", "-port", str(port),
                                             "-proxy-metrics"], work)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(self.api + "/version", timeout=1).read()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.proc.poll() is not None:
                    raise RuntimeError("toxiproxy-server did not start; see toxiproxy.log")
                time.sleep(0.1)

    def cli(self, *args):
        subprocess.run([self.cli_bin, "-h", self.api, *args], check=True, timeout=10,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response) if method == "GET" else response.read()

    def create(self, name, upstream):
        """A proxy on a free loopback port to `upstream`; returns its address."""
        self.cli("create", "--listen", "127.0.0.1:0", "--upstream", upstream, name)
        return self.request("GET", f"/proxies/{name}")["listen"]

    def wire_bytes(self):
        """Bytes through all proxies so far, by direction (upstream: client to server)."""
        with urllib.request.urlopen(self.api + "/metrics", timeout=10) as response:
            text = response.read().decode()
        total = {}
        for line in text.splitlines():
            if line.startswith("toxiproxy_proxy_sent_bytes_total{"):
                direction = line.split('direction="', 1)[1].split('"', 1)[0]
                total[direction] = total.get(direction, 0) + float(line.rsplit(" ", 1)[1])
        return total

    # Toxics go on and off through the HTTP API rather than toxiproxy-cli: a mid-stream
    # fault must land within the second that a whole run takes on loopback.
    def add(self, proxy, toxics):
        """Puts on toxics, each {"name", "type", "stream", "attributes"}."""
        for t in toxics:
            self.request("POST", f"/proxies/{proxy}/toxics", t)

    def clear(self, proxy):
        """Takes off every toxic."""
        for t in self.request("GET", f"/proxies/{proxy}/toxics"):
            self.request("DELETE", f"/proxies/{proxy}/toxics/{t['name']}")


def toxic(name, kind, stream, **attributes):
    return {"name": name, "type": kind, "stream": stream, "attributes": attributes}


def both_ways(name, kind, **attributes):
    return [toxic(f"{name}_down", kind, "downstream", **attributes),
            toxic(f"{name}_up", kind, "upstream", **attributes)]


class Case:
    """One fault: its toxics and what the bulk client must do under it.

    `permanent`: the client must give up (exit 1), then --resume must finish the output.
    `midstream`: the toxics go on once the output has begun, not before the run.
    `lasts`: seconds after which a mid-stream fault is taken off while the client runs on.
    `cuts`: the fault must have cut at least one connection (the client logs a retry).
    `client_args`: more flags for the bulk client.
    """

    def __init__(self, name, toxics, permanent=False, midstream=False, lasts=None, cuts=False, bound=60.0,
                 retry_for=60.0, client_args=()):
        self.name, self.toxics = name, toxics
        self.permanent, self.midstream, self.lasts, self.cuts = permanent, midstream, lasts, cuts
        self.client_args = list(client_args)
        self.bound, self.retry_for = bound, retry_for


class Suite:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.children = []
        self.passed, self.failed = 0, 0

    # --- set-up -------------------------------------------------------------------------

    def start(self):
        """The server, the proxy in front of it, the problems and the reference output."""
        server = Process("server", [self.args.server_bin, "--listen", "127.0.0.1:0"], self.work,
                         stdout=subprocess.PIPE)
        self.children.append(server)
        line = server.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"gamesolver-server printed {line!r}; see server.log")
        self.server_addr = line.split()[-1]
        self.toxiproxy = Toxiproxy(self.args.toxiproxy_server, self.args.toxiproxy_cli, self.work)
        self.children.append(self.toxiproxy.process)
        self.proxy_addr = self.toxiproxy.create("gamesolver", self.server_addr)
        print(f"faults: server {self.server_addr}, proxy {self.proxy_addr}, toxiproxy API {self.toxiproxy.api}",
              flush=True)

        self.input = os.path.join(self.work, "problems.jsonl")
        self.reference = os.path.join(self.work, "reference.jsonl")
        subprocess.run(["timeout", "60", self.args.client_bin, "gen", "--count", str(self.args.count), "--seed", "1",
                        "-o", self.input], check=True)
        started = time.monotonic()
        subprocess.run(["timeout", "120", self.args.client_bin, "solve", self.input, "-o", self.reference, "--quiet"],
                       check=True)
        print(f"faults: {self.args.count} problems, {os.path.getsize(self.input) / 1e6:.1f} MB in, "
              f"{os.path.getsize(self.reference) / 1e6:.1f} MB out; embedded run {time.monotonic() - started:.1f} s",
              flush=True)

        self.pb2, self.pb2_grpc = gamesolver_pb2, gamesolver_pb2_grpc
        self.request = self.pb2.SolveRequest(problem=self.pb2.Problem(
            id="unary", sum_game=self.pb2.SumGame(num="25??3?9?")))
        with grpc.insecure_channel(self.server_addr) as channel:
            self.expected = self.pb2_grpc.GameSolverServiceStub(channel).Solve(self.request, timeout=10)

    def stop(self):
        for child in reversed(self.children):
            child.stop()

    # --- the bulk client ----------------------------------------------------------------

    def solve(self, case, output, resume=False, retry_for=None, fault=None):
        """Runs the bulk client through the proxy, bounded by `timeout`; calls `fault`
        once the output has begun (it returns when the fault started). Returns (exit
        code, seconds from the fault, or from the start, to the exit, the reconnections
        the client logged)."""
        argv = [self.args.client_bin, "solve", self.input, "-o", output, "--server", f"http://{self.proxy_addr}",
                "--retry-for", str(retry_for or case.retry_for), *case.client_args]
        if resume:
            argv.append("--resume")
        log_path = os.path.join(self.work, f"client-{case.name}.log")
        log = open(log_path, "ab")
        logged = log.tell()
        started = time.monotonic()
        proc = subprocess.Popen(["timeout", "-k", "5", str(case.bound), *argv], stdout=subprocess.DEVNULL,
                                stderr=log, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        try:
            if fault is not None:
                fault_at = self.when_output_begins(proc, output, fault)
                # A permanent fault is timed from its start; any other run from its own.
                started = fault_at if case.permanent else started
            code = proc.wait(case.bound + 10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
        took = time.monotonic() - started
        with open(log_path, "rb") as log:
            log.seek(logged)
            retries = log.read().count(b"retrying in")
        return code, took, retries

    def when_output_begins(self, proc, output, fault):
        """Waits (20 s at most) for the first answers in `output`, then calls `fault`."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(output) and os.path.getsize(output) > 0:
                break
            time.sleep(0.001)
        fault()
        return time.monotonic()

    def identical(self, output):
        return os.path.exists(output) and filecmp.cmp(output, self.reference, shallow=False)

    def bulk(self, case):
        """The bulk client's checks for `case`; returns (ok, what happened)."""
        output = os.path.join(self.work, f"out-{case.name}.jsonl")
        if os.path.exists(output):
            os.remove(output)
        def put_on():
            self.toxiproxy.add("gamesolver", case.toxics)
            if case.lasts:
                time.sleep(case.lasts)
                self.toxiproxy.clear("gamesolver")

        try:
            if not case.midstream:
                put_on()
            code, took, retries = self.solve(case, output, fault=put_on if case.midstream else None)
        finally:
            self.toxiproxy.clear("gamesolver")
        same = self.identical(output)
        if not case.permanent:
            # A fault meant to cut connections that cut none tested nothing.
            ok = code == 0 and same and (retries > 0 or not case.cuts)
            return ok, (f"exit {code} in {took:.1f} s, {retries} reconnections, "
                        f"output {'identical' if same else 'DIFFERS'}")

        low, limit = case.retry_for - EARLY, case.retry_for + MARGIN
        partial = os.path.getsize(output) if os.path.exists(output) else 0
        gave_up = code == GAVE_UP and low <= took <= limit
        what = f"exit {code} {took:.1f} s after the fault (limit {low:.0f} to {limit:.0f} s), {partial / 1e6:.1f} MB written"
        code, resumed_in, _ = self.solve(case, output, resume=True)
        done = code == 0 and self.identical(output)
        what += f"; --resume exit {code} in {resumed_in:.1f} s, output {'identical' if self.identical(output) else 'DIFFERS'}"
        return gave_up and done, what

    # --- the unary client ---------------------------------------------------------------

    def unary(self, case):
        """Solve calls with a deadline through the toxics (fresh channels and one shared);
        each must end OK with the right answer, UNAVAILABLE or DEADLINE_EXCEEDED, within
        the deadline plus a second. Returns (ok, what happened)."""
        self.toxiproxy.add("gamesolver", case.toxics)
        codes, slowest, ok = {}, 0.0, True
        shared = grpc.insecure_channel(self.proxy_addr)
        try:
            for i in range(UNARY_CALLS):
                channel = shared if i % 2 else grpc.insecure_channel(self.proxy_addr)
                stub = self.pb2_grpc.GameSolverServiceStub(channel)
                started = time.monotonic()
                try:
                    answer = stub.Solve(self.request, timeout=UNARY_DEADLINE)
                    code = "OK" if answer == self.expected else "WRONG ANSWER"
                except grpc.RpcError as err:
                    code = err.code().name
                took = time.monotonic() - started
                if channel is not shared:
                    channel.close()
                slowest = max(slowest, took)
                codes[code] = codes.get(code, 0) + 1
                ok &= code in ("OK", "UNAVAILABLE", "DEADLINE_EXCEEDED") and took <= UNARY_DEADLINE + UNARY_SLACK
        finally:
            shared.close()
            self.toxiproxy.clear("gamesolver")
        summary = ", ".join(f"{n} {code}" for code, n in sorted(codes.items()))
        return ok, f"{summary}; slowest {slowest:.2f} s (deadline {UNARY_DEADLINE:.0f} s)"

    # --- the cases ----------------------------------------------------------------------

    def check(self, case, kind, result):
        ok, what = result
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"faults: {'PASS' if ok else 'FAIL'} {case.name:<12} {kind:<5} {what}", flush=True)

    def run(self, cases):
        for case in cases:
            started = time.monotonic()
            self.check(case, "bulk", self.bulk(case))
            self.check(case, "unary", self.unary(case))
            if case.name == "none":
                wire = self.toxiproxy.wire_bytes()
                print(f"faults:      on the wire without faults: {wire.get('upstream', 0) / 1e6:.1f} MB up, "
                      f"{wire.get('downstream', 0) / 1e6:.1f} MB down", flush=True)
            print(f"faults:      {case.name:<12} {time.monotonic() - started:.1f} s", flush=True)


def cases():
    """The toxics, tuned so that the suite stays under 5 minutes (docs/reliability-faults.md)."""
    return [
        Case("none", []),
        Case("latency", both_ways("latency", "latency", latency=200, jitter=100)),
        # 1 MB/s each way on the one connection: see the docs for the bytes on the wire.
        Case("bandwidth", both_ways("bandwidth", "bandwidth", rate=1000), client_args=["--connections", "1"]),
        # Toxiproxy's reset_peer drops the first bytes it sees and resets the connection:
        # on mid-stream for 3 s, every connection in that time is cut; then it comes off.
        Case("reset_peer", [toxic("reset_peer", "reset_peer", "downstream", timeout=0)], midstream=True, lasts=3.0,
             cuts=True),
        Case("slicer", both_ways("slicer", "slicer", average_size=128, size_variation=96, delay=20)),
        # Every connection is closed after 1 MB of answers.
        Case("limit_data", [toxic("limit_data", "limit_data", "downstream", bytes=1_000_000)], cuts=True),
        # Permanent: nothing gets through, and nothing is closed.
        Case("timeout", both_ways("timeout", "timeout", timeout=0), permanent=True, midstream=True,
             retry_for=PERMANENT_RETRY_FOR),
        # Permanent: every connection is closed before a single answer gets through.
        Case("limit_small", [toxic("limit_small", "limit_data", "downstream", bytes=1000)], permanent=True,
             midstream=True, retry_for=PERMANENT_RETRY_FOR),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--server-bin", "--client-bin", "--toxiproxy-server", "--toxiproxy-cli", "--work"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--only", nargs="*", help="run only these cases")
    args = parser.parse_args()
    # A SIGTERM (from `timeout`) unwinds through the finally below, which stops the children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    selected = [c for c in cases() if not args.only or c.name in args.only]
    suite = Suite(args)
    started = time.monotonic()
    try:
        suite.start()
        suite.run(selected)
    finally:
        suite.stop()
    print(f"faults: whole suite {time.monotonic() - started:.0f} s", flush=True)
    print(f"{suite.passed} passed, {suite.failed} failed", flush=True)
    sys.exit(1 if suite.failed else 0)


if __name__ == "__main__":
    main()
