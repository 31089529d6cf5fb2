#!/usr/bin/env bash
# Unary calls against the stack's floor (bench/floor.py): Solve and the health check on
# the release server and on the bare one (examples/bare_server.rs), interleaved, with the
# medians and ratios docs/performance.md quotes.
#
# Usage: bench/floor.sh [--rounds 3] [--seconds 5] [--concurrency 50] [--connections 4]
#                       [--server-args "FLAGS"] [--rps R]
# --rps R holds every run to R calls a second, so that the server's CPU a call compares at
# equal arrival rates (docs/performance.md says why that matters on a shared machine).
# Environment: CARGO_TARGET_DIR; SERVER_BIN and BARE_BIN (binaries built elsewhere, for
# A/B runs of two commits); GHZ, GHZ_VERSION, GOBIN (see ghz-install.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
if [[ -z ${SERVER_BIN:-} || -z ${BARE_BIN:-} ]]; then
    # The dist profile (fat LTO), as every figure is measured: a release build has no LTO,
    # and set against a build that had it, it looked 17% dearer a call (docs/performance.md,
    # "The unary guard, counted").
    echo "floor.sh: building the server and examples/bare_server.rs (dist profile)" >&2
    cargo build --profile dist --quiet --manifest-path "$root/Cargo.toml" --bin gamesolver-server --example bare_server
fi
ghz=$("$root/bench/ghz-install.sh")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores shared by ghz and the servers; ghz $("$root/bench/ghz-install.sh" --version)"
exec python3 "$root/bench/floor.py" --server-bin "${SERVER_BIN:-$target/dist/gamesolver-server}" \
    --bare-bin "${BARE_BIN:-$target/dist/examples/bare_server}" --ghz "$ghz" \
    --health-data "$root/bench/data/health.json" "$@"
