#!/usr/bin/env bash
# A short soak for CI: bench/soak.sh --short, every hostile probe of the full soak and the
# mixed load with clients killed at random, with the same checks (bounds held, answers
# right, memory back near idle, the server still up), in about 90 s after the build.
# Bounded at 4 minutes; bench/soak.py stops the servers it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec timeout -k 10 240 bash bench/soak.sh --short
