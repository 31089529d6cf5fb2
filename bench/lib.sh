# shellcheck shell=bash
# Helpers the bench and CI scripts source: `source "$root/bench/lib.sh"`.

# CPU seconds (user + system) process $1 has used so far.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{printf "%.4f", ($14 + $15) / hz}' "/proc/$1/stat"
}

# The median of the numbers on standard input, one a line.
median() {
    sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# Prints ADDR from the first `listening on ADDR` line a server writes to file $1, waiting
# up to $2 tenths of a second for it; the file need not exist yet (a server started in
# the background may not have opened it). With $3, the server's PID, it gives up as soon
# as that process has exited. Returns 1, printing nothing, when no line came.
listening_address() {
    local addr
    for _ in $(seq "$2"); do
        addr=$(sed -n '/^listening on /{s///p;q}' "$1" 2>/dev/null)
        if [[ -n $addr ]]; then
            echo "$addr"
            return 0
        fi
        if [[ -n ${3:-} ]] && ! kill -0 "$3" 2>/dev/null; then
            return 1
        fi
        sleep 0.1
    done
    return 1
}
