#!/usr/bin/env bash
# End-to-end benchmark of gamesolver-client on three input shapes, once through the
# embedded server and once through a separate gamesolver-server process:
#   small       `gen` defaults (about 60 bytes a line)
#   mixed       `gen --sum-len 2..40 --ix-len 1..30 --ix-value 1..10000 --iv-n 0..1000000`
#   real-world  the same mix written the way other tools write JSON: stones and n as JSON
#               numbers, every other line's keys in snake_case, ids "b<line>", and one
#               line in 1000 bad (cut short, a negative pile, two games, an unknown field)
# Runs are interleaved (run 1 of every shape, then run 2, ...) and the table gives the
# median time of each, as MB/s of input and problems/s, with the largest peak RSS seen
# and the median CPU seconds. Every input line must get exactly one output line. Every
# run is bounded by --timeout.
#
# Usage: bench/client.sh [--count 1000000] [--seed 3] [--timeout 300] [--runs 3]
#                        [--only embedded|separate] [--shapes small,mixed,real-world]
#                        [-- EXTRA SOLVE FLAGS...]
# Environment: CARGO_TARGET_DIR. Needs GNU time (/usr/bin/time; installed with apt-get
# when missing and possible) and perl.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
target="${CARGO_TARGET_DIR:-$root/target}"
count=1000000
seed=3
timeout_s=300
runs=3
only=
shapes=small,mixed,real-world
extra=()
while (($#)); do
    case $1 in
        --count) count=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --shapes) shapes=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
IFS=, read -r -a shapes <<<"$shapes"

if [[ ! -x /usr/bin/time ]]; then
    echo "installing GNU time for peak RSS" >&2
    (apt-get update -qq && apt-get install -y -qq time) >&2
fi

(cd "$root" && cargo build --release --bins --quiet)
client="$target/release/gamesolver-client"
server_bin="$target/release/gamesolver-server"
work=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mixed_flags=(--sum-len 2..40 --ix-len 1..30 --ix-value 1..10000 --iv-n 0..1000000)
# Rewrites `gen` output the way other tools write JSON (see the header).
real_world='
    s/"g(\d+)"/"b$1"/;
    s/"(\d+)"/$1/g if /"stones"|"n"/;
    if ($. % 2) { s/"sumGame"/"sum_game"/; s/"stoneGameIx"/"stone_game_ix"/; s/"stoneGameIv"/"stone_game_iv"/ }
    if ($. % 1000 == 0) {
        my $kind = ($. / 1000) % 4;
        if ($kind == 0) { s/.\n\z/\n/ }
        elsif ($kind == 1) { s/^\{/{"stoneGameIv":{"n":-5},/ }
        elsif ($kind == 2) { s/\}\n\z/,"sumGame":{"num":"11"}}\n/ }
        else { s/^\{/{"extra":1,/ }
    }'
for shape in "${shapes[@]}"; do
    input="$work/$shape.jsonl"
    case $shape in
        small) timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" -o "$input" ;;
        mixed) timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" "${mixed_flags[@]}" -o "$input" ;;
        real-world)
            timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" "${mixed_flags[@]}" |
                perl -pe "$real_world" >"$input"
            ;;
        *) echo "unknown shape $shape" >&2; exit 2 ;;
    esac
    printf 'gen %s: %d lines, %s bytes\n' "$shape" "$count" "$(stat -c %s "$input")" >&2
done

# Runs `solve` on one shape under GNU time; prints "seconds peak_rss_mb cpu_seconds".
# Exit code 1 (some lines have `error`) is expected of inputs with bad lines.
measure() {
    local input="$work/$1.jsonl" output="$work/out.jsonl" report="$work/time.txt" status=0
    shift
    rm -f "$output"
    local started=$EPOCHREALTIME
    timeout "$timeout_s" /usr/bin/time -v -o "$report" \
        "$client" solve "$input" -o "$output" "$@" "${extra[@]}" 2>"$work/stderr.txt" || status=$?
    local ended=$EPOCHREALTIME
    if ((status > 1)); then
        cat "$work/stderr.txt" >&2
        return 1
    fi
    local lines
    lines=$(wc -l <"$output")
    if ((lines != count)); then
        echo "expected $count output lines, got $lines" >&2
        return 1
    fi
    local summary seconds rss_kb cpu
    summary=$(grep -E 'problems/s' "$work/stderr.txt" | tail -n 1)
    echo "  $summary" >&2
    # The whole process, start to exit, to the millisecond (the summary's own figure
    # leaves out starting and stopping, and has two decimals).
    seconds=$(awk -v a="$started" -v b="$ended" 'BEGIN {printf "%.3f", b - a}')
    rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$report")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$report")
    echo "$seconds $((rss_kb / 1024)) $cpu"
}

# Runs every shape $runs times, interleaved, and prints one table row per shape.
# $1 names the server; the rest are extra solve flags.
run_all() {
    local label=$1
    shift
    declare -A times cpus rss server_cpus
    local run shape result seconds mb cpu before
    for ((run = 1; run <= runs; run++)); do
        for shape in "${shapes[@]}"; do
            echo "$label, $shape, run $run:" >&2
            before=$([[ -n $server_pid ]] && cpu_of "$server_pid" || echo 0)
            result=$(measure "$shape" "$@") || return 1
            read -r seconds mb cpu <<<"$result"
            times[$shape]+="$seconds "
            cpus[$shape]+="$cpu "
            ((mb > ${rss[$shape]:-0})) && rss[$shape]=$mb
            if [[ -n $server_pid ]]; then
                server_cpus[$shape]+="$(awk -v a="$before" -v b="$(cpu_of "$server_pid")" 'BEGIN {print b - a}') "
            fi
        done
    done
    for shape in "${shapes[@]}"; do
        local bytes t c s
        bytes=$(stat -c %s "$work/$shape.jsonl")
        t=$(tr ' ' '\n' <<<"${times[$shape]}" | grep . | median)
        c=$(tr ' ' '\n' <<<"${cpus[$shape]}" | grep . | median)
        s="(included)"
        [[ -n $server_pid ]] && s=$(printf '%.2f' "$(tr ' ' '\n' <<<"${server_cpus[$shape]}" | grep . | median)")
        awk -v label="$label" -v shape="$shape" -v n="$count" -v bytes="$bytes" -v t="$t" -v c="$c" \
            -v rss="${rss[$shape]}" -v s="$s" 'BEGIN {
                printf "| %s | %s | %d | %.0f MB | %.3f s | %.0f | %.2f M | %d MB | %.2f | %s |\n",
                    label, shape, n, bytes / 1e6, t, bytes / 1e6 / t, n / t / 1e6, rss, c, s
            }'
    done
}

echo "| server | input | lines | size | median time (of $runs) | MB/s | problems/s | client peak RSS | client CPU s | server CPU s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
if [[ -z $only || $only == embedded ]]; then
    run_all embedded
fi
if [[ -z $only || $only == separate ]]; then
    "$server_bin" --listen 127.0.0.1:0 >"$work/server.txt" 2>/dev/null &
    server_pid=$!
    addr=$(listening_address "$work/server.txt" 50)
    run_all separate --server "http://$addr"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
fi
