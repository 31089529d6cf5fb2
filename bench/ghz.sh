#!/usr/bin/env bash
# Load test of gamesolver-server with ghz: installs ghz if needed, builds and starts the
# server on a free loopback port, runs every scenario for a bounded time, checks a sample
# of answers, stops the server, and prints a markdown table. Exits non-zero if any call
# was not OK or any checked answer was wrong.
#
# Usage: bench/ghz.sh [--duration 3s] [--concurrency 50] [--connections 1]
#                     [--profile release|dev] [--only REGEX] [--output FILE] [--smoke]
#                     [--no-compression]
# Environment: GHZ (a ghz binary to use), GHZ_VERSION, GOBIN, CARGO_TARGET_DIR,
# SERVER_BIN (a gamesolver-server binary to test instead of building one), SERVER_ARGS
# (extra server flags, for A/B runs of a setting).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench="$root/bench"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$target/bench"

duration=3s       # per scenario; the whole run takes about 8 scenarios x this
concurrency=50    # ghz workers for unary calls of small problems
heavy_concurrency=4   # ghz workers for batch, stream and 10^6-byte calls
connections=1
profile=release
only=.
output=
warmup=200        # calls per scenario made and discarded first (ghz's --skipFirst would
                  # still count their time in requests/s)
stream_count=100  # messages per SolveStream call
batch_stream_count=10  # batches of 1,000 per SolveBatchStream call

while (($#)); do
    case $1 in
        --duration) duration=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --profile) profile=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --output) output=$2; shift 2 ;;
        --smoke) duration=1s; warmup=0; profile=${GHZ_SMOKE_PROFILE:-dev}; shift ;;
        # ghz (grpc-go) offers gzip in grpc-accept-encoding by default, and a server that
        # may send compressed responses then compresses every one; this stops the offer.
        --no-compression) export GRPC_GO_ADVERTISE_COMPRESSORS=false; shift ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "ghz.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { echo "ghz.sh: $*" >&2; }

# --- server ---------------------------------------------------------------------------
server_pid=
server_addr=

start_server() {
    local bin=$1 out="$work/server.out" err="$work/server.log"
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
    "$bin" --listen 127.0.0.1:0 --shutdown-timeout 5 ${SERVER_ARGS:-} >"$out" 2>"$err" &
    server_pid=$!
    server_addr=$(listening_address "$out" 300 "$server_pid") && return
    log "server exited or printed no address within 30 s:"
    cat "$err" >&2
    return 1
}

stop_server() {
    [[ -n $server_pid ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# --- data -----------------------------------------------------------------------------
# Writes the generated call data (too large to keep in git) into $work/data.
generate_data() {
    mkdir -p "$work/data"
    # 1,000 small problems, a third of each game, the same every run (awk's seeded rand).
    awk 'BEGIN {
        srand(20290); printf "{\"problems\":[";
        for (i = 0; i < 1000; i++) {
            if (i) printf ",";
            if (i % 3 == 0) {
                len = 2 * (1 + int(rand() * 8)); num = "";
                for (j = 0; j < len; j++) num = num (rand() < 0.25 ? "?" : int(rand() * 10));
                printf "{\"id\":\"b%d\",\"sumGame\":{\"num\":\"%s\"}}", i, num;
            } else if (i % 3 == 1) {
                k = 1 + int(rand() * 8); printf "{\"id\":\"b%d\",\"stoneGameIx\":{\"stones\":[", i;
                for (j = 0; j < k; j++) printf "%s\"%d\"", (j ? "," : ""), int(rand() * 1000000);
                printf "]}}";
            } else {
                printf "{\"id\":\"b%d\",\"stoneGameIv\":{\"n\":\"%d\"}}", i, 1 + int(rand() * 100000);
            }
        }
        printf "]}\n";
    }' >"$work/data/batch-1000.json"
    # A 10^6-character Sum Game: 10^5 copies of a 10-character pattern with one '?'.
    awk 'BEGIN {
        s = "31415926?5"; while (length(s) < 1000000) s = s s;
        printf "{\"problem\":{\"id\":\"big\",\"sumGame\":{\"num\":\"%s\"}}}\n", substr(s, 1, 1000000);
    }' >"$work/data/sum-game-1e6.json"
}

# --- scenarios ------------------------------------------------------------------------
# name | ghz arguments (the call, data and streaming flags) | problems per call
scenarios() {
    local d="$bench/data" g="$work/data" svc=gamesolver.v1.GameSolverService
    cat <<EOF
health-check|--call grpc.health.v1.Health/Check -D $d/health.json -c $concurrency|0
solve-small-fixed|--call $svc/Solve -D $d/solve-fixed.json -c $concurrency|1
solve-small-templated|--call $svc/Solve -D $d/solve-templated.json -c $concurrency|1
solve-small-proto-file|--proto $root/proto/gamesolver/v1/gamesolver.proto --import-paths $root/proto --call $svc/Solve -D $d/solve-fixed.json -c $concurrency|1
solve-batch-1000|--call $svc/SolveBatch -D $g/batch-1000.json -c $heavy_concurrency|1000
solve-stream-100|--call $svc/SolveStream -D $d/solve-templated.json --stream-dynamic-messages --stream-call-count $stream_count -c $heavy_concurrency|$stream_count
solve-batch-stream-10x1000|--call $svc/SolveBatchStream -D $g/batch-1000.json --stream-call-count $batch_stream_count -c $heavy_concurrency|$((batch_stream_count * 1000))
solve-sum-game-1e6|--call $svc/Solve -D $g/sum-game-1e6.json -c $heavy_concurrency|1
solve-nim-square|--call $svc/Solve -D $d/solve-nim.json -c $concurrency|1
EOF
}

# Runs one scenario for $duration after a discarded warm-up; the JSON report goes to $3.
run_scenario() {
    local name=$1 args=$2 report=$3
    # shellcheck disable=SC2086 # $args is a list of flags by design
    if ((warmup > 0)); then
        "$ghz" --insecure $args --connections "$connections" -n "$warmup" -x 1s -O json \
            -o /dev/null "$server_addr" >/dev/null
    fi
    # --duration-stop=wait lets in-flight calls finish, so that stopping is not an error.
    # shellcheck disable=SC2086
    "$ghz" --insecure $args --connections "$connections" -z "$duration" --duration-stop=wait \
        -O json -o "$report" --name "$name" "$server_addr"
}

# Makes a few calls with ghz's debug log on, whose requests and responses the checker
# compares with reference solutions.
sample_answers() {
    local d="$bench/data" g="$work/data" svc=gamesolver.v1.GameSolverService
    local dir="$work/answers"
    rm -rf "$dir" && mkdir -p "$dir"
    "$ghz" --insecure --call $svc/Solve -D "$d/solve-templated.json" -n 90 -c 1 --debug "$dir/solve.log" "$server_addr" >/dev/null
    "$ghz" --insecure --call $svc/Solve -D "$g/sum-game-1e6.json" -n 1 -c 1 --debug "$dir/big.log" "$server_addr" >/dev/null
    "$ghz" --insecure --call $svc/Solve -D "$d/solve-nim.json" -n 30 -c 1 --debug "$dir/nim.log" "$server_addr" >/dev/null
    "$ghz" --insecure --call $svc/SolveBatch -D "$g/batch-1000.json" -n 1 -c 1 --debug "$dir/batch.log" "$server_addr" >/dev/null
    "$ghz" --insecure --call $svc/SolveStream -D "$d/solve-templated.json" --stream-dynamic-messages \
        --stream-call-count 30 -n 2 -c 1 --debug "$dir/stream.log" "$server_addr" >/dev/null
    "$ghz" --insecure --call $svc/SolveBatchStream -D "$g/batch-1000.json" --stream-call-count 2 \
        -n 1 -c 1 --debug "$dir/batch-stream.log" "$server_addr" >/dev/null
    python3 "$bench/ghz_check.py" verify "$dir"/*.log
}

# --- main -----------------------------------------------------------------------------
mkdir -p "$work/reports"
ghz=$("$bench/ghz-install.sh")
ghz_version=$("$bench/ghz-install.sh" --version)
log "ghz: $ghz"
if [[ -n ${SERVER_BIN:-} ]]; then
    server_bin=$SERVER_BIN   # an A/B run against a binary built elsewhere
elif [[ $profile == release ]]; then
    log "building the release server"
    cargo build --release --bin gamesolver-server --manifest-path "$root/Cargo.toml" >&2
    server_bin="$target/release/gamesolver-server"
else
    cargo build --bin gamesolver-server --manifest-path "$root/Cargo.toml" >&2
    server_bin="$target/debug/gamesolver-server"
fi
generate_data
start_server "$server_bin"
log "server ($profile) on $server_addr; $duration a scenario"

reports=()
while IFS='|' read -r name args problems; do
    [[ $name =~ $only ]] || continue
    log "scenario $name"
    report="$work/reports/$name.json"
    rm -f "$report"
    run_scenario "$name" "$args" "$report"
    reports+=("$report:$problems")
done < <(scenarios)

status=0
if command -v python3 >/dev/null; then
    sample_answers || status=1
    table=$(python3 "$bench/ghz_check.py" table "${reports[@]}") || status=1
else
    log "python3 not found: answers not checked and no table"
    status=1
fi
stop_server

offer=gzip; [[ ${GRPC_GO_ADVERTISE_COMPRESSORS:-} == false ]] && offer=none
heading="ghz $ghz_version, $duration a scenario, response compression offered: $offer, -c $concurrency (heavy: -c $heavy_concurrency), --connections $connections, $profile server, $(nproc) cores shared by ghz and the server"
printf '%s\n\n%s\n' "$heading" "${table:-}"
if [[ -n $output ]]; then
    printf '%s\n\n%s\n' "$heading" "${table:-}" >"$output"
fi
exit "$status"
