#!/usr/bin/env bash
# CI of the deployment artefacts, each checked by the tool that uses it:
#   image       the statically linked build, the image made by deploy/image.sh (podman),
#               its filesystem exported and the server run from it (read-only root, uid
#               65532, its own network namespace, the image's environment), then
#               grpc-health-probe and one Solve through grpcurl;
#   kubernetes  `kubectl kustomize` of the base (and with the ServiceMonitor component),
#               deploy/kubernetes/check-manifests.py on the YAML, and the Deployment's
#               exact environment and arguments through `gamesolver-server --check-config`
#               in the image's root with its volumes mounted;
#   systemd     `systemd-analyze verify` and `security` of the unit, the environment file
#               through --check-config, and the system calls the server makes under load
#               (strace) against the unit's SystemCallFilter;
#   prometheus  `promtool check rules` and `promtool test rules`, then Prometheus scraping
#               the image's server under load, and deploy/prometheus/check-queries.py
#               running every dashboard panel's and alert's query through its HTTP API.
# Runs on a fresh Debian machine as root: installs what it lacks (podman, prometheus,
# strace, iproute2 from apt; grpc-health-probe and grpcurl pinned, with `go install`),
# builds what it runs, bounds every wait and stops everything it started.
#
# Usage: .ci/deploy.sh [--profile NAME]   (the binaries' cargo profile; default release)
# Environment: CARGO_TARGET_DIR, GOBIN, CI_INSTALL_ONLY (1: install, then stop; .ci/prefetch.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never

profile=release
while (($#)); do
    case $1 in
        --profile) profile=${2:?--profile needs a name}; shift 2 ;;
        *) echo "deploy.sh: unknown argument $1 (usage: .ci/deploy.sh [--profile NAME])" >&2; exit 2 ;;
    esac
done

# What the server side still has to provide. While a switch is on, the check stands in
# for the missing piece as its step says; turn each off once the binary has it.
# GAMESOLVER_* variables: while pending, each is passed as its flag instead.
pending_env=false
# --check-config: while pending, the configuration is started for real (in a private
# network namespace) and stopped once it listens.
pending_check_config=false
# Series that only have to parse, not to have data.
pending_series=()

health_probe_version=v0.4.63
grpcurl_version=v1.9.3
triple=x86_64-unknown-linux-gnu
service=gamesolver.v1.GameSolverService
target=${CARGO_TARGET_DIR:-$root/target}
work=$(mktemp -d /tmp/gamesolver-deploy.XXXXXX)
image=localhost/gamesolver-server:ci-$$
container=
pids=()

log() { echo "deploy.sh: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

# Stops what this script started, newest first: TERM, then KILL after 10 s.
cleanup() {
    local status=$? pid i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        pid=${pids[i]}
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    [[ -z $container ]] || podman rm --force "$container" >/dev/null 2>&1 || true
    podman image exists "$image" 2>/dev/null && podman rmi --force "$image" >/dev/null 2>&1 || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

# Waits up to SECONDS for COMMAND to succeed.
wait_for() {
    local what=$1 seconds=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "$what: not within $seconds s"
        sleep 0.2
    done
}

# --- tools ----------------------------------------------------------------------------
install_tools() {
    local wanted=(podman prometheus strace iproute2 file) missing=() package
    for package in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$package")
    done
    python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
    if ((${#missing[@]})); then
        log "apt-get install ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    # A python3 of its own (pyenv, a venv) does not see Debian's package.
    python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q pyyaml
    command -v kubectl >/dev/null || fail "kubectl is missing (it renders deploy/kubernetes)"
    # ensure_go_tool: the pinned `go install` the other CI scripts use.
    # shellcheck source=.ci/buf.sh
    source "$root/.ci/buf.sh"
    health_probe=$(ensure_go_tool grpc-health-probe github.com/grpc-ecosystem/grpc-health-probe "$health_probe_version")
    grpcurl=$(ensure_go_tool grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl "$grpcurl_version")
}

# --- build ----------------------------------------------------------------------------
# The image's binary: glibc linked statically (the musl target is not installable here),
# so it runs on an empty base. The client drives the load. The same flags as
# deploy/image.sh's, so that its build of the server finds this one up to date.
build() {
    log "cargo build --profile $profile --target $triple (static)"
    RUSTFLAGS='-C target-feature=+crt-static' \
        cargo build --profile "$profile" --target "$triple" --bin gamesolver-server --bin gamesolver-client
    local dir=$profile
    [[ $profile != dev ]] || dir=debug
    server_bin=$target/$triple/$dir/gamesolver-server
    client_bin=$target/$triple/$dir/gamesolver-client
    file -L "$server_bin" | grep -q 'static' || fail "$server_bin is not statically linked: $(file -L "$server_bin")"
    ! readelf -d "$server_bin" | grep -q NEEDED || fail "$server_bin needs shared libraries"
    "$server_bin" --help >"$work/help.txt"
    # The pending switches against what the binary has.
    if grep -q 'env: GAMESOLVER_LISTEN' "$work/help.txt"; then
        ! $pending_env || log "note: the server takes GAMESOLVER_* variables now: set pending_env=false"
    else
        $pending_env || fail "the server takes no GAMESOLVER_* variables; pending_env=true until it does"
    fi
    if grep -q -- '--check-config' "$work/help.txt"; then
        ! $pending_check_config || log "note: the server has --check-config now: set pending_check_config=false"
    else
        $pending_check_config || fail "the server has no --check-config; pending_check_config=true until it has"
    fi
}

# --- running the image's filesystem -----------------------------------------------------
# The server as a container runtime would start it, from the image's exported root:
# read-only, /proc mounted, a fresh tmpfs at each volume mount, the image's numeric user, only the given
# environment, and (with NET=private) a network namespace of its own holding just a
# loopback, so 0.0.0.0 is reachable from nothing else. Other tools join that namespace
# with `in_net PID`. Usage: NET=private|host USER MOUNTS ENV ARGS PIDFILE [-- ARG...],
# MOUNTS a file of paths, ENV and ARGS NUL-separated files; the last PID written to
# PIDFILE is the server's.
run_in_image() {
    local net=$1 user=$2 mounts=$3 env=$4 args=$5 pidfile=$6
    shift 6
    [[ ${1:-} == -- ]] && shift
    local unshare=(unshare --mount --fork)
    [[ $net == private ]] && unshare+=(--net)
    "${unshare[@]}" -- bash -euc '
        rootfs=$1 net=$2 user=$3 mounts=$4 env=$5 args=$6 pidfile=$7 chroot=$8
        shift 8
        [[ $net == private ]] && ip link set lo up
        while read -r mount; do mkdir -p "$rootfs$mount"; done <"$mounts"
        # /proc, as every container runtime mounts it (the process metrics read it).
        mkdir -p "$rootfs/proc"
        mount --bind "$rootfs" "$rootfs"
        mount -o remount,bind,ro "$rootfs"
        mount --rbind /proc "$rootfs/proc"
        while read -r mount; do
            mount -t tmpfs -o "mode=0750,uid=${user%:*},gid=${user#*:}" tmpfs "$rootfs$mount"
        done <"$mounts"
        mapfile -d "" environment <"$env"
        mapfile -d "" arguments <"$args"
        echo $$ >"$pidfile"
        exec env -i "${environment[@]}" "$chroot" --userspec="$user" "$rootfs" \
            /usr/local/bin/gamesolver-server "${arguments[@]}" "$@"
    ' _ "$rootfs" "$net" "$user" "$mounts" "$env" "$args" "$pidfile" "$(command -v chroot)" "$@"
}

in_net() {
    local pid=$1
    shift
    nsenter --target "$pid" --net -- "$@"
}

# While pending_env: each GAMESOLVER_X=V of the NUL-separated file ENV moves to the
# NUL-separated ARGS as `--x V` (the last V of a name, as in an environment), in front
# of the arguments already there (which must not repeat it). Rewrites both files.
env_as_flags() {
    local env=$1 args=$2 entry name
    $pending_env || return 0
    local entries=() kept=() flags=() rest=() names=()
    local -A value=()
    mapfile -d '' entries <"$env"
    mapfile -d '' rest <"$args"
    for entry in "${entries[@]}"; do
        name=${entry%%=*}
        if [[ $name == GAMESOLVER_* ]]; then
            [[ -v value[$name] ]] || names+=("$name")
            value[$name]=${entry#*=}
        else
            kept+=("$entry")
        fi
    done
    for name in "${names[@]}"; do
        entry=${name#GAMESOLVER_}
        entry=${entry,,}
        flags+=("--${entry//_/-}" "${value[$name]}")
    done
    nul_list "${kept[@]}" >"$env"
    nul_list "${flags[@]}" "${rest[@]}" >"$args"
}

# Prints each argument followed by a NUL.
nul_list() {
    (($#)) || return 0
    printf '%s\0' "$@"
}

# Drops PID from the processes the cleanup stops.
forget() {
    local pid=$1 kept=() p
    for p in "${pids[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
    pids=("${kept[@]}")
}

# Starts the server from the image; sets server_pid (its PID, also its network
# namespace's) and server_wrapper (the unshare process that returns its exit status).
# Usage: start_in_image NAME USER MOUNTS ENV ARGS [-- ARG...]
start_in_image() {
    local name=$1 user=$2 mounts=$3 env=$4 args=$5
    shift 5
    env_as_flags "$env" "$args"
    : >"$work/$name.pid"
    run_in_image private "$user" "$mounts" "$env" "$args" "$work/$name.pid" "$@" \
        >"$work/$name.out" 2>"$work/$name.log" &
    server_wrapper=$!
    pids+=("$server_wrapper")
    wait_for "$name: the server's PID" 10 test -s "$work/$name.pid"
    server_pid=$(<"$work/$name.pid")
    # Stopped before its wrapper, which would leave it running.
    pids+=("$server_pid")
    local deadline=$((SECONDS + 60))
    until grep -q '^listening on' "$work/$name.out"; do
        if ! kill -0 "$server_wrapper" 2>/dev/null || ((SECONDS >= deadline)); then
            cat "$work/$name.log" >&2
            fail "$name: the server did not start listening"
        fi
        sleep 0.2
    done
}

# SIGTERM to the server, which must exit 0 within 60 s.
# Usage: stop_in_image NAME SERVER_PID WRAPPER_PID
stop_in_image() {
    local name=$1 pid=$2 wrapper=$3 status=0
    kill -TERM "$pid"
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || fail "$name: the server did not stop within 60 s of SIGTERM"
        sleep 0.2
    done
    wait "$wrapper" || status=$?
    forget "$pid"
    forget "$wrapper"
    ((status == 0)) || { cat "$work/$name.log" >&2; fail "$name: the server exited $status"; }
}

# --- image ----------------------------------------------------------------------------
check_image() {
    log "deploy/image.sh --profile $profile --engine podman"
    timeout 300 deploy/image.sh --profile "$profile" --target "$triple" --tag "$image" --engine podman \
        -- --quiet --layers=false >/dev/null || fail "deploy/image.sh"

    # What a runtime reads from the image.
    local config
    config=$(podman image inspect "$image" --format '{{json .Config}}')
    python3 - "$config" <<'EOF' || fail "the image's configuration"
import json, sys
config = json.loads(sys.argv[1])
problems = []
if config.get("User") != "65532:65532":
    problems.append(f"User is {config.get('User')!r}, not 65532:65532")
if set(config.get("ExposedPorts", {})) != {"50051/tcp", "9090/tcp"}:
    problems.append(f"ExposedPorts {sorted(config.get('ExposedPorts', {}))}")
if config.get("Entrypoint") != ["/usr/local/bin/gamesolver-server"]:
    problems.append(f"Entrypoint {config.get('Entrypoint')}")
labels = config.get("Labels") or {}
for key in ("title", "description", "version", "revision", "licenses"):
    if not labels.get(f"org.opencontainers.image.{key}"):
        problems.append(f"no label org.opencontainers.image.{key}")
for p in problems:
    print(f"image: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
    podman image inspect "$image" --format '{{json .Config.Env}}' >"$work/image-env.json"
    image_size=$(podman image inspect "$image" --format '{{.Size}}')

    # Its filesystem, which must hold the binary and the table's directory, nothing more.
    rootfs=$work/rootfs
    mkdir -p "$rootfs"
    container=$(podman create "$image")
    podman export "$container" | tar -x -C "$rootfs"
    podman rm "$container" >/dev/null
    container=
    local files
    files=$(cd "$rootfs" && find . -mindepth 1 ! -type d | sort | tr '\n' ' ')
    [[ $files == "./usr/local/bin/gamesolver-server " ]] || fail "the image holds more than the binary: $files"
    [[ $(stat -c %u:%g "$rootfs/var/lib/gamesolver") == 65532:65532 ]] ||
        fail "/var/lib/gamesolver in the image is not the runtime user's"
    log "image: $(numfmt --to=iec-i --suffix=B "$image_size") ($image_size bytes), $files"

    # Run as the image says (its environment, no arguments), probed from inside its
    # network namespace.
    python3 -c 'import json, sys; sys.stdout.write("".join(e + "\0" for e in json.load(open(sys.argv[1]))))' \
        "$work/image-env.json" >"$work/image.env"
    : >"$work/image.args" && : >"$work/image.mounts"
    start_in_image image 65532:65532 "$work/image.mounts" "$work/image.env" "$work/image.args"
    image_pid=$server_pid
    image_wrapper=$server_wrapper
    local address=127.0.0.1:50051
    local status
    local health
    for health in "" "$service"; do
        status=$(in_net "$image_pid" "$health_probe" -addr "$address" -service "$health" 2>&1) ||
            fail "grpc-health-probe -service '$health': $status"
        [[ $status == "status: SERVING" ]] || fail "grpc-health-probe -service '$health': $status"
    done
    local answer
    answer=$(in_net "$image_pid" "$grpcurl" -plaintext -d '{"problem":{"id":"p","sumGame":{"num":"25??"}}}' \
        "$address" "$service/Solve") || fail "grpcurl Solve: $answer"
    grep -q '"winner": "WINNER_' <<<"$answer" || fail "grpcurl Solve answered: $answer"
    log "image: serves from its own root as uid 65532 on 0.0.0.0:50051 (health SERVING, Solve answered)"
}

# --- kubernetes -----------------------------------------------------------------------
check_kubernetes() {
    log "kubectl kustomize deploy/kubernetes"
    kubectl kustomize deploy/kubernetes >"$work/kubernetes.yaml"
    local check=(python3 deploy/kubernetes/check-manifests.py --help-text "$work/help.txt"
        --image-env "$work/image-env.json")
    "${check[@]}" "$work/kubernetes.yaml" --emit "$work/pod"
    # With the ServiceMonitor component, from a kustomization outside the base (as a user
    # would write it; inside, kustomize sees a cycle).
    mkdir -p "$work/with-servicemonitor"
    local base
    base=$(realpath --relative-to="$work/with-servicemonitor" deploy/kubernetes)
    printf 'resources: [%s]\ncomponents: [%s/components/servicemonitor]\n' "$base" "$base" \
        >"$work/with-servicemonitor/kustomization.yaml"
    kubectl kustomize "$work/with-servicemonitor" >"$work/kubernetes-servicemonitor.yaml"
    grep -q '^kind: ServiceMonitor' "$work/kubernetes-servicemonitor.yaml" || fail "no ServiceMonitor rendered"
    "${check[@]}" "$work/kubernetes-servicemonitor.yaml"
    # The checker itself catches a probe on the wrong port and a misspelt variable.
    sed 's/^\(\s*port:\) 50051$/\1 50052/; s/GAMESOLVER_SHUTDOWN_TIMEOUT/GAMESOLVER_SHUTDOWN_TIMEOT/' \
        "$work/kubernetes.yaml" >"$work/kubernetes-broken.yaml"
    if "${check[@]}" "$work/kubernetes-broken.yaml" 2>"$work/broken.log"; then
        fail "check-manifests.py accepted a broken manifest"
    fi
    grep -q 'readinessProbe: port 50052' "$work/broken.log" && grep -q 'GAMESOLVER_SHUTDOWN_TIMEOT' "$work/broken.log" ||
        fail "check-manifests.py missed a broken probe port or variable: $(cat "$work/broken.log")"

    # The container's exact environment and arguments, in the image's root with the
    # volumes mounted where the Deployment mounts them, as its user.
    check_config kubernetes "$(<"$work/pod/user")" "$work/pod/mounts" "$work/pod/env" "$work/pod/args"
}

# Validates a configuration with the server itself: --check-config must print
# `config ok` and exit 0, and exit 2 when a value or the table's directory is wrong.
# Usage: check_config NAME USER MOUNTS ENV ARGS
check_config() {
    local name=$1 user=$2 mounts=$3 env=$4 args=$5
    if $pending_check_config; then
        log "$name: no --check-config yet (pending_check_config): starting the configuration in a private network namespace instead"
        cp "$env" "$work/$name.start.env" && cp "$args" "$work/$name.start.args"
        start_in_image "$name" "$user" "$mounts" "$work/$name.start.env" "$work/$name.start.args"
        stop_in_image "$name" "$server_pid" "$server_wrapper"
        log "$name: the server started with it, listened and stopped cleanly"
        return
    fi
    local out status=0
    out=$(check_config_run "$user" "$mounts" "$env" "$args") || status=$?
    [[ $status == 0 && $out == *"config ok"* ]] || fail "$name: --check-config exited $status: $out"
    # A bad value, a table whose directory is not mounted, and one on the read-only root,
    # are refused.
    local broken
    for broken in GAMESOLVER_SHUTDOWN_TIMEOUT=-1 GAMESOLVER_IV_TABLE=/nonexistent/iv.table GAMESOLVER_IV_TABLE=/iv.table; do
        status=0
        out=$(check_config_run "$user" "$mounts" "$env" "$args" "$broken") || status=$?
        [[ $status == 2 ]] || fail "$name: --check-config with $broken exited $status, not 2: $out"
    done
    log "$name: --check-config accepts the configuration and refuses three broken ones"
}

# Runs --check-config on a configuration, with EXTRA (NAME=VALUE) added to ENV, and
# prints what it said. Usage: check_config_run USER MOUNTS ENV ARGS [EXTRA]
check_config_run() {
    local user=$1 mounts=$2 env=$3 args=$4 extra=${5:-} run=$work/check-config
    cp "$env" "$run.env" && cp "$args" "$run.args"
    [[ -z $extra ]] || nul_list "$extra" >>"$run.env"
    env_as_flags "$run.env" "$run.args"
    run_in_image host "$user" "$mounts" "$run.env" "$run.args" "$run.pid" -- --check-config 2>&1
}

# --- systemd --------------------------------------------------------------------------
check_systemd() {
    log "systemd-analyze verify deploy/systemd/gamesolver.service"
    # verify needs ExecStart's binary: a root holding the unit, its environment file and
    # the binary where the unit names them.
    local sdroot=$work/systemd-root
    install -D -m 0644 deploy/systemd/gamesolver.service "$sdroot/etc/systemd/system/gamesolver.service"
    install -D -m 0644 deploy/systemd/gamesolver.env "$sdroot/etc/gamesolver/gamesolver.env"
    install -D -m 0755 "$server_bin" "$sdroot/usr/local/bin/gamesolver-server"
    install -D -m 0755 "$(type -P kill)" "$sdroot/usr/bin/kill"
    systemd-analyze verify --root="$sdroot" --man=no --recursive-errors=no \
        "$sdroot/etc/systemd/system/gamesolver.service"
    # Its sandbox, as systemd scores it (0 best, 10 worst): at most 2.0.
    systemd-analyze security --offline=yes --root="$sdroot" --threshold=20 --no-pager gamesolver.service \
        >"$work/security.txt" || { tail -20 "$work/security.txt" >&2; fail "systemd-analyze security"; }
    log "systemd: $(grep -o 'Overall exposure level.*' "$work/security.txt")"

    # The environment file, as the unit hands it over, with the state directory.
    grep -E '^[A-Z_]+=' deploy/systemd/gamesolver.env | tr '\n' '\0' >"$work/systemd.env"
    : >"$work/systemd.args"
    echo /var/lib/gamesolver >"$work/systemd.mounts"
    # Loopback ports are this namespace's; the unit's own are checked by --check-config.
    check_config systemd 65532:65532 "$work/systemd.mounts" "$work/systemd.env" "$work/systemd.args"

    # The system calls the server makes (start, table precompute and save, calls of
    # every kind, shutdown) must all pass SystemCallFilter, or they would fail with EPERM.
    mkdir -p "$work/strace-table"
    strace -f -qq -o "$work/strace.txt" "$server_bin" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
        --iv-table "$work/strace-table/iv.table" --iv-precompute 20000000 --shutdown-timeout 5 \
        >"$work/strace.out" 2>"$work/strace.log" &
    local tracer=$!
    pids+=("$tracer")
    wait_for "strace: the server's address" 30 grep -q '^metrics on' "$work/strace.out"
    # The traced server is the first process in the trace; strace exits with its status.
    local traced
    traced=$(awk 'NR == 1 {print $1}' "$work/strace.txt")
    pids+=("$traced")
    local address metrics
    address=$(sed -n 's/^listening on //p' "$work/strace.out")
    metrics=$(sed -n 's/^metrics on //p' "$work/strace.out")
    "$client_bin" solve examples/problems.jsonl --server "http://$address" -q -o /dev/null || true
    "$grpcurl" -plaintext -d '{"problem":{"stoneGameIv":{"n":"30000000"}}}' "$address" "$service/Solve" >/dev/null
    curl -fsS "http://$metrics/metrics" >/dev/null
    wait_for "strace: the table saved" 60 test -s "$work/strace-table/iv.table"
    kill -TERM "$traced"
    wait "$tracer" || fail "the server under strace exited $?"
    forget "$traced"
    forget "$tracer"
    python3 deploy/systemd/check-syscalls.py deploy/systemd/gamesolver.service "$work/strace.txt"
}

# --- prometheus -----------------------------------------------------------------------
# Whether the Prometheus at ADDRESS (in the image server's namespace) has data for QUERY.
prometheus_has() {
    in_net "$image_pid" curl -fsS --get "http://$1/api/v1/query" --data-urlencode "query=$2" |
        grep -q '"result":\[{'
}

check_prometheus() {
    log "promtool check rules / test rules"
    promtool check rules deploy/prometheus/alerts.yml >/dev/null
    promtool test rules deploy/prometheus/alerts_test.yml >/dev/null

    # Prometheus in the image server's network namespace, scraping it every second, with
    # the alert rules loaded.
    local prom=127.0.0.1:9091
    cp deploy/prometheus/alerts.yml "$work/alerts.yml"
    cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: gamesolver
    static_configs:
      - targets: ['127.0.0.1:9090']
EOF
    # nsenter execs Prometheus: $! is its PID.
    nsenter --target "$image_pid" --net -- prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
        --web.listen-address="$prom" --log.level=warn >"$work/prometheus.log" 2>&1 &
    pids+=($!)
    wait_for "Prometheus ready" 60 in_net "$image_pid" curl -fsS "http://$prom/-/ready"

    # Load: the bulk client (the example of bad lines: exit 1), a larger generated file
    # with every game, and calls that fail, so that error series exist.
    local address=http://127.0.0.1:50051
    "$client_bin" gen --count 200000 --seed 7 --mix sum=4,ix=4,iv=2,nim=1 -o "$work/problems.jsonl"
    in_net "$image_pid" "$client_bin" solve examples/errors.jsonl --server "$address" -q -o /dev/null &&
        fail "the client found no bad line in examples/errors.jsonl"
    in_net "$image_pid" "$client_bin" solve "$work/problems.jsonl" --server "$address" -q -o /dev/null
    in_net "$image_pid" "$grpcurl" -plaintext -d '{"problem":{"sumGame":{"num":"2x"}}}' \
        127.0.0.1:50051 "$service/Solve" >/dev/null 2>&1 && fail "Solve of a bad problem succeeded"
    in_net "$image_pid" "$health_probe" -addr 127.0.0.1:50051 -service no.such.Service >/dev/null 2>&1 &&
        fail "health of an unknown service succeeded"
    wait_for "Prometheus scrapes the failed calls" 30 prometheus_has "$prom" 'gamesolver_calls_total{code="INVALID_ARGUMENT"}'
    # A few more scrapes and rule evaluations after the last call.
    sleep 3
    in_net "$image_pid" python3 deploy/prometheus/check-queries.py --prometheus "http://$prom" \
        --dashboard deploy/grafana/gamesolver.json --rules deploy/prometheus/alerts.yml \
        --pending "${pending_series[@]}"
}

started=$SECONDS
install_tools
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only
build
built=$SECONDS
check_image
check_kubernetes
check_systemd
check_prometheus
stop_in_image image "$image_pid" "$image_wrapper"
log "ok: image $image_size bytes; checks took $((SECONDS - built)) s after the build ($((built - started)) s)"
