#!/usr/bin/env python3
"""Runs a Spark or Ray job over a Parquet file against three gamesolver servers, kills one
of them mid-job, and checks that the job's answers equal the bulk client's.

    killed_server.py spark|ray SERVER_BIN PYTHON JOB INPUT.parquet REFERENCE.parquet WORK

SERVER_BIN is gamesolver-server, PYTHON the interpreter that has the job's packages, JOB
the example script (clients/python/examples/spark_job.py or ray_job.py), REFERENCE the
output of `gamesolver-client solve INPUT.parquet -o REFERENCE.parquet`. Each server runs
with a metrics port; the second one is killed (SIGKILL) once it has answered problems
and while the job still runs. The job must then finish by itself, exit 0, and write an
answer for every input row equal to the reference's, row by row after sorting by id.
Everything started here is stopped by its PID; each wait is bounded.
"""
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

JOB_TIMEOUT = 900
"""Seconds the job may take at most (the CI machine is slow and shared)."""
KILL_AFTER = 20000
"""Problems the victim answers before it is killed."""


def start_server(binary: str, work: str, index: int):
    out = open(os.path.join(work, f"server{index}.out"), "w+")
    log = open(os.path.join(work, f"server{index}.log"), "w")
    process = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                               stdout=out, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out.seek(0)
        text = out.read()
        grpc = re.search(r"^listening on (\S+)$", text, re.M)
        metrics = re.search(r"^metrics on (\S+)$", text, re.M)
        if grpc and metrics:
            return process, grpc.group(1), metrics.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    sys.exit(f"killed_server.py: server {index} printed no addresses")


def answered(metrics: str) -> int:
    """Problems the server has answered, from its /metrics."""
    try:
        text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
    except OSError:
        return 0
    return int(sum(float(value) for value in re.findall(r"^gamesolver_problems_total\{[^}]*\} (\S+)$", text, re.M)))


def signed(table: pa.Table) -> pa.Table:
    """The answers with signed integers, the game as text and in id order, as both sides can
    be compared."""
    columns = {}
    for field in table.schema:
        column = table.column(field.name)
        if pa.types.is_unsigned_integer(field.type):
            column = column.cast(pa.int64() if field.type.bit_width == 64 else pa.int32())
        elif pa.types.is_dictionary(field.type):
            column = column.cast(field.type.value_type)
        columns[field.name] = column
    table = pa.table(columns)
    return table.sort_by("id").combine_chunks()


def main() -> int:
    engine, binary, python, job, data, reference, work = sys.argv[1:8]
    servers = [start_server(binary, work, i) for i in range(3)]
    try:
        command = [python, job, data, os.path.join(work, f"{engine}-out")]
        for _, grpc, _ in servers:
            command += ["--server", grpc]
        # More partitions (blocks) than servers, so that every server gets some.
        command += ["--partitions" if engine == "spark" else "--blocks", "8"]
        job_log = open(os.path.join(work, f"{engine}-job.log"), "w")
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=job_log, stderr=subprocess.STDOUT)
        victim, _, victim_metrics = servers[1]
        killed_at = None
        while process.poll() is None and time.monotonic() - started < JOB_TIMEOUT:
            if killed_at is None and answered(victim_metrics) >= KILL_AFTER:
                victim.send_signal(signal.SIGKILL)
                killed_at = time.monotonic() - started
                print(f"killed_server.py: {engine}: server 2 killed after {killed_at:.1f} s, "
                      f"having answered at least {KILL_AFTER} problems", flush=True)
            time.sleep(0.2)
        if process.poll() is None:
            process.kill()
            process.wait()
            return fail(engine, work, f"the job did not finish within {JOB_TIMEOUT} s")
        took = time.monotonic() - started
        if process.returncode != 0:
            return fail(engine, work, f"the job exited {process.returncode}")
        if killed_at is None:
            return fail(engine, work, "the job finished before server 2 had answered enough to be killed")
        got = signed(ds.dataset(os.path.join(work, f"{engine}-out"), format="parquet").to_table())
        want = signed(pq.read_table(reference))
        if got.num_rows != want.num_rows:
            return fail(engine, work, f"{got.num_rows} answers for {want.num_rows} problems")
        for name in want.schema.names:
            if name not in got.schema.names:
                return fail(engine, work, f"the job's answers have no {name} column")
            theirs = got.column(name).cast(want.schema.field(name).type)
            if not theirs.equals(want.column(name)):
                differs = pc.invert(pc.equal(theirs, want.column(name)).fill_null(False))
                return fail(engine, work, f"column {name} differs from the reference on "
                                          f"{pc.sum(differs).as_py()} rows")
        print(f"killed_server.py: {engine}: {got.num_rows} answers equal the bulk client's, "
              f"job took {took:.1f} s with a server killed mid-job", flush=True)
        return 0
    finally:
        for process, _, _ in servers:
            if process.poll() is None:
                process.terminate()
        for process, _, _ in servers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def fail(engine: str, work: str, why: str) -> int:
    log = os.path.join(work, f"{engine}-job.log")
    tail = open(log).read()[-4000:] if os.path.exists(log) else ""
    print(f"killed_server.py: {engine}: FAIL: {why}\n--- job log (tail) ---\n{tail}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
