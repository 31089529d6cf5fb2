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
work="$target/grpc-web"
origin=http://localhost:3000

log() { echo "grpc-web.sh: $*" >&2; }

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
((node_major >= 20)) || { log "needs node >= 20 and npm on PATH (found: $(node --version 2>&1 || true))"; exit 1; }

mkdir -p "$work"
server_pid=
stop_server() {
    [[ -n $server_pid ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    local i
    for i in $(seq 100); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}
on_exit() {
    local status=$?
    stop_server
    ((status == 0)) || log "failed; the server's log is $work/server.log"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

log "npm ci in tests/grpc-web"
(cd tests/grpc-web && npm ci --silent --no-audit --no-fund)

log "cargo build --bins"
cargo build --quiet --bins

"$target/debug/gamesolver-server" --listen 127.0.0.1:0 --grpc-web --grpc-web-origin "$origin" \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
addr=
for _ in $(seq 300); do
    addr=$(sed -n '1s/^listening on //p' "$work/server.out")
    [[ -n $addr ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        log "the server exited at start (does it have --grpc-web?):"
        cat "$work/server.log" >&2
        exit 1
    fi
    sleep 0.1
done
[[ -n $addr ]] || { log "the server printed no address within 30 s"; exit 1; }

log "node tests against $addr (allowed origin $origin)"
# Each call has its own deadline, each test 30 s, the whole run 120 s.
(cd tests/grpc-web && GAMESOLVER_ADDR=$addr ORIGIN=$origin timeout 120 node --test --test-timeout=30000 grpc-web.test.mjs)
