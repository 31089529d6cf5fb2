# shellcheck shell=bash
# The Python packages the CI venvs install, at the versions they are pinned to, in one
# place: .ci/interop.sh (the helper's tests) and .ci/datasets.sh (the writers' files, the
# Spark and Ray jobs) source it, so that both test the same pyarrow, pandas and Polars.
# shellcheck disable=SC2034  # read by the scripts that source this
pyarrow_version=26.0.1
pandas_version=3.1.1
polars_version=2.1.0
duckdb_version=2.0.1
pyspark_version=4.3.0
ray_version=2.60.0
