#!/usr/bin/env bash
# Directories of parts as data engines write them, through `gamesolver-client solve DIR -o
# OUT/`: DuckDB's `COPY ... TO dir (FORMAT parquet, PARTITION_BY (region))` and Spark's
# `df.write.partitionBy("region").parquet(dir)` (with its _SUCCESS and .crc files), each
# answered part for part, every answer equal to the JSON lines path's for the same
# problems (by id), the kept columns (label, the region folder) beside them, and the
# answered directory read back by the engine that wrote the input. Uses the venv of
# .ci/datasets.sh (pyarrow, PySpark) and adds DuckDB to it. Environment: CARGO_TARGET_DIR,
# GAMESOLVER_RELEASE_DIR, PARTS_ROWS (default 200000).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
rows="${PARTS_ROWS:-200000}"
pyarrow_version=26.0.1
pyspark_version=4.3.0
duckdb_version=2.0.1

log() { echo "datasets-parts.sh: $*" >&2; }

venv="$target/datasets-venv"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('pyarrow') != '$pyarrow_version' or m.version('pyspark') != '$pyspark_version'
         or m.version('duckdb') != '$duckdb_version')" 2>/dev/null; then
    log "pip install pyarrow $pyarrow_version, pyspark $pyspark_version, duckdb $duckdb_version"
    "$venv/bin/pip" install --quiet "pyarrow==$pyarrow_version" "pyspark==$pyspark_version" \
        "duckdb==$duckdb_version"
fi

bin="${GAMESOLVER_RELEASE_DIR:-}"
if [[ -z $bin ]]; then
    log "cargo build --release --bins"
    cargo build --release --quiet --bins
    bin="$target/release"
fi
client="$bin/gamesolver-client"

work="$target/datasets-parts"
rm -rf "$work"
mkdir -p "$work"
# The tables the jobs grow stay in this run's own cache.
export XDG_CACHE_HOME="$work/cache"
gen=(gen --count "$rows" --seed 47 --mix sum=1,ix=1,iv=1,nim=1 --sum-len 2..16 --iv-n 0..1000000 --nim-n 0..10000)
"$client" "${gen[@]}" -o "$work/problems.parquet"
"$client" "${gen[@]}" -o "$work/problems.jsonl"
log "the reference: the JSON lines path's answers to the same $rows problems"
"$client" solve "$work/problems.jsonl" -o "$work/reference.parquet" --quiet --max-errors 100%

log "DuckDB: COPY ... (FORMAT parquet, PARTITION_BY (region)); Spark: partitionBy(\"region\")"
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:-} -Xss4m"
"$venv/bin/python" - "$work" <<'PY'
import sys
import duckdb
from pyspark.sql import SparkSession, functions as F

work = sys.argv[1]
duckdb.sql(f"""
    COPY (SELECT *, 'r' || CAST(hash(id) % 3 AS VARCHAR) AS region, 'label-' || id AS label
          FROM read_parquet('{work}/problems.parquet'))
    TO '{work}/duck' (FORMAT parquet, PARTITION_BY (region))""")
spark = (SparkSession.builder.master("local[2]").appName("parts")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
# Spark reads a Parquet uint64 as decimal(20,0): the job's own columns, as its users cast them.
df = spark.read.parquet(f"{work}/problems.parquet")
df = (df.withColumn("n", F.col("n").cast("bigint"))
        .withColumn("stones", F.col("stones").cast("array<bigint>"))
        .withColumn("piles", F.col("piles").cast("array<bigint>"))
        .withColumn("region", F.concat(F.lit("r"), (F.abs(F.hash("id")) % 3).cast("string")))
        .withColumn("label", F.concat(F.lit("label-"), F.col("id"))))
df.repartition(4).write.partitionBy("region").parquet(f"{work}/spark")
spark.stop()
PY

for engine in duck spark; do
    log "gamesolver-client solve $engine/ -o ${engine}-answers/"
    "$client" solve "$work/$engine" -o "$work/${engine}-answers/" --quiet --max-errors 100%
done

log "each answer against the reference; the answered directories read back"
"$venv/bin/python" - "$work" "$rows" <<'PY'
import sys
import duckdb
from pyspark.sql import SparkSession

work, rows = sys.argv[1], int(sys.argv[2])
answers = ["game", "alice_wins", "move_index", "move_digit", "move_pile", "move_take", "nim_value",
           "error_reason"]
for engine in ["duck", "spark"]:
    answered = f"read_parquet('{work}/{engine}-answers/**/*.parquet', hive_partitioning = true)"
    count, = duckdb.sql(f"SELECT count(*) FROM {answered}").fetchall()[0]
    assert count == rows, (engine, count, rows)
    labels, = duckdb.sql(f"SELECT count(*) FROM {answered} WHERE label = 'label-' || id").fetchall()[0]
    assert labels == rows, (engine, "kept label", labels)
    differ = " OR ".join(f"a.{c} IS DISTINCT FROM r.{c}" for c in answers)
    wrong = duckdb.sql(f"""SELECT a.id FROM {answered} a
                           JOIN read_parquet('{work}/reference.parquet') r ON a.id = r.id
                           WHERE {differ}""").fetchall()
    assert not wrong, (engine, "answers differ from the JSON lines path's", wrong[:5])
    joined, = duckdb.sql(f"""SELECT count(*) FROM {answered} a
                             JOIN read_parquet('{work}/reference.parquet') r ON a.id = r.id""").fetchall()[0]
    assert joined == rows, (engine, joined)
    print(f"datasets-parts.sh: {engine}: {rows} answers equal to the JSON lines path's, label kept")

spark = (SparkSession.builder.master("local[2]").appName("parts-read")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
back = spark.read.parquet(f"{work}/spark-answers")
assert back.count() == rows, back.count()
regions = sorted(r.region for r in back.select("region").distinct().collect())
assert regions == ["r0", "r1", "r2"], regions
assert back.where("label = concat('label-', id)").count() == rows
spark.stop()
print(f"datasets-parts.sh: Spark reads the answered directory: {rows} rows, regions {regions}")
PY
