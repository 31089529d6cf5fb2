#!/usr/bin/env bash
# Instructions a unary call costs the server, counted by callgrind: exact where a timer is
# noisy, so two builds compare on a shared machine, and by function (callgrind_annotate).
# This machine kind's VM has no hardware counters (`perf stat -e instructions` is "not
# supported"), which is why it is callgrind.
#
# Usage: bench/callgrind-unary.sh SERVER_BIN OUT_DIR [CALLS] [-- SERVER FLAGS...]
# Starts SERVER_BIN under callgrind on 127.0.0.1, and for the health check and Solve
# (bench/data/solve-fixed.json) in turn: 200 calls not counted, the counters zeroed, CALLS
# calls (default 2000; ghz -c 8 --connections 2), a dump (OUT_DIR/callgrind.out.*, one
# per call kind). Prints each kind's instructions a call. The server is stopped by its PID.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=$1
out=$2
calls=${3:-2000}
shift $(($# < 3 ? $# : 3))
[[ ${1:-} == -- ]] && shift
ghz=$("$root/bench/ghz-install.sh")
mkdir -p "$out"
rm -f "$out"/callgrind.out*
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"

valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" "$server" --listen "$addr" "$@" \
    >"$out/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

health=(--call grpc.health.v1.Health/Check -D "$root/bench/data/health.json")
solve=(--call gamesolver.v1.GameSolverService/Solve -D "$root/bench/data/solve-fixed.json")
ghz_run() {
    "$ghz" --insecure -c 8 --connections 2 "$@" -O json -o /dev/null "$addr"
}

# Up within 5 minutes (callgrind runs the start-up 20-50 times slower).
for _ in $(seq 300); do
    if ghz_run "${health[@]}" -n 1 --timeout 5s 2>/dev/null; then break; fi
    kill -0 "$pid" 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
    sleep 1
done

for kind in health solve; do
    declare -n args=$kind
    ghz_run "${args[@]}" -n 200 --timeout 30s
    callgrind_control --zero "$pid" >/dev/null
    ghz_run "${args[@]}" -n "$calls" --timeout 30s
    callgrind_control --dump="$kind" "$pid" >/dev/null
done
kill "$pid"
wait "$pid" 2>/dev/null || true
trap - EXIT

for kind in health solve; do
    file=$(grep -l "^desc: Trigger: dump $kind" "$out"/callgrind.out* | head -1)
    total=$(awk '/^(summary|totals):/ {print $2; exit}' "$file")
    echo "$kind: $((total / calls)) instructions a call ($total over $calls calls; $file)"
done
