#!/usr/bin/env bash
# The wire contract's own checks: `buf lint` (STANDARD + COMMENTS, see buf.yaml),
# `buf breaking` (FILE) of proto/ against the released contract, and that what is
# generated from it and committed is current (.ci/generate.sh --check: the API reference,
# the Go and Python packages, the gRPC-Web test's stubs). Installs buf when missing
# (pinned, `go install`, into target/tools/bin or $GOBIN).
#
# The baseline: there is no Buf Schema Registry here and a git ref would move, so the
# released contract is kept as a committed buf image, buf-baseline/gamesolver-v1.json
# (outside the module, so never compiled as part of it; JSON, pretty-printed, so that a
# new release reads as a diff in review; no source info, so comment edits do not touch
# it). Regenerate it only on a deliberate new release of the contract, never to make
# this check pass: `bash .ci/buf.sh --write-baseline`, and commit it with the proto.
#
# Usage: .ci/buf.sh [--write-baseline]. Sourced (by .ci/generate.sh), it only defines
# ensure_go_tool and ensure_buf.
# Environment: GOBIN, CARGO_TARGET_DIR.
set -euo pipefail

buf_version=v1.75.0
buf_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
buf_baseline=buf-baseline/gamesolver-v1.json

# Prints the path of NAME built from module path PACKAGE at VERSION, installing it with
# `go install` into ${GOBIN:-target/tools/bin} when no such binary is found.
ensure_go_tool() {
    local name=$1 package=$2 version=$3
    local gobin=${GOBIN:-${CARGO_TARGET_DIR:-$buf_root/target}/tools/bin}
    local candidate
    for candidate in "$gobin/$name" "$(command -v "$name" || true)" \
        "$(go env GOPATH 2>/dev/null)/bin/$name"; do
        [[ -n $candidate && -x $candidate ]] || continue
        # The module version `go install` recorded in the binary, whatever --version says.
        local info
        info=$(go version -m "$candidate" 2>/dev/null) || continue
        if grep -Eq "^[[:space:]]+path[[:space:]]+$package\$" <<<"$info" &&
            grep -Eq "^[[:space:]]+mod[[:space:]].*[[:space:]]$version([[:space:]]|\$)" <<<"$info"; then
            echo "$candidate"
            return
        fi
    done
    echo "installing $name $version into $gobin" >&2
    mkdir -p "$gobin"
    GOBIN=$gobin go install "$package@$version" >&2
    echo "$gobin/$name"
}

ensure_buf() {
    ensure_go_tool buf github.com/bufbuild/buf/cmd/buf "$buf_version"
}

if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
    return 0
fi

cd "$buf_root"
buf=$(ensure_buf)
case ${1:-} in
    --write-baseline)
        "$buf" build proto --exclude-source-info -o "$buf_baseline.tmp.json"
        python3 -m json.tool --indent 1 "$buf_baseline.tmp.json" >"$buf_baseline"
        rm "$buf_baseline.tmp.json"
        echo "buf.sh: wrote $buf_baseline"
        ;;
    "")
        echo "== buf lint"
        "$buf" lint proto
        echo "== buf breaking against $buf_baseline"
        "$buf" breaking proto --against "$buf_baseline"
        echo "== generated from the contract: docs/api.md, clients/go, clients/python, tests/grpc-web"
        bash .ci/generate.sh --check
        ;;
    *) echo "usage: .ci/buf.sh [--write-baseline]" >&2; exit 2 ;;
esac
