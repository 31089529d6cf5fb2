#!/usr/bin/env python3
"""Files as data tools write them, each solved by gamesolver-client as written, with answers
equal to the JSON lines path's for the same problems.

    writers.py CLIENT_BIN WORK

Writers, each with its own types for the same problems (one game a row, the other game
columns missing):

- pandas ``to_parquet`` and ``to_csv``: ``n`` is float64 with NaN (pandas' type for an
  integer column with a missing value), written ``7.0`` and ``1e+19`` in the CSV; lists as
  Python lists (``[1, 2]``) and numpy arrays (``[1 2]``);
- Polars ``write_parquet`` (UInt64, List(UInt64)) and ``write_csv`` (a Float64 ``n`` with
  NaN; Polars writes no lists to CSV);
- DuckDB ``COPY ... TO ... (FORMAT parquet)`` (UBIGINT, UBIGINT[]);
- Spark ``df.write.parquet`` (``decimal(20,0)``, Spark's type for a uint64, and arrays of
  it), the one part file of its output directory.

Stones and ``n`` reach 2^64 - 1 where the writer's types hold them (Polars, DuckDB,
Spark); pandas holds list items below 2^63 and a float's ``n`` exactly only where its value
is a float, so its problems keep to those. Each file's answers (JSON lines) must equal the
reference's, row for row. Needs pandas, polars, duckdb, pyspark and Java 17.
"""
import decimal
import glob
import json
import math
import os
import random
import subprocess
import sys
import time

import duckdb
import numpy as np
import pandas as pd
import polars as pl

ROWS = 4000
"""Problems a file: every game, every shape of value, in a few seconds a writer."""
BIG_FLOATS = (9_500_000_000_000_000_000, 10**19, 15 * 10**18, 18 * 10**18)
"""Values of ``n`` from 2^63 up that a float holds exactly and that pandas' CSV writes with
the same digits (``1e+19``): a float above 2^53 is written in its shortest form, whose
digits may name another integer than the float's value, and a CSV is read by its digits."""


def problems(seed, full_range):
    """``ROWS`` problems, a game a row: ``(id, game, value)``; ``full_range`` draws stones and
    ``n`` up to 2^64 - 1, else within what pandas holds exactly."""
    draw = random.Random(seed)
    top = 2**64 if full_range else 2**63
    rows = []
    for i in range(ROWS):
        game = i % 4
        if game == 0:
            value = "".join(draw.choice("0123456789?") for _ in range(2 * draw.randrange(1, 8)))
        elif game == 1:
            value = [draw.randrange(top) for _ in range(draw.randrange(0, 9))]
        elif game == 2:
            if i % 32 != 2:
                value = draw.randrange(0, 1_000_001)
            elif full_range:
                value = 2**64 - 1 if i == 2 else draw.randrange(2**63, 2**64)
            else:
                value = draw.choice(BIG_FLOATS)
        else:
            value = [draw.randrange(0, 10_001) for _ in range(draw.randrange(0, 5))]
        rows.append((f"p{i}", ("num", "stones", "n", "piles")[game], value))
    return rows


def json_lines(rows, path):
    """The problems as JSON lines, 64-bit numbers as strings (the proto's JSON mapping)."""
    fields = {"num": ("sumGame", "num"), "stones": ("stoneGameIx", "stones"), "n": ("stoneGameIv", "n"),
              "piles": ("nimSquare", "piles")}
    with open(path, "w") as out:
        for id_, column, value in rows:
            game, field = fields[column]
            if isinstance(value, list):
                value = [str(v) for v in value]
            elif isinstance(value, int):
                value = str(value)
            out.write(json.dumps({"id": id_, game: {field: value}}) + "\n")


def column(rows, name):
    """One game column: the row's value where the row is that game, else None."""
    return [value if column_name == name else None for _, column_name, value in rows]


def pandas_frame(rows):
    """As pandas holds it: ``n`` float64 with NaN, stones Python lists, piles numpy arrays."""
    return pd.DataFrame({
        "id": [id_ for id_, _, _ in rows],
        "num": column(rows, "num"),
        "stones": column(rows, "stones"),
        "n": [math.nan if v is None else float(v) for v in column(rows, "n")],
        "piles": [None if v is None else np.array(v, dtype=np.uint64) for v in column(rows, "piles")],
    })


def polars_frame(rows):
    return pl.DataFrame({
        "id": [id_ for id_, _, _ in rows],
        "num": column(rows, "num"),
        "stones": column(rows, "stones"),
        "n": column(rows, "n"),
        "piles": column(rows, "piles"),
    }, schema={"id": pl.String, "num": pl.String, "stones": pl.List(pl.UInt64), "n": pl.UInt64,
               "piles": pl.List(pl.UInt64)})


def spark_parquet(rows, directory):
    """Spark's own Parquet of the problems as a Spark job holds them, ``decimal(20,0)``;
    the path of the one part file it writes."""
    from pyspark.sql import SparkSession
    from pyspark.sql.types import ArrayType, DecimalType, StringType, StructField, StructType
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[1]").appName("writers")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        uint64 = DecimalType(20, 0)
        schema = StructType([StructField("id", StringType()), StructField("num", StringType()),
                             StructField("stones", ArrayType(uint64)), StructField("n", uint64),
                             StructField("piles", ArrayType(uint64))])
        big = lambda v: None if v is None else decimal.Decimal(v)  # noqa: E731
        lists = lambda v: None if v is None else [decimal.Decimal(x) for x in v]  # noqa: E731
        data = [(id_, value if game == "num" else None, lists(value if game == "stones" else None),
                 big(value if game == "n" else None), lists(value if game == "piles" else None))
                for id_, game, value in rows]
        spark.createDataFrame(data, schema).coalesce(1).write.mode("overwrite").parquet(directory)
    finally:
        spark.stop()
    parts = glob.glob(os.path.join(directory, "part-*.parquet"))
    if len(parts) != 1:
        sys.exit(f"writers.py: Spark wrote {parts} into {directory}; expected one part")
    return parts[0]


def comparable(answer):
    """An answer as a table run gives it back: a table of answers carries an error's code,
    reason and message, not its field and metadata, so a JSON line written from a table
    has none (the JSON lines path's has them)."""
    if "error" in answer:
        answer = dict(answer, error={k: v for k, v in answer["error"].items() if k not in ("field", "metadata")})
    return answer


def solve(client, path, out):
    """``gamesolver-client solve PATH -o OUT``: exit 0, or 1 when some rows are errors; the
    answers, :func:`comparable`."""
    done = subprocess.run([client, "solve", path, "-o", out, "--quiet"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"writers.py: FAIL: solve {path} exited {done.returncode}: {done.stderr.strip()}")
    with open(out) as lines:
        return [comparable(json.loads(line)) for line in lines]


def main():
    client, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    path = lambda name: os.path.join(work, name)  # noqa: E731
    sets = {"pandas": problems(5, full_range=False), "full": problems(6, full_range=True)}
    # Polars' CSV holds no lists: its frame has the Sum Game and Stone Game IV rows, n as
    # floats with NaN (as a frame computed in floats holds it), exact where pandas' are.
    sets["polars-csv"] = [row for row in sets["pandas"] if row[1] in ("num", "n")]
    references = {}
    for name, rows in sets.items():
        json_lines(rows, path(f"{name}.jsonl"))
        references[name] = solve(client, path(f"{name}.jsonl"), path(f"{name}.answers.jsonl"))

    started = time.monotonic()
    files = []
    frame = pandas_frame(sets["pandas"])
    assert str(frame["n"].dtype) == "float64", frame.dtypes
    frame.to_parquet(path("pandas.parquet"))
    files.append(("pandas to_parquet", path("pandas.parquet"), "pandas"))
    frame.to_csv(path("pandas.csv"), index=False)
    files.append(("pandas to_csv", path("pandas.csv"), "pandas"))

    polars = polars_frame(sets["full"])
    polars.write_parquet(path("polars.parquet"))
    files.append(("Polars write_parquet", path("polars.parquet"), "full"))
    floats = pl.DataFrame({
        "id": [id_ for id_, _, _ in sets["polars-csv"]],
        "num": column(sets["polars-csv"], "num"),
        "n": [math.nan if v is None else float(v) for v in column(sets["polars-csv"], "n")],
    })
    floats.write_csv(path("polars.csv"))
    files.append(("Polars write_csv", path("polars.csv"), "polars-csv"))

    arrow = polars.to_arrow()  # noqa: F841 - read by DuckDB's replacement scan below
    duckdb.sql(f"COPY (SELECT id, num, stones, n, piles FROM arrow) TO '{path('duckdb.parquet')}' (FORMAT parquet)")
    files.append(("DuckDB COPY TO (FORMAT parquet)", path("duckdb.parquet"), "full"))

    files.append(("Spark df.write.parquet", spark_parquet(sets["full"], path("spark")), "full"))
    written = time.monotonic() - started

    for writer, file, name in files:
        got = solve(client, file, path(os.path.basename(file) + ".answers.jsonl"))
        want = references[name]
        if got != want:
            differ = sum(1 for a, b in zip(got, want) if a != b) + abs(len(got) - len(want))
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            sys.exit(f"writers.py: FAIL: {writer} ({file}): {differ} answers differ from the JSON lines "
                     f"path's; the first, row {first}: {got[first] if first < len(got) else None} "
                     f"against {want[first] if first < len(want) else None}")
        errors = sum(1 for answer in got if "error" in answer)
        print(f"writers.py: {writer}: {len(got)} answers equal the JSON lines path's "
              f"({errors} of them errors, as there)", flush=True)
    print(f"writers.py: {len(files)} writers' files solved as written (writing them took {written:.1f} s)")


if __name__ == "__main__":
    main()
