#!/usr/bin/env python3
"""Solves a Parquet file of problems on Spark, each partition through gamesolver servers.

    python examples/spark_job.py INPUT.parquet OUTPUT_DIR --server HOST:PORT [--server ...]
        [--master local[2]] [--partitions N] [--winner-only]

Each partition streams its rows to a server with ``DataFrame.mapInArrow`` and
:func:`gamesolver_client.flight.solve_batches`, starting with a different server a
partition, and fails over to the others when one stops answering; the answers are
written as Parquet to OUTPUT_DIR. Spark has no unsigned types: it reads a Parquet uint64
as ``decimal(20,0)``, which holds every value up to 2^64 - 1 and which the server reads
as it is (as it reads any integer, float or decimal type holding whole numbers), so the
game columns are sent as Spark holds them; the answers come back signed
(``signed=True``). Needs pyspark and the package with its ``flight`` extra:
pip install './clients/python[flight]' pyspark
"""
import argparse
import os
import sys

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, IntegerType, LongType, StringType, StructField,
                               StructType)

from gamesolver_client import flight

INPUTS = ("num", "stones", "n", "piles")
"""Each game's input column, sent as Spark holds it: a cast to ``bigint`` would fail on
values of 2^63 and above (``CAST_OVERFLOW``)."""


def answer_schema(id_type) -> StructType:
    """The answers of the ``mixed`` descriptor, as Spark types."""
    return StructType([
        StructField("id", id_type),
        StructField("game", StringType()),
        StructField("alice_wins", BooleanType()),
        StructField("move_index", LongType()),
        StructField("move_digit", IntegerType()),
        StructField("move_pile", LongType()),
        StructField("move_take", LongType()),
        StructField("nim_value", IntegerType()),
        StructField("error_reason", StringType()),
        StructField("error_message", StringType()),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--server", action="append", required=True, help="a server; repeat for more")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--winner-only", action="store_true")
    parser.add_argument("--partitions", type=int, default=0,
                        help="spread the rows over this many partitions first (0: as read)")
    args = parser.parse_args()

    # The workers run this interpreter, which has the package (a cluster sets its own).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(args.master).appName("gamesolver")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
             .config("spark.ui.enabled", "false").getOrCreate())
    problems = spark.read.parquet(args.input)
    columns = [F.col("id")] if "id" in problems.columns else []
    columns += [F.col(name) for name in INPUTS if name in problems.columns]
    problems = problems.select(*columns)
    if "id" not in problems.columns:
        problems = problems.withColumn("id", F.monotonically_increasing_id())
    if args.partitions:
        problems = problems.repartition(args.partitions)
    servers, winner_only = args.server, args.winner_only

    def solve(batches):
        # Each partition starts with its own server, so that the load spreads.
        first = TaskContext.get().partitionId() % len(servers)
        yield from flight.solve_batches(batches, servers[first:] + servers[:first], "mixed",
                                        winner_only=winner_only, signed=True, retry_for=30)

    schema = answer_schema(problems.schema["id"].dataType)
    problems.mapInArrow(solve, schema).write.mode("overwrite").parquet(args.output)
    spark.stop()


if __name__ == "__main__":
    main()
