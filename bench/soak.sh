#!/usr/bin/env bash
# Soak test of the server's bounds (bench/soak.py): a release server on loopback, the
# hardening issue's hostile probes, then a mixed load with clients killed at random.
# Bounded in time (about 3 minutes after the build); fails when a bound is exceeded or an
# answer is wrong. Installs its own venv (grpcio, h2, zstandard). `--short` (CI, .ci/soak.sh) runs
# every probe and check with shorter timed phases: about 90 s.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/soak-venv"
if ! "$venv/bin/python" -c "import grpc, h2, zstandard" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet grpcio h2 zstandard
fi
# GAMESOLVER_RELEASE_DIR: a release build already made (CI hands over its static one).
release="${GAMESOLVER_RELEASE_DIR:-$target/release}"
[ -n "${GAMESOLVER_RELEASE_DIR:-}" ] || cargo build --release --quiet --bin gamesolver-server
work="$target/soak"
mkdir -p "$work"
# The probes open thousands of sockets.
ulimit -n "$(ulimit -Hn)"
exec timeout 600 "$venv/bin/python" bench/soak.py "$release/gamesolver-server" "$work" "$@"
