#!/usr/bin/env bash
# Faults on the wire (tests/faults/suite.py): the bulk client over 200,000 problems and a
# grpcio unary client, through Toxiproxy in front of a release server, one toxic at a
# time; the suite itself runs in under 5 minutes (docs/reliability-faults.md).
# Installs Toxiproxy (`go install`, pinned) and a venv (grpcio, grpcio-tools) when
# missing; everything listens on 127.0.0.1; the suite stops every process it started.
# Environment: CARGO_TARGET_DIR, FAULTS_COUNT (problems, default 200000), CI_INSTALL_ONLY
# (1: install, then stop; .ci/prefetch.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
toxiproxy_version=v2.5.0

log() { echo "faults.sh: $*" >&2; }

# Toxiproxy's server and CLI, built once a version into the target dir; `go install` names
# them after their folders (server, cli), so they are copied under their real names.
gobin="$target/toxiproxy-$toxiproxy_version"
if [[ ! -x $gobin/server || ! -x $gobin/cli ]]; then
    log "go install toxiproxy $toxiproxy_version"
    mkdir -p "$gobin"
    GOBIN="$gobin" go install "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version" \
        "github.com/Shopify/toxiproxy/v2/cmd/cli@$toxiproxy_version"
fi
bin=$(mktemp -d)
work="$target/faults"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$bin"' EXIT
cp "$gobin/server" "$bin/toxiproxy-server"
cp "$gobin/cli" "$bin/toxiproxy-cli"

# The same pins as .ci/interop.sh: the versions the package's stubs were generated for.
venv="$target/faults-venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('grpcio') != '1.85.1' or m.version('protobuf') != '7.36.2')" 2>/dev/null; then
    log "python venv (grpcio, protobuf)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "grpcio==1.85.1" "grpcio-status==1.85.1" "protobuf==7.36.2"
fi
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only
"$venv/bin/pip" install --quiet --force-reinstall --no-deps ./clients/python

# GAMESOLVER_RELEASE_DIR: release binaries already built (.ci/run hands over the static
# ones .ci/deploy.sh built, so that CI makes one release build, not two).
release="${GAMESOLVER_RELEASE_DIR:-$target/release}"
if [ -z "${GAMESOLVER_RELEASE_DIR:-}" ]; then
    log "cargo build --release --bins"
    cargo build --release --quiet --bins
fi

# The suite's own bound is 5 minutes; `timeout` sends SIGTERM, on which it stops its
# children and exits non-zero.
started=$SECONDS
status=0
timeout -k 10 300 "$venv/bin/python" tests/faults/suite.py \
    --server-bin "$release/gamesolver-server" \
    --client-bin "$release/gamesolver-client" \
    --toxiproxy-server "$bin/toxiproxy-server" --toxiproxy-cli "$bin/toxiproxy-cli" \
    --work "$work" --count "${FAULTS_COUNT:-200000}" || status=$?
log "suite took $((SECONDS - started)) s (exit $status); logs in $work"
exit "$status"
