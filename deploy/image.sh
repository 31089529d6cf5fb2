#!/usr/bin/env bash
# Builds the gamesolver-server container image from a clone, in one command: the static
# binary (glibc linked in, +crt-static), its debug info stripped, a build context holding
# only it and the table's empty directory, then `podman build` or `docker build` of
# Containerfile (whichever is installed and answers; podman first).
#
# Usage: deploy/image.sh [--profile NAME] [--target TRIPLE] [--tag IMAGE] [--engine podman|docker]
#                        [-- ENGINE-BUILD-ARGS...]
#   --profile  cargo profile of the binary: `dist` when Cargo.toml has one (the fat-LTO
#              build for images and figures), else `release`
#   --target   target triple (default: the host's)
#   --tag      image name (default: gamesolver-server:VERSION, VERSION from Cargo.toml)
#   --engine   podman or docker (default: podman if installed, else docker)
#   after --   passed to `ENGINE build` (for example --quiet, or --layers=false for podman)
# Prints the image's name and size on the last line. Environment: CARGO_TARGET_DIR.
# docs/deployment.md describes the image.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

log() { echo "image.sh: $*" >&2; }
fail() { log "$*"; exit 1; }
# Prints the usage; exits with STATUS.
usage() { sed -n '/^# Usage:/,/^# docs/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "$1"; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[[ -n $version ]] || fail "no version in Cargo.toml"
if grep -q '^\[profile\.dist\]' Cargo.toml; then profile=dist; else profile=release; fi
triple=$(rustc -vV | sed -n 's/^host: //p')
tag=gamesolver-server:$version
engine=
engine_args=()
while (($#)); do
    case $1 in
        --profile) profile=${2:?--profile needs a name}; shift 2 ;;
        --target) triple=${2:?--target needs a triple}; shift 2 ;;
        --tag) tag=${2:?--tag needs an image name}; shift 2 ;;
        --engine) engine=${2:?--engine needs podman or docker}; shift 2 ;;
        --) shift; engine_args=("$@"); break ;;
        -h | --help) usage 0 ;;
        *) log "unknown argument: $1"; usage 2 ;;
    esac
done

# The engine: podman, or a docker whose daemon answers (a docker client alone cannot build).
if [[ -z $engine ]]; then
    if command -v podman >/dev/null; then
        engine=podman
    elif command -v docker >/dev/null; then
        engine=docker
    else
        fail "neither podman nor docker is installed (Debian, Ubuntu: apt-get install podman)"
    fi
fi
case $engine in
    podman | docker) command -v "$engine" >/dev/null || fail "--engine $engine: $engine is not installed" ;;
    *) fail "--engine $engine: podman or docker" ;;
esac
if [[ $engine == docker ]] && ! docker info >/dev/null 2>&1; then
    fail "docker is installed but its daemon does not answer: start it (or use podman, which needs none)"
fi
command -v objcopy >/dev/null || fail "objcopy is missing (binutils)"

# The binary. cargo names the dev profile's directory `debug`.
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $profile in
    dev) profile_dir=debug ;;
    *) profile_dir=$profile ;;
esac
binary=$target_dir/$triple/$profile_dir/gamesolver-server
log "cargo build --profile $profile --target $triple --bin gamesolver-server (static)"
RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --profile "$profile" --target "$triple" --bin gamesolver-server
[[ -x $binary ]] || fail "cargo built no $binary"
if readelf -d "$binary" 2>/dev/null | grep -q NEEDED; then
    fail "$binary needs shared libraries: it would not run on an empty base"
fi

# The context: the binary with its debug info stripped (the symbols stay, so that a
# backtrace names its functions), and the table's directory.
context=$(mktemp -d "${TMPDIR:-/tmp}/gamesolver-image.XXXXXX")
trap 'rm -rf "$context"' EXIT
mkdir "$context/state"
objcopy --strip-debug "$binary" "$context/gamesolver-server"

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
log "$engine build -f Containerfile -t $tag"
"$engine" build -f Containerfile -t "$tag" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    "${engine_args[@]}" "$context" >&2
size=$("$engine" image inspect "$tag" --format '{{.Size}}')
log "built $tag ($size bytes) from the $profile profile"
echo "$tag $size"
