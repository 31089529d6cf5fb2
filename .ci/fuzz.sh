#!/usr/bin/env bash
# Every cargo-fuzz target (as `cargo fuzz list` names them, so a new one is picked up) for
# FUZZ_SECONDS (default 24: five targets in the two minutes four took at 30 s) each, from a copy of its committed corpus in fuzz/corpus/, so
# that the run never writes into the repository. Fails on a crash, a leak, a timeout or
# an out-of-memory: libFuzzer then exits non-zero, and the input that did it is kept
# under $CARGO_TARGET_DIR/fuzz-run/artifacts/TARGET/ and named below.
# Installs cargo-fuzz (pinned) with the nightly toolchain when missing.
# CI's run is a smoke run: the targets are built unoptimised (`--dev`, with the same
# sanitizer and debug assertions): the cold build of the crate and its Arrow and tonic
# dependencies is most of the step, and a short run needs no speed. FUZZ_RELEASE=1
# builds them optimised, for a long run.
# Environment: CARGO_TARGET_DIR, FUZZ_SECONDS, FUZZ_RELEASE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
seconds="${FUZZ_SECONDS:-24}"
cargo_fuzz_version=0.13.2

log() { echo "fuzz.sh: $*" >&2; }

if ! rustup toolchain list | grep -q '^nightly'; then
    log "rustup toolchain install nightly"
    rustup toolchain install nightly --profile minimal
fi
if [[ $(cargo +nightly fuzz --version 2>/dev/null) != "cargo-fuzz $cargo_fuzz_version" ]]; then
    log "cargo install cargo-fuzz $cargo_fuzz_version"
    cargo +nightly install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi

work="$target/fuzz-run"
rm -rf "$work"
mkdir -p "$work"
# Its own target dir: the fuzz build's flags (sanitizer, coverage) differ from every other.
fuzz=(--fuzz-dir fuzz --target-dir "$target/fuzz")
[[ ${FUZZ_RELEASE:-} == 1 ]] || fuzz+=(--dev)

mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
((${#targets[@]})) || { log "no fuzz targets found"; exit 1; }
log "building ${targets[*]}"
cargo +nightly fuzz build "${fuzz[@]}"

passed=0 failed=0
for name in "${targets[@]}"; do
    corpus="$work/corpus/$name"
    mkdir -p "$corpus" "$work/artifacts/$name"
    if [[ -d fuzz/corpus/$name ]]; then
        cp -R "fuzz/corpus/$name/." "$corpus/"
    fi
    started=$SECONDS
    status=0
    # libFuzzer stops itself after max_total_time; `timeout` is the bound if it does not.
    timeout -k 10 $((seconds + 120)) cargo +nightly fuzz run "${fuzz[@]}" "$name" "$corpus" -- \
        -max_total_time="$seconds" -artifact_prefix="$work/artifacts/$name/" \
        >"$work/$name.log" 2>&1 || status=$?
    runs=$(grep -o 'Done [0-9]* runs' "$work/$name.log" | tail -1 || true)
    if ((status == 0)); then
        passed=$((passed + 1))
        echo "fuzz: PASS $name ($((SECONDS - started)) s, ${runs:-no run count})"
    else
        failed=$((failed + 1))
        echo "fuzz: FAIL $name (exit $status after $((SECONDS - started)) s); log $work/$name.log"
        tail -n 30 "$work/$name.log"
        ls "$work/artifacts/$name" 2>/dev/null | sed "s|^|fuzz:   input kept: $work/artifacts/$name/|"
    fi
done
echo "$passed passed, $failed failed"
((failed == 0))
