#!/usr/bin/env bash
# HTTP/JSON with curl and Connect's own client: starts gamesolver-server with default flags
# on a loopback port, and a second one with TLS (a CA and a server certificate for
# localhost made here with openssl), then:
# - runs README's curl line as README writes it (only the address changed), over HTTP/1.1
#   and HTTP/2 (--http2-prior-knowledge), and over TLS with each, and checks its output
#   against the answer README shows under it, byte for byte;
# - checks a bad problem's exact answer (HTTP 400 and Connect's error body with the AIP-193
#   details), the GET form, and a body refused for its content type;
# - runs tests/grpc-web/connect.test.mjs (node: @connectrpc/connect-node's Connect transport
#   over HTTP/1.1 and HTTP/2, JSON, binary and gzip, stubs from buf generate).
# Needs curl with HTTP/2, openssl, node >= 20 and npm (installs the test's packages with
# `npm ci`, pinned by tests/grpc-web/package-lock.json). Always stops the servers it started.
# Environment: CARGO_TARGET_DIR, CI_INSTALL_ONLY (1: install, then stop; .ci/prefetch.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"

# start_server, stop_servers and on_exit, as the Go interop check uses them.
# shellcheck source=.ci/interop-go.sh
source .ci/interop-go.sh
work="$target/connect"
log() { echo "connect.sh: $*" >&2; }
trap on_exit EXIT
trap 'exit 130' INT TERM
rm -rf "$work"
mkdir -p "$work"

curl --version | grep -qw HTTP2 || { log "needs a curl with HTTP/2 (found: $(curl --version | head -1))"; exit 1; }
command -v openssl >/dev/null || { log "needs openssl on PATH"; exit 1; }
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
((node_major >= 20)) || { log "needs node >= 20 and npm on PATH (found: $(node --version 2>&1 || true))"; exit 1; }

log "npm ci in tests/grpc-web"
(cd tests/grpc-web && npm ci --silent --no-audit --no-fund)
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only

log "cargo build --bins"
cargo build --quiet --bins

# --- README's line and its answer --------------------------------------------------------
# The curl command: the `curl -sS` line of README and its continuation lines; the answer:
# the first line of the json block that follows it.
readme_curl=$(awk '/^curl -sS /{on=1} on{print; if (!/\\$/) exit}' README.md)
readme_answer=$(awk '/^curl -sS /{seen=1} seen && /^```json/{getline; print; exit}' README.md)
[[ -n $readme_curl && -n $readme_answer ]] || { log "README has no curl line with an answer under it"; exit 1; }
[[ $readme_curl == *127.0.0.1:50051* ]] || { log "README's curl line does not call 127.0.0.1:50051"; exit 1; }

# Runs README's line against `base` (scheme://host:port) with curl's `extra` options
# inserted after `curl`, and compares its output with README's answer.
check_readme_line() {
    local base=$1 what=$2
    shift 2
    local command=${readme_curl//http:\/\/127.0.0.1:50051/$base}
    command="curl ${*} ${command#curl }"
    local got
    got=$(timeout 30 bash -c "$command") || { log "$what: curl failed: $command"; exit 1; }
    if [[ $got != "$readme_answer" ]]; then
        log "$what: README's curl line answered"
        echo "$got" >&2
        log "but README shows"
        echo "$readme_answer" >&2
        exit 1
    fi
    log "$what: README's answer"
}

start_server plain
addr=$server_addr
check_readme_line "http://$addr" "HTTP/1.1" --http1.1
check_readme_line "http://$addr" "HTTP/2 (prior knowledge)" --http2-prior-knowledge

# --- TLS: a CA and a server certificate for localhost ---------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=connect-ci-ca \
    -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$work/server.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
    -extfile "$work/server.ext" -out "$work/server.pem" 2>/dev/null
start_server tls --tls-cert "$work/server.pem" --tls-key "$work/server.key"
tls_port=${server_addr##*:}
check_readme_line "https://localhost:$tls_port" "TLS, HTTP/1.1" --http1.1 --cacert "$work/ca.pem"
check_readme_line "https://localhost:$tls_port" "TLS, HTTP/2" --http2 --cacert "$work/ca.pem"

# --- an error, the GET form, a form body ---------------------------------------------------
url="http://$addr/gamesolver.v1.GameSolverService/Solve"
expect() {
    local what=$1 want=$2 got=$3
    [[ $got == "$want" ]] || { log "$what: got"; echo "$got" >&2; log "want"; echo "$want" >&2; exit 1; }
    log "$what: as expected"
}
odd='{"code":"invalid_argument","message":"sum game: length 3 is odd; the string must split into two equal halves","details":[{"type":"google.rpc.ErrorInfo","value":"CgpPRERfTEVOR1RIEg1nYW1lc29sdmVyLnYxGgsKBmxlbmd0aBIBMw","debug":{"reason":"ODD_LENGTH","domain":"gamesolver.v1","metadata":{"length":"3"}}},{"type":"google.rpc.BadRequest","value":"Cl4KFHByb2JsZW0uc3VtX2dhbWUubnVtEkZzdW0gZ2FtZTogbGVuZ3RoIDMgaXMgb2RkOyB0aGUgc3RyaW5nIG11c3Qgc3BsaXQgaW50byB0d28gZXF1YWwgaGFsdmVz","debug":{"fieldViolations":[{"field":"problem.sum_game.num","description":"sum game: length 3 is odd; the string must split into two equal halves"}]}}]}'
for version in --http1.1 --http2-prior-knowledge; do
    got=$(timeout 30 curl -sS "$version" -w ' %{http_code}' -H 'Content-Type: application/json' \
        -d '{"problem":{"sumGame":{"num":"123"}}}' "$url")
    expect "a bad problem ($version)" "$odd 400" "$got"
done
got=$(timeout 30 curl -sS -G -w ' %{http_code}' --data-urlencode encoding=json \
    --data-urlencode 'message={"problem":{"id":"g","stoneGameIv":{"n":"7"}}}' "$url")
expect "GET" '{"solution":{"id":"g","aliceWins":false,"winner":"WINNER_BOB"}} 200' "$got"
got=$(timeout 30 curl -sS -w ' %{http_code}' -d '{"problem":{}}' "$url")
want='{"code":"invalid_argument","message":"content-type application/x-www-form-urlencoded is not a Connect unary request: send Content-Type: application/json (or application/proto)"} 415'
expect "curl -d without a content type" "$want" "$got"

# --- Connect's own client ------------------------------------------------------------------
log "node tests against $addr"
# Each call has its own deadline, each test 30 s, the whole run 120 s.
(cd tests/grpc-web && GAMESOLVER_ADDR=$addr timeout 120 node --test --test-timeout=30000 connect.test.mjs)
