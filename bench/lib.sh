# shellcheck shell=bash
# Helpers the bench scripts source: `source "$root/bench/lib.sh"`.

# CPU seconds (user + system) process $1 has used so far.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{printf "%.4f", ($14 + $15) / hz}' "/proc/$1/stat"
}

# The median of the numbers on standard input, one a line.
median() {
    sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# Waits up to $2 tenths of a second for a server's `listening on ADDR` line in file $1
# and prints ADDR (nothing when it never came).
listening_address() {
    for _ in $(seq "$2"); do
        grep -q "listening on" "$1" 2>/dev/null && break
        sleep 0.1
    done
    sed -n 's/^listening on //p' "$1"
}
