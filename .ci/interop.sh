#!/usr/bin/env bash
# Second-client cross-check: Python grpcio and the reference protobuf runtime against the
# real server and gamesolver-client (tests/interop/crosscheck.py). Installs its own venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/interop-venv"
if ! "$venv/bin/python" -c "import grpc_status, grpc_tools" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet grpcio grpcio-tools grpcio-status protobuf
fi
cargo build --quiet --bins
server="$target/debug/gamesolver-server"
client="$target/debug/gamesolver-client"
"$venv/bin/python" tests/interop/crosscheck.py "$server" "$client" examples/problems.jsonl
generated="$target/interop-generated.jsonl"
"$client" gen --count 3000 --seed 11 --iv-n 0..200000 -o "$generated"
"$venv/bin/python" tests/interop/crosscheck.py "$server" "$client" "$generated"
