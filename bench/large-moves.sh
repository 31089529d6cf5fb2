#!/usr/bin/env bash
# Stone Game IV winning moves for large piles through the server, against small piles:
# issue 21's "large piles" target (at least 0.25x the small-pile rate with moves on, and
# about 1x with --winner-only).
#
# One release gamesolver-server, its Stone Game IV table loaded from --table (grown by a
# first request and saved there when missing), is warmed by one pile near 10^9. Then
# gamesolver-client solves four files per round, interleaved: --count random piles up to
# 10^6 and as many in [9·10^8, 10^9), each with moves and with --winner-only. Prints the
# median problems/s (from each process's wall time) and server CPU µs a problem of each,
# the large/small ratios, and the ratio with moves round by round. Every run is bounded
# by --timeout.
#
# Usage: bench/large-moves.sh [--count 200000] [--rounds 5] [--seed 7]
#                             [--table /tmp/gamesolver-iv1e9.table] [--timeout 300]
# Environment: CARGO_TARGET_DIR; SERVER_BIN, a gamesolver-server built elsewhere (for
# A/B runs of two commits; the client is always this tree's).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
target="${CARGO_TARGET_DIR:-$root/target}"
count=200000
rounds=5
seed=7
table=/tmp/gamesolver-iv1e9.table
timeout_s=300
while (($#)); do
    case $1 in
        --count) count=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --table) table=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done

(cd "$root" && cargo build --release --bins --quiet)
client="$target/release/gamesolver-client"
work=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" --mix iv=1 --iv-n 0..1000000 -o "$work/small.jsonl"
timeout "$timeout_s" "$client" gen --count "$count" --seed "$seed" --mix iv=1 --iv-n 900000000..1000000000 \
    -o "$work/large.jsonl"
echo '{"id":"warm","stoneGameIv":{"n":"999999999"}}' >"$work/warm.jsonl"

"${SERVER_BIN:-$target/release/gamesolver-server}" --listen 127.0.0.1:0 --iv-table "$table" >"$work/server.txt" 2>"$work/server.err" &
server_pid=$!
url="http://$(listening_address "$work/server.txt" 100)"
started=$EPOCHREALTIME
timeout "$timeout_s" "$client" solve "$work/warm.jsonl" -o /dev/null --server "$url" --quiet
echo "server warm (table to 10^9) after $(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s" >&2

declare -A rates cpus
cases=("small moves" "large moves" "small winner" "large winner")
for ((round = 1; round <= rounds; round++)); do
    for case in "${cases[@]}"; do
        read -r file mode <<<"$case"
        flags=()
        [[ $mode == winner ]] && flags=(--winner-only)
        before=$(cpu_of "$server_pid")
        a=$EPOCHREALTIME
        timeout "$timeout_s" "$client" solve "$work/$file.jsonl" -o "$work/out.jsonl" --server "$url" --quiet "${flags[@]}"
        b=$EPOCHREALTIME
        lines=$(wc -l <"$work/out.jsonl")
        if ((lines != count)) || grep -q '"error"' "$work/out.jsonl"; then
            echo "$case: expected $count answers without errors, got $lines lines" >&2
            exit 1
        fi
        rates[$case]+="$(awk -v a="$a" -v b="$b" -v n="$count" 'BEGIN {print n / (b - a)}') "
        cpus[$case]+="$(awk -v a="$before" -v b="$(cpu_of "$server_pid")" -v n="$count" 'BEGIN {print (b - a) * 1e6 / n}') "
    done
    echo "round $round of $rounds done" >&2
done

# The numbers of a space-separated list, one a line.
one_a_line() {
    tr ' ' '\n' <<<"$1" | grep .
}

declare -A rate cpu
echo "| piles | answers | problems/s (median of $rounds) | server CPU µs a problem |"
echo "|---|---|---:|---:|"
for case in "${cases[@]}"; do
    rate[$case]=$(one_a_line "${rates[$case]}" | median)
    cpu[$case]=$(one_a_line "${cpus[$case]}" | median)
    read -r file mode <<<"$case"
    label="up to 10^6"
    [[ $file == large ]] && label="[9·10^8, 10^9)"
    answers="with moves"
    [[ $mode == winner ]] && answers="--winner-only"
    printf '| %s | %s | %.0f | %.2f |\n' "$label" "$answers" "${rate[$case]}" "${cpu[$case]}"
done
awk -v lm="${rate[large moves]}" -v sm="${rate[small moves]}" -v lw="${rate[large winner]}" \
    -v sw="${rate[small winner]}" 'BEGIN {
        printf "large/small, with moves: %.3f (target at least 0.25); --winner-only: %.3f (about 1)\n", lm / sm, lw / sw
    }'
# The same ratio round by round (each round's four runs ran back to back), since the
# small-pile run is short enough for its rate to move between rounds.
per_round=$(paste -d' ' <(one_a_line "${rates[large moves]}") <(one_a_line "${rates[small moves]}") |
    awk '{printf "%.3f\n", $1 / $2}')
echo "large/small with moves, round by round: $(tr '\n' ' ' <<<"$per_round")(median $(median <<<"$per_round"), $(awk '$1 >= 0.25' <<<"$per_round" | wc -l) of $rounds at least 0.25)"
