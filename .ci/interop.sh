#!/usr/bin/env bash
# Second-client cross-check: Python grpcio and the reference protobuf runtime against the
# real server and gamesolver-client (tests/interop/crosscheck.py), and pyarrow.flight
# against the Arrow Flight door (tests/interop/flight_pyarrow.py), through the repository's
# Python package (clients/python), installed into a venv under target/ at every run so
# that the check always uses the package as committed. The package's own dependencies are
# pinned here to the versions its stubs were generated for (.ci/generate.sh).
# Environment: CARGO_TARGET_DIR, CI_INSTALL_ONLY (1: install, then stop; .ci/prefetch.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/interop-venv"
grpc_version=1.85.1
protobuf_version=7.36.2
# shellcheck source=.ci/python-pins.sh
source .ci/python-pins.sh
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('grpcio') != '$grpc_version' or m.version('protobuf') != '$protobuf_version'
         or m.version('pyarrow') != '$pyarrow_version' or m.version('pandas') != '$pandas_version'
         or m.version('polars') != '$polars_version')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "grpcio==$grpc_version" "grpcio-status==$grpc_version" "protobuf==$protobuf_version" \
    "pyarrow==$pyarrow_version" "pandas==$pandas_version" "polars==$polars_version"
fi
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only
# --no-deps: the pins above are the dependencies; --no-build-isolation would need setuptools
# in the venv, so pip builds the package in its own isolated environment.
"$venv/bin/pip" install --quiet --force-reinstall --no-deps ./clients/python
cargo build --quiet --bins
server="$target/debug/gamesolver-server"
client="$target/debug/gamesolver-client"
"$venv/bin/python" tests/interop/crosscheck.py "$server" "$client" examples/problems.jsonl
generated="$target/interop-generated.jsonl"
"$client" gen --count 3000 --seed 11 --iv-n 0..200000 --mix sum=4,ix=4,iv=2,nim=2 -o "$generated"
"$venv/bin/python" tests/interop/crosscheck.py "$server" "$client" "$generated"
for problems in examples/problems.jsonl examples/errors.jsonl "$generated"; do
  "$venv/bin/python" tests/interop/flight_pyarrow.py "$server" "$problems"
done
# The package's Flight helper, as Spark and Ray jobs call it: failover, lying servers,
# pandas and Polars frames, the connect deadline.
"$venv/bin/python" tests/interop/flight_helper.py "$server"

# The package's example, as its README shows it, against a server of its own (stopped on
# exit; at most 30 s for its address).
out="$target/interop-example.out"
"$server" --listen 127.0.0.1:0 >"$out" 2>/dev/null &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
addr=$(listening_address "$out" 300 "$server_pid") ||
  { echo "interop.sh: the server exited or printed no address within 30 s" >&2; exit 1; }
example=$("$venv/bin/python" clients/python/examples/solve.py --server "$addr" --num '25??')
[[ $example == $'winner: WINNER_ALICE\nmove: write 9 at index 2' ]] ||
  { echo "interop.sh: examples/solve.py printed: $example" >&2; exit 1; }
echo "interop.sh: the package's example answers as its README says"
