#!/usr/bin/env bash
# Prints the path of a ghz built from github.com/bojand/ghz at the pinned version
# (GHZ_VERSION overrides it), installing it with `go install` into target/tools/bin (or
# $GOBIN) when no such binary is found; GHZ names a binary to use as it is.
# `ghz-install.sh --version` prints the version it installs. Used by ghz.sh and floor.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
ghz_version=${GHZ_VERSION:-v0.121.0}
if [[ ${1:-} == --version ]]; then
    echo "$ghz_version"
    exit 0
fi

for candidate in "${GHZ:-}" "${GOBIN:-$target/tools/bin}/ghz" "$(command -v ghz || true)" \
    "$(go env GOPATH 2>/dev/null)/bin/ghz"; do
    [[ -n $candidate && -x $candidate ]] || continue
    # `ghz --version` says "dev" for `go install` builds; the module version is in the binary.
    if [[ -n ${GHZ:-} ]] || go version -m "$candidate" 2>/dev/null | grep -q "mod.*github.com/bojand/ghz.*$ghz_version"; then
        echo "$candidate"
        exit 0
    fi
done
command -v go >/dev/null || { echo "ghz-install.sh: ghz is missing and so is go to install it" >&2; exit 1; }
gobin=${GOBIN:-$target/tools/bin}
echo "ghz-install.sh: installing ghz $ghz_version into $gobin" >&2
mkdir -p "$gobin"
GOBIN=$gobin go install "github.com/bojand/ghz/cmd/ghz@$ghz_version" >&2
echo "$gobin/ghz"
