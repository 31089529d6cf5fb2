#!/usr/bin/env bash
# End-to-end benchmark of gamesolver-client: `gen` + `solve` of N small problems, once
# through the embedded server and once through a separate gamesolver-server process.
# Prints problems/s and peak RSS of each run as a markdown table, and checks that every
# input line got exactly one output line. Every run is bounded by --timeout.
#
# Usage: bench/client.sh [--count 1000000] [--seed 1] [--timeout 300] [--runs 3]
#                        [--only embedded|separate] [-- EXTRA SOLVE FLAGS...]
# Environment: CARGO_TARGET_DIR. Needs GNU time (/usr/bin/time; installed with apt-get
# when missing and possible).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
count=1000000
seed=1
timeout_s=300
runs=3
only=
extra=()
while (($#)); do
    case $1 in
        --count) count=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done

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

input="$work/problems.jsonl"
start=$(date +%s.%N)
timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" -o "$input"
gen_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
printf 'gen: %d problems, %s bytes, %.2fs\n' "$count" "$(stat -c %s "$input")" "$gen_s" >&2

# Runs `solve` under GNU time; prints "problems/s peak_rss_mb cpu_seconds".
measure() {
    local output="$work/out.jsonl" report="$work/time.txt" summary
    rm -f "$output"
    timeout "$timeout_s" /usr/bin/time -v -o "$report" \
        "$client" solve "$input" -o "$output" "$@" "${extra[@]}" 2>"$work/stderr.txt" || {
        cat "$work/stderr.txt" >&2
        return 1
    }
    local lines
    lines=$(wc -l <"$output")
    if ((lines != count)); then
        echo "expected $count output lines, got $lines" >&2
        return 1
    fi
    summary=$(tail -n 1 "$work/stderr.txt")
    echo "  $summary" >&2
    local rate rss_kb cpu
    rate=$(sed -E 's/.* ([0-9]+) problems\/s.*/\1/' <<<"$summary")
    rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$report")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$report")
    echo "$rate $((rss_kb / 1024)) $cpu"
}

# CPU seconds (user + system) a process has used so far.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"
}

# Best (highest rate) of $runs, with that run's CPU seconds; peak RSS is the largest seen.
best_of() {
    local best_rate=0 best_cpu=0 max_rss=0 rate rss cpu
    for ((i = 1; i <= runs; i++)); do
        result=$(measure "$@") || return 1
        read -r rate rss cpu <<<"$result"
        if ((rate > best_rate)); then best_rate=$rate; best_cpu=$cpu; fi
        ((rss > max_rss)) && max_rss=$rss
    done
    echo "$best_rate $max_rss $best_cpu"
}

echo "| server | problems | best problems/s (of $runs) | client peak RSS | client CPU s | server peak RSS | server CPU s per run |"
echo "|---|---|---|---|---|---|---|"
if [[ -z $only || $only == embedded ]]; then
    echo "embedded:" >&2
    result=$(best_of) || exit 1
    read -r rate rss cpu <<<"$result"
    echo "| embedded (in-process) | $count | $rate | $rss MB | $cpu | (included) | (included) |"
fi
if [[ -z $only || $only == separate ]]; then
    echo "separate:" >&2
    "$server_bin" --listen 127.0.0.1:0 >"$work/server.txt" 2>/dev/null &
    server_pid=$!
    for _ in $(seq 50); do
        grep -q "listening on" "$work/server.txt" 2>/dev/null && break
        sleep 0.1
    done
    addr=$(sed -n 's/^listening on //p' "$work/server.txt")
    result=$(best_of --server "http://$addr") || exit 1
    read -r rate rss cpu <<<"$result"
    server_rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
    server_cpu=$(awk -v t="$(cpu_of "$server_pid")" -v n="$runs" 'BEGIN {printf "%.2f", t / n}')
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    echo "| separate gamesolver-server | $count | $rate | $rss MB | $cpu | $((server_rss_kb / 1024)) MB | $server_cpu |"
fi
