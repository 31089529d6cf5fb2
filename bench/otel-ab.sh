#!/usr/bin/env bash
# What traces cost: the same server binary with and without --otlp-endpoint (exporting to
# examples/otlp_sink.rs, which counts and drops the spans), under ghz, in interleaved
# rounds (off, on, off, on, ...) so that both see the same machine load; prints each
# scenario's median calls/s and p50/p99 latency per setting, and the on/off ratio.
#
# Usage: bench/otel-ab.sh [--rounds 5] [--duration 5s]
# Environment: SERVER_BIN (default: the release build, built if missing), SINK_BIN
# (default: the otlp_sink example, built), GHZ (default: as bench/ghz.sh installs it),
# CARGO_TARGET_DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$target/bench/otel-ab"
rounds=5
duration=5s
while (($#)); do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "otel-ab.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "otel-ab.sh: $*" >&2; }

ghz=${GHZ:-${GOBIN:-$target/tools/bin}/ghz}
[[ -x $ghz ]] || { log "no ghz at $ghz: run bench/ghz.sh once, or set GHZ"; exit 1; }
if [[ -z ${SERVER_BIN:-} ]]; then
    cargo build --release --bin gamesolver-server --manifest-path "$root/Cargo.toml" >&2
    SERVER_BIN="$target/release/gamesolver-server"
fi
if [[ -z ${SINK_BIN:-} ]]; then
    cargo build --example otlp_sink --manifest-path "$root/Cargo.toml" >&2
    SINK_BIN="$target/debug/examples/otlp_sink"
fi

rm -rf "$work" && mkdir -p "$work/reports"
# SolveBatch of 1,000 problems: the three fixed problems of bench/data, repeated.
python3 - "$root/bench/data/solve-fixed.json" >"$work/batch-1000.json" <<'EOF'
import json, sys
fixed = [entry["problem"] for entry in json.load(open(sys.argv[1]))]
print(json.dumps({"problems": [dict(p, id=f"b{i}") for i, p in enumerate(fixed * 334)][:1000]}))
EOF

# --- processes ------------------------------------------------------------------------
pids=()
cleanup() { local pid; for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts `$@` with stdout in $out and waits for its `listening on ADDR`; sets $addr, $pid.
start() {
    local out=$1; shift
    "$@" >"$out" 2>"$out.log" &
    pid=$!
    pids+=("$pid")
    addr=$(listening_address "$out" 300 "$pid") && return
    log "$1 exited or printed no address within 30 s:"
    cat "$out.log" >&2
    return 1
}

start "$work/sink.out" "$SINK_BIN"
sink_addr=$addr sink_pid=$pid

svc=gamesolver.v1.GameSolverService
scenarios() {
    cat <<EOF
solve-small|--call $svc/Solve -D $root/bench/data/solve-fixed.json -c 50
solve-batch-1000|--call $svc/SolveBatch -D $work/batch-1000.json -c 4
EOF
}

for round in $(seq "$rounds"); do
    for setting in off on; do
        flags=()
        [[ $setting == on ]] && flags=(--otlp-endpoint "http://$sink_addr")
        start "$work/server.out" "$SERVER_BIN" --listen 127.0.0.1:0 --shutdown-timeout 5 "${flags[@]}"
        server_pid=$pid
        while IFS='|' read -r name args; do
            log "round $round, traces $setting, $name"
            # shellcheck disable=SC2086 # $args is a list of flags
            "$ghz" --insecure $args -n 500 -O json -o /dev/null "$addr" >/dev/null
            # shellcheck disable=SC2086
            "$ghz" --insecure $args -z "$duration" --duration-stop=wait -O json \
                -o "$work/reports/$name.$setting.$round.json" "$addr"
        done < <(scenarios)
        kill -TERM "$server_pid"; wait "$server_pid" || true
    done
done
kill -TERM "$sink_pid"; wait "$sink_pid" || true
log "sink: $(tail -n 1 "$work/sink.out")"

python3 - "$work/reports" <<'EOF'
import glob, json, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    name, setting, _ = os.path.basename(path)[:-5].rsplit(".", 2)
    report = json.load(open(path))
    bad = sum(n for code, n in report.get("statusCodeDistribution", {}).items() if code != "OK")
    if bad:
        sys.exit(f"{path}: {bad} calls not OK")
    lat = {p["percentage"]: p["latency"] / 1e6 for p in report["latencyDistribution"]}
    rows.setdefault(name, {}).setdefault(setting, []).append((report["rps"], lat[50], lat[99]))
print("| scenario | traces | runs | calls/s (median) | p50 ms | p99 ms | calls/s on/off |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in sorted(rows):
    med = {s: [statistics.median(v[i] for v in runs) for i in range(3)] for s, runs in rows[name].items()}
    for setting in ("off", "on"):
        rps, p50, p99 = med[setting]
        ratio = f"{med['on'][0] / med['off'][0]:.3f}" if setting == "on" else ""
        print(f"| {name} | {setting} | {len(rows[name][setting])} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {ratio} |")
EOF
