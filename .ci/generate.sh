#!/usr/bin/env bash
# Everything generated from the wire contract, by one `buf generate` (template
# buf.gen.yaml), committed so that users of the packages need no toolchain:
#   docs/api.md                   the API reference from the proto's comments (protoc-gen-doc,
#                                 with the template docs/api.md.tmpl)
#   clients/go/gamesolver/v1/     the Go module's stubs (protoc-gen-go, protoc-gen-go-grpc)
#   clients/python/src/gamesolver/  the Python package's stubs (grpcio-tools' protoc)
#   tests/grpc-web/gen/           the gRPC-Web test's stubs (protoc-gen-es)
# After any change to proto/, run it and commit what it writes.
#
# Usage: .ci/generate.sh            regenerate in place
#        .ci/generate.sh --check    regenerate into a scratch directory and fail, showing the
#                                   diff, when a committed file differs (CI, from .ci/buf.sh)
#
# Pinned, installed when missing: buf (.ci/buf.sh's pin), protoc-gen-go (the
# google.golang.org/protobuf version of clients/go/go.mod, so generator and runtime agree),
# protoc-gen-go-grpc and protoc-gen-doc (below) by `go install` into target/tools/bin;
# grpcio-tools (below) in a venv under target/; protoc-gen-es by `npm ci` from
# tests/grpc-web/package-lock.json.
# Environment: GOBIN, CARGO_TARGET_DIR.
set -euo pipefail

protoc_gen_go_grpc_version=v1.6.2
protoc_gen_doc_version=v1.5.1
grpcio_tools_version=1.85.1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
# Each is wholly the generator's: regenerating replaces the directory (or file).
outputs=(docs/api.md clients/go/gamesolver clients/python/src/gamesolver tests/grpc-web/gen)

log() { echo "generate.sh: $*" >&2; }

mode="write"
case ${1:-} in
    "") ;;
    --check) mode=check ;;
    *) echo "usage: .ci/generate.sh [--check]" >&2; exit 2 ;;
esac

# shellcheck source=.ci/buf.sh
source .ci/buf.sh

# --- the plugins, pinned ----------------------------------------------------------------
buf=$(ensure_buf)
protobuf_version=$(cd clients/go && go list -m -f '{{.Version}}' google.golang.org/protobuf)
protoc_gen_go=$(ensure_go_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$protobuf_version")
protoc_gen_go_grpc=$(ensure_go_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
    "$protoc_gen_go_grpc_version")
protoc_gen_doc=$(ensure_go_tool protoc-gen-doc github.com/pseudomuto/protoc-gen-doc/cmd/protoc-gen-doc \
    "$protoc_gen_doc_version")

venv=$target/generate-venv
if ! "$venv/bin/python3" -c "import importlib.metadata as m, sys
sys.exit(m.version('grpcio-tools') != '$grpcio_tools_version')" 2>/dev/null; then
    log "installing grpcio-tools $grpcio_tools_version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "grpcio-tools==$grpcio_tools_version"
fi

if ! (cd tests/grpc-web && npm ls --silent @bufbuild/protoc-gen-es >/dev/null 2>&1); then
    log "npm ci in tests/grpc-web"
    (cd tests/grpc-web && npm ci --silent --no-audit --no-fund)
fi

# --- generate into a scratch directory ------------------------------------------------------
mkdir -p "$target"
scratch=$(mktemp -d "$target/generate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# buf runs local plugins from PATH and `python3 -m grpc_tools.protoc` for the Python ones:
# the pinned ones come first.
PATH="$(dirname "$protoc_gen_go"):$(dirname "$protoc_gen_go_grpc"):$(dirname "$protoc_gen_doc"):$venv/bin:$root/tests/grpc-web/node_modules/.bin:$PATH" \
    "$buf" generate --template buf.gen.yaml --output "$scratch"

for output in "${outputs[@]}"; do
    [[ -e $scratch/$output ]] || { log "buf generate made no $output"; exit 1; }
done

# --- write, or compare ----------------------------------------------------------------------
if [[ $mode == write ]]; then
    for output in "${outputs[@]}"; do
        rm -rf "$output"
        mkdir -p "$(dirname "$output")"
        cp -R "$scratch/$output" "$output"
    done
    log "wrote ${outputs[*]}"
    exit 0
fi

stale=()
for output in "${outputs[@]}"; do
    if ! diff -ru "$output" "$scratch/$output" >&2; then
        stale+=("$output")
    fi
done
if ((${#stale[@]})); then
    log "generated files are not current: ${stale[*]} (the diff above: committed, then"
    log "what proto/ makes now). Run .ci/generate.sh and commit what it writes."
    exit 1
fi
log "generated files are current: ${outputs[*]}"
