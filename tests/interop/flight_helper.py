#!/usr/bin/env python3
"""Tests of gamesolver_client.flight, the Python helper Spark and Ray jobs call:

- a mixed table through two real servers answers exactly as one server answers it, in
  order, with and without ids (row numbers stand in, and are dropped from the answer);
- a server that is not there, one that answers with other ids, one that answers too few
  rows and one that ends the call: each is passed over, and the answers are still exact;
- with every server failing, GaveUp comes once ``retry_for`` has run out; with no server
  reached, once ``connect_deadline`` has (on a clock of the test's own), whose default is
  the bulk client's ``--connect-deadline`` default;
- a pandas DataFrame (``float64`` with ``NaN`` where a row is another game, lists, None)
  and a Polars DataFrame answer as the same pyarrow table does; a fraction is its row's
  ``NOT_UINT64``;
- ``signed=True`` gives signed answer columns; an empty table gets an empty answer with
  the answer's columns; an unknown game is refused before any call.

Usage: flight_helper.py SERVER_BIN  (needs pyarrow, pandas, polars and the package: pip
install './clients/python[flight]' pandas polars; gamesolver-client beside SERVER_BIN).
Every server started here is stopped by its PID.
"""
import math
import os
import re
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

from gamesolver_client import flight as helper


def start(binary):
    process = subprocess.Popen([binary, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    match = re.match(r"listening on (\S+)", line)
    if not match:
        process.kill()
        sys.exit(f"flight_helper.py: the server printed {line!r}")
    return process, match.group(1)


class Liar(flight.FlightServerBase):
    """A Flight server that answers wrongly in one way, or ends the call."""

    def __init__(self, how):
        super().__init__("grpc://127.0.0.1:0")
        self.how = how
        self.calls = 0

    def do_exchange(self, context, descriptor, reader, writer):
        self.calls += 1
        started = False
        for chunk in reader:
            batch = chunk.data
            if self.how == "end":
                raise flight.FlightUnavailableError("going away")
            rows = batch.num_rows - 1 if self.how == "short" else batch.num_rows
            ids = batch.column("id").slice(0, rows)
            if self.how == "ids":
                ids = pa.array(reversed(ids.to_pylist()), type=ids.type)
            answer = pa.record_batch({"id": ids, "alice_wins": pa.array([True] * rows)})
            if not started:
                writer.begin(answer.schema)
                started = True
            writer.write_batch(answer)


def problems(rows):
    """A mixed table: each row one game, a few bad rows among them."""
    nums, stones, ns, piles = [], [], [], []
    for i in range(rows):
        game = i % 4
        nums.append(("1?2?" if i % 7 else "1x") if game == 0 else None)
        stones.append([i % 5, 1, 2] if game == 1 else None)
        ns.append(i * 37 % 10000 if game == 2 else None)
        piles.append([i % 30, 4] if game == 3 else None)
    return pa.table({"num": pa.array(nums, pa.string()), "stones": pa.array(stones, pa.list_(pa.uint64())),
                     "n": pa.array(ns, pa.uint64()), "piles": pa.array(piles, pa.list_(pa.uint64()))})


class Clock:
    """A clock of the test's own for the helper: ``sleep`` moves it on at once, so that a
    deadline is checked by the seconds the helper counted, not by how long the run took."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def cli_connect_deadline(server_binary):
    """The default of ``gamesolver-client solve --connect-deadline``, from its help."""
    client = os.path.join(os.path.dirname(server_binary), "gamesolver-client")
    text = subprocess.run([client, "solve", "--help"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"--connect-deadline <SECONDS>.*?\[default: ([0-9.]+)\]", text, re.S)
    return float(match.group(1))


def frames(table):
    """``table`` (the mixed one of :func:`problems`) as pandas and Polars keep it: a pandas
    integer column with a missing value is float64 with NaN, lists are Python lists."""
    import pandas as pd
    import polars as pl
    columns = table.to_pydict()
    pandas = pd.DataFrame({
        "num": columns["num"],
        "stones": columns["stones"],
        "n": [math.nan if v is None else float(v) for v in columns["n"]],
        "piles": columns["piles"],
    })
    polars = pl.from_arrow(table).with_columns(pl.col("n").cast(pl.Float64).fill_null(math.nan))
    return pandas, polars


def check(condition, what):
    if not condition:
        sys.exit(f"flight_helper.py: FAIL: {what}")
    print(f"flight_helper.py: ok: {what}")


def main():
    binary = sys.argv[1]
    servers = [start(binary) for _ in range(2)]
    liars = {how: Liar(how) for how in ("ids", "short", "end")}
    for liar in liars.values():
        threading.Thread(target=liar.serve, daemon=True).start()
    try:
        (_, one), (_, two) = servers
        table = problems(5000)
        want = helper.solve_table(table, one, batch_rows=1000)
        check(want.num_rows == 5000 and "id" not in want.schema.names, "row numbers stand in for ids and are dropped")
        check(want.column("error_reason").null_count == 5000 - 5000 // 4 // 7 - 1,
              "the bad Sum Game rows are answered with their errors, the others solved")
        check(helper.solve_table(table, [one, two], batch_rows=700, window=3).equals(want),
              "two servers answer as one, in order")
        with_ids = table.append_column("id", pa.array([f"p{i}" for i in range(5000)]))
        answered = helper.solve_table(with_ids, [two, one], batch_rows=999)
        check(answered.column("id").equals(with_ids.column("id")), "ids come back in input order")
        for how, liar in liars.items():
            got = helper.solve_table(table, [f"127.0.0.1:{liar.port}", one], batch_rows=1000, retry_for=30)
            check(liar.calls >= 1, f"the liar ({how}) was asked")
            check(got.equals(want), f"a server that answers wrongly ({how}) is passed over")
        pandas, polars = frames(table)
        check(str(pandas["n"].dtype) == "float64" and pandas["n"].isna().sum() == 5000 - 5000 // 4,
              "the pandas frame holds n as float64 with NaN")
        check(helper.solve_table(pandas, one, batch_rows=1000).equals(want),
              "a pandas DataFrame (float64 with NaN) answers as the pyarrow table does")
        check(helper.solve_table(polars, [two, one], batch_rows=1000).equals(want),
              "a Polars DataFrame (Float64 with NaN) answers as the pyarrow table does")
        import pandas as pd
        fraction = helper.solve_table(pd.DataFrame({"n": [7.0, 7.5, math.nan]}), one, "stone_game_iv")
        check(fraction.column("error_reason").to_pylist() == [None, "NOT_UINT64", "NULL_INPUT"]
              and fraction.column("error_message")[1].as_py()
              == "stone game iv: n = 7.5 is not a uint64 (a whole number from 0 to 18446744073709551615)",
              "a fraction is its row's NOT_UINT64, naming the value; NaN is no value")
        try:
            helper.solve_table(table.to_pydict(), one)
            check(False, "a dict is refused")
        except TypeError as err:
            check("give a pyarrow Table, a pandas DataFrame or a Polars DataFrame" in str(err),
                  "what is no table is refused, naming what is taken")
        closed = f"127.0.0.1:{liars['end'].port}"
        got = helper.solve_table(table, ["127.0.0.1:1", one], batch_rows=1000)
        check(got.equals(want), "a server that is not there is passed over")
        started = time.monotonic()
        try:
            helper.solve_table(table, ["127.0.0.1:1", closed], retry_for=1)
            check(False, "GaveUp with every server failing")
        except helper.GaveUp:
            check(time.monotonic() - started < 60, "GaveUp once retry_for has run out, every server failing")
        check(helper.CONNECT_DEADLINE == cli_connect_deadline(binary),
              f"the helper's connect deadline is the CLI's default ({helper.CONNECT_DEADLINE} s)")
        clock, real_time = Clock(), helper.time
        helper.time = clock
        try:
            helper.solve_table(table, ["127.0.0.1:1", "127.0.0.1:2"], retry_for=3600)
            check(False, "GaveUp with no server reached")
        except helper.GaveUp as err:
            counted = clock.now - 1000.0
            check(helper.CONNECT_DEADLINE <= counted < helper.CONNECT_DEADLINE + 2.1,
                  f"no server reached: GaveUp after the connect deadline ({counted:.2f} s counted), "
                  "not retry_for")
            check(str(err).startswith(f"cannot reach any server within {helper.CONNECT_DEADLINE} s "
                                      "(connect_deadline): 127.0.0.1:1: ") and "127.0.0.1:2: " in str(err),
                  "GaveUp names the deadline and each server with why")
        finally:
            helper.time = real_time
        try:
            helper.solve_table(table, "127.0.0.1:1")
            check(False, "GaveUp on a wrong port")
        except helper.GaveUp:
            check(True, "a wrong port gives up with the default deadline")
        signed = helper.solve_table(table, one, signed=True)
        check(signed.schema.field("move_index").type == pa.int64() and signed.schema.field("nim_value").type == pa.int32(),
              "signed=True gives signed columns")
        empty = helper.solve_table(pa.table({"n": pa.array([], pa.uint64())}), one, "stone_game_iv")
        check(empty.num_rows == 0 and empty.schema.names == ["game", "alice_wins", "move_take", "error_reason", "error_message"],
              "an empty table gets an empty answer with the answer's columns")
        try:
            helper.solve_table(table, one, "chess")
            check(False, "an unknown game is refused")
        except ValueError as err:
            check("unknown game 'chess'" in str(err), "an unknown game is refused before any call")
    finally:
        for liar in liars.values():
            liar.shutdown()
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
