#!/usr/bin/env bash
# gRPC-Web for browsers: starts gamesolver-server with --grpc-web and one allowed CORS
# origin on a loopback port, and runs tests/grpc-web (node: Connect's gRPC-Web transport,
# stubs from buf generate, committed and kept current by .ci/generate.sh --check): unary
# Solve (answer, move, rich error details), unary SolveBatch, and the CORS preflight from
# an allowed and a disallowed origin. The contract has no server-streaming RPC and
# gRPC-Web carries no client streams, so browsers get Solve and SolveBatch only.
# Needs node >= 20 and npm; installs the test's packages with `npm ci` (pinned by
# tests/grpc-web/package-lock.json). Always stops the server it started.
# Environment: CARGO_TARGET_DIR.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
origin=http://localhost:3000

# start_server, stop_servers and on_exit, as the Go interop check uses them.
# shellcheck source=.ci/interop-go.sh
source .ci/interop-go.sh
work="$target/grpc-web"
log() { echo "grpc-web.sh: $*" >&2; }
trap on_exit EXIT
trap 'exit 130' INT TERM
mkdir -p "$work"

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
((node_major >= 20)) || { log "needs node >= 20 and npm on PATH (found: $(node --version 2>&1 || true))"; exit 1; }

log "npm ci in tests/grpc-web"
(cd tests/grpc-web && npm ci --silent --no-audit --no-fund)

log "cargo build --bins"
cargo build --quiet --bins

start_server grpc-web --grpc-web --grpc-web-origin "$origin" ||
    { log "the server did not start; is --grpc-web in this build?"; exit 1; }
addr=$server_addr

log "node tests against $addr (allowed origin $origin)"
# Each call has its own deadline, each test 30 s, the whole run 120 s.
(cd tests/grpc-web && GAMESOLVER_ADDR=$addr ORIGIN=$origin timeout 120 node --test --test-timeout=30000 grpc-web.test.mjs)
