#!/usr/bin/env bash
# ghz smoke run for CI: every RPC and the health check for about a second each against the
# real server (debug build by default; GHZ_SMOKE_PROFILE=release for the release build),
# a sample of answers checked. Fails on any non-OK call or wrong answer. bench/ghz.sh
# installs ghz when missing and always stops the server it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bench/ghz.sh --smoke "$@"
