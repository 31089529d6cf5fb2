#!/usr/bin/env bash
# Scale-out check: three gamesolver-server replicas behind nginx on loopback ports.
# Bulk-solves a generated file through nginx while one replica is killed mid-run, checks
# that every answer equals the embedded server's, and prints each replica's share of the
# problems from its /metrics. Exits non-zero on any failed check; stops what it started.
#
#   deploy/scale-out.sh [--count N] [--release]
#
# Debug binaries by default: CI has just built them for `cargo test`, while a release
# build takes minutes more on two cores; 200,000 problems take seconds either way.
# CI_INSTALL_ONLY=1 installs nginx, then stops (.ci/prefetch.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

count=200000
profile=debug
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --release) profile=release; shift ;;
    *) echo "usage: $0 [--count N] [--release]" >&2; exit 2 ;;
  esac
done

fail() { echo "scale-out: FAIL: $*" >&2; exit 1; }

# --- nginx: Debian's, installed if missing -----------------------------------------
nginx_bin=$(command -v nginx || true)
[ -z "$nginx_bin" ] && [ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
if [ -z "$nginx_bin" ]; then
  echo "== installing nginx (apt-get)"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nginx >/dev/null
  nginx_bin=/usr/sbin/nginx
fi
[[ ${CI_INSTALL_ONLY:-} != 1 ]] || exit 0  # .ci/prefetch.sh: installs only

if [ "$profile" = release ]; then cargo build --release --bins -q; else cargo build --bins -q; fi
bin=${CARGO_TARGET_DIR:-target}/$profile

work=$(mktemp -d)
chmod 755 "$work"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop_all EXIT

# --- three replicas, each on free ports (the server prints them) -----------------------
declare -a grpc_port metrics_port replica_pid
for i in 0 1 2; do
  "$bin/gamesolver-server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --iv-precompute 0 \
    --peer-header x-real-ip --trusted-proxy 127.0.0.1 \
    >"$work/replica$i.out" 2>"$work/replica$i.log" &
  replica_pid[$i]=$!
  pids+=("$!")
done
for i in 0 1 2; do
  for _ in $(seq 100); do
    [ "$(wc -l <"$work/replica$i.out")" -ge 2 ] && break
    sleep 0.1
  done
  grpc_port[$i]=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/replica$i.out")
  metrics_port[$i]=$(sed -n 's/^metrics on .*:\([0-9]*\)$/\1/p' "$work/replica$i.out")
  [ -n "${grpc_port[$i]}" ] && [ -n "${metrics_port[$i]}" ] || fail "replica $i did not start: $(cat "$work/replica$i.log")"
  echo "replica $i: pid ${replica_pid[$i]}, grpc 127.0.0.1:${grpc_port[$i]}, metrics 127.0.0.1:${metrics_port[$i]}"
done

problems_served() { # the sum of gamesolver_problems_total on replica $1 (bash's /dev/tcp: no curl needed)
  exec 3<>"/dev/tcp/127.0.0.1/${metrics_port[$1]}" || return 1
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  awk '/^gamesolver_problems_total/ { sum += $2 } END { printf "%d\n", sum }' <&3
  exec 3<&-
}

# --- nginx in a prefix of its own, not daemonised, on a free port ----------------------
mkdir -p "$work/nginx/temp"
chmod 777 "$work/nginx/temp"
version=$("$nginx_bin" -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
newer=$(printf '%s\n1.25.1\n' "$version" | sort -V | head -1)
nginx_port=""
for _ in $(seq 20); do
  port=$((20000 + RANDOM % 30000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # taken
  nginx_port=$port
  break
done
[ -n "$nginx_port" ] || fail "no free port for nginx"
upstreams=""
for i in 0 1 2; do upstreams="${upstreams}server 127.0.0.1:${grpc_port[$i]};\n    "; done
if [ "$newer" = 1.25.1 ]; then listen="127.0.0.1:$nginx_port; http2 on"; else listen="127.0.0.1:$nginx_port http2"; fi
sed -e "/^ *#/!s|__UPSTREAM_SERVERS__|$upstreams|" -e "/^ *#/!s|__LISTEN__ http2|$listen|" \
  deploy/nginx/gamesolver.conf >"$work/nginx/gamesolver.conf"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
error_log $work/nginx/error.log warn;
pid $work/nginx/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/temp/body;
    proxy_temp_path $work/nginx/temp/proxy;
    fastcgi_temp_path $work/nginx/temp/fastcgi;
    uwsgi_temp_path $work/nginx/temp/uwsgi;
    scgi_temp_path $work/nginx/temp/scgi;
    include $work/nginx/gamesolver.conf;
}
CONF
"$nginx_bin" -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf" || fail "nginx rejects the config"
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
nginx_pid=$!
pids+=("$nginx_pid")
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nginx_port") 2>/dev/null && break
  sleep 0.1
done
echo "nginx $version: pid $nginx_pid, 127.0.0.1:$nginx_port"

# --- the run -----------------------------------------------------------------------------
"$bin/gamesolver-client" gen --count "$count" --seed 20260 -o "$work/problems.jsonl"
"$bin/gamesolver-client" solve "$work/problems.jsonl" -o "$work/expected.jsonl" -q ||
  fail "the embedded-server run failed"

# Three client lanes through nginx: each is its own SolveBatchStream call, which nginx
# sends to a replica of its choosing (round robin).
url="http://127.0.0.1:$nginx_port"
"$bin/gamesolver-client" solve "$work/problems.jsonl" -o "$work/got.jsonl" \
  --server "$url" --server "$url" --server "$url" --batch-size 1000 --retry-for 30 \
  2>"$work/client.log" &
client_pid=$!
pids+=("$client_pid")

# Kill replica 1 once it has answered something, while the client still runs.
victim=1
killed_share=0
for _ in $(seq 200); do
  killed_share=$(problems_served $victim || echo 0)
  [ "$killed_share" -gt 0 ] && break
  sleep 0.05
done
kill -0 "$client_pid" 2>/dev/null || fail "the run ended before a replica could be killed; use a larger --count"
[ "$killed_share" -gt 0 ] || fail "replica $victim answered nothing"
kill -9 "${replica_pid[$victim]}"
# Reaped here, with bash's own "Killed" notice for the job kept out of the output.
{ wait "${replica_pid[$victim]}"; } 2>/dev/null || true
echo "killed replica $victim (pid ${replica_pid[$victim]}) after it had answered $killed_share problems"

client_status=0
wait "$client_pid" || client_status=$?
cat "$work/client.log" >&2
[ "$client_status" -eq 0 ] || fail "the client exited with $client_status"
cmp -s "$work/expected.jsonl" "$work/got.jsonl" ||
  fail "answers through nginx differ from the embedded server's ($(wc -l <"$work/got.jsonl") lines vs $(wc -l <"$work/expected.jsonl"))"
echo "all $count answers through nginx equal the embedded server's"

# --- shares --------------------------------------------------------------------------------
for i in 0 1 2; do
  if [ "$i" -eq "$victim" ]; then
    served=$killed_share
    note=" (at least: killed; its unanswered batches were resent to the others)"
  else
    served=$(problems_served "$i")
    note=""
  fi
  echo "replica $i: $served problems$note"
done
[ "$(problems_served 0)" -gt 0 ] && [ "$(problems_served 2)" -gt 0 ] || fail "a surviving replica answered nothing"
echo "scale-out: OK"
