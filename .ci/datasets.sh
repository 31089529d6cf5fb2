#!/usr/bin/env bash
# Datasets as data teams run them: a Parquet file of 10^6 mixed problems, stones and an
# eighth of n over the whole uint64 range, solved by a Spark job (DataFrame.mapInArrow,
# local[2], the columns as Spark reads them: uint64 as decimal(20,0)) and by a Ray Data
# job (map_batches with pyarrow batches), each through gamesolver_client.flight against
# three servers, one of them killed mid-job (tests/datasets/killed_server.py). Each job
# must finish and its answers equal `gamesolver-client solve` on the same file, whose
# Parquet output pyarrow reads back here. Before them, the files that pandas
# (to_parquet, to_csv with NaN), Polars (write_parquet, write_csv), DuckDB (COPY TO) and
# Spark (df.write.parquet) write are each solved as written, with the JSON lines path's
# answers (tests/datasets/writers.py). PySpark (Java 17 is on the machine), Ray,
# pyarrow, pandas, Polars and DuckDB come from PyPI at the versions .ci/python-pins.sh
# pins, into a venv under target/; the package is installed from clients/python.
# Uses the release binaries in GAMESOLVER_RELEASE_DIR (what .ci/deploy.sh built), or
# builds them. Environment: CARGO_TARGET_DIR, GAMESOLVER_RELEASE_DIR, DATASET_ROWS,
# DATASET_ENGINES (default "spark ray"), CI_INSTALL_ONLY (1: install, then stop;
# .ci/prefetch.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
rows="${DATASET_ROWS:-1000000}"
engines="${DATASET_ENGINES:-spark ray}"
# shellcheck source=.ci/python-pins.sh
source "$root/.ci/python-pins.sh"

log() { echo "datasets.sh: $*" >&2; }

venv="$target/datasets-venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('pyarrow') != '$pyarrow_version' or m.version('pyspark') != '$pyspark_version'
         or m.version('ray') != '$ray_version' or m.version('pandas') != '$pandas_version'
         or m.version('polars') != '$polars_version' or m.version('duckdb') != '$duckdb_version')" 2>/dev/null; then
    log "pip install pyarrow $pyarrow_version, pyspark $pyspark_version, ray[data] $ray_version," \
        "pandas $pandas_version, polars $polars_version, duckdb $duckdb_version"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "pyarrow==$pyarrow_version" "pyspark==$pyspark_version" \
        "ray[data]==$ray_version" "pandas==$pandas_version" "polars==$polars_version" "duckdb==$duckdb_version"
fi
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only
"$venv/bin/pip" install --quiet --force-reinstall --no-deps ./clients/python
java -version 2>&1 | grep -q 'version "1[7-9]\|version "2[0-9]' || { log "Spark needs Java 17 or newer"; exit 1; }

bin="${GAMESOLVER_RELEASE_DIR:-}"
if [[ -z $bin ]]; then
    log "cargo build --release --bins"
    cargo build --release --quiet --bins
    bin="$target/release"
fi

work="$target/datasets"
rm -rf "$work"
mkdir -p "$work"
data="$work/problems.parquet"
reference="$work/reference.parquet"
log "gen $rows mixed problems into $data, stones and an eighth of n over the whole uint64 range"
generated="$work/generated.parquet"
"$bin/gamesolver-client" gen --count "$rows" --seed 31 --mix sum=1,ix=1,iv=1,nim=1 --sum-len 2..24 --ix-len 0..24 \
    --ix-value 0..18446744073709551615 --iv-n 0..1000000 --nim-piles 0..6 --nim-n 0..100000 -o "$generated"
# Piles above the server's table are answered PILE_ABOVE_LIMIT, named with their value: an
# eighth of the n rows from 2^63 up, where a cast to a signed 64-bit type would overflow
# (2^64 - 1 among them), so that a job that loses a digit answers otherwise.
"$venv/bin/python" - "$generated" "$data" <<'PY'
import random, sys
import pyarrow as pa
import pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
draw = random.Random(31)
n = table.column("n").to_pylist()
wide = [i for i, value in enumerate(n) if value is not None][::8]
for i in wide:
    n[i] = draw.randrange(2**63, 2**64)
n[wide[0]] = 2**64 - 1
table = table.set_column(table.schema.get_field_index("n"), "n", pa.array(n, pa.uint64()))
pq.write_table(table, sys.argv[2], row_group_size=131072)
print(f"datasets.sh: {len(wide)} values of n from 2^63 to 2^64 - 1", file=sys.stderr)
PY
log "gamesolver-client solve $data -o $reference (the reference)"
# --keep none: the answer columns alone, as the jobs' Flight answers have them.
"$bin/gamesolver-client" solve "$data" -o "$reference" --keep none --quiet || [[ $? == 1 ]]
# The client's Parquet, read back by pyarrow: one answer a problem, the contract's columns.
"$venv/bin/python" - "$data" "$reference" <<'PY'
import sys
import pyarrow.parquet as pq
problems, answers = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
assert answers.num_rows == problems.num_rows, (answers.num_rows, problems.num_rows)
assert answers.column("id").equals(problems.column("id")), "answers out of input order"
expected = ["id", "game", "alice_wins", "move_index", "move_digit", "move_pile", "move_take", "nim_value",
            "error_reason", "error_message"]
assert answers.schema.names == expected, answers.schema.names
print(f"datasets.sh: pyarrow reads the client's Parquet: {answers.num_rows} answers in input order")
PY

export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:-} -Xss4m"
log "writers' files (pandas, Polars, DuckDB, Spark), each solved as written"
"$venv/bin/python" tests/datasets/writers.py "$bin/gamesolver-client" "$work/writers"
for engine in $engines; do
    log "$engine job, three servers, one killed mid-job"
    "$venv/bin/python" tests/datasets/killed_server.py "$engine" "$bin/gamesolver-server" "$venv/bin/python" \
        "clients/python/examples/${engine}_job.py" "$data" "$reference" "$work"
done
