#!/usr/bin/env bash
# Starts a 3-node Pollen cluster on loopback and runs a crawl-dedup demo.
#
#   bash ops/pollen-cluster.sh          # deps + build if needed, start 3 nodes, run the demo
#   bash ops/pollen-cluster.sh status   # are the nodes up?
#   bash ops/pollen-cluster.sh stop     # SIGTERM every node (final snapshot, graceful leave), clean up
#
# Environment: BUILD_DIR (default build), DEMO_URLS (default 1000),
# POLLEN_CLUSTER_DIR (default ${TMPDIR:-/tmp}/pollen-cluster-$UID: secret, data,
# logs, pids; mode 700), SKIP_DEPS=1 to skip the apt-get step.
# The nodes keep running in the background after the demo.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
STATE=${POLLEN_CLUSTER_DIR:-${TMPDIR:-/tmp}/pollen-cluster-$(id -u)}
NODES=3
DEMO_URLS=${DEMO_URLS:-1000}
POLLEND="$BUILD_DIR/node/runtime/pollend"
POLLENCTL="$BUILD_DIR/ops/pollenctl/pollenctl"

say() { printf '%s\n' "$*"; }
die() { printf 'pollen-cluster: %s\n' "$*" >&2; exit 1; }

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

stop_cluster() {
  [ -d "$STATE" ] || { say "no cluster state in $STATE; nothing to stop"; return 0; }
  local pids=()
  for f in "$STATE"/node*.pid; do
    [ -f "$f" ] || continue
    local p; p=$(cat "$f")
    if pid_alive "$p"; then kill -TERM "$p" 2>/dev/null || true; pids+=("$p"); fi
  done
  # Graceful: each node flushes its log, writes a snapshot and leaves.
  for _ in $(seq 1 100); do
    local alive=0
    for p in "${pids[@]:-}"; do pid_alive "$p" && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]:-}"; do pid_alive "$p" && kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$STATE"
  say "stopped ${#pids[@]} node(s) and removed $STATE"
}

status_cluster() {
  [ -d "$STATE" ] || { say "not running (no $STATE)"; return 1; }
  for i in $(seq 1 $NODES); do
    local p; p=$(cat "$STATE/node$i.pid" 2>/dev/null || true)
    local http; http=$(cat "$STATE/node$i.http" 2>/dev/null || true)
    if pid_alive "$p"; then
      local ready; ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/readyz" || true)
      say "node$i pid $p up (readyz $ready), resp port $(cat "$STATE/node$i.resp"), metrics http://127.0.0.1:$http/metrics"
    else
      say "node$i down"
    fi
  done
}

# A port free for TCP and UDP on 127.0.0.1, at or above $1, not in $TAKEN.
TAKEN=" "
free_port() {
  local p=$1
  while :; do
    if [[ "$TAKEN" != *" $p "* ]] && python3 - "$p" <<'PY' 2>/dev/null; then
import socket, sys
p = int(sys.argv[1])
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", p))
    s.close()
PY
      TAKEN="$TAKEN$p "
      echo "$p"
      return
    fi
    p=$((p + 1))
    [ $p -lt 65000 ] || die "no free port"
  done
}

start_cluster() {
  if [ -d "$STATE" ]; then
    for f in "$STATE"/node*.pid; do
      [ -f "$f" ] && pid_alive "$(cat "$f")" && die "a cluster is already running (state in $STATE); run: bash ops/pollen-cluster.sh stop"
    done
    rm -rf "$STATE"
  fi

  if [ "${SKIP_DEPS:-0}" != 1 ] && [ -f "$ROOT/.ci/deps.sh" ]; then
    say "== dependencies (apt-get, only what is missing)"
    bash "$ROOT/.ci/deps.sh"
  fi
  say "== build ($BUILD_DIR)"
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target pollend $( [ -f "$ROOT/ops/pollenctl/CMakeLists.txt" ] && echo pollenctl ) >/dev/null
  [ -x "$POLLEND" ] || die "build did not produce $POLLEND"

  umask 077
  mkdir -p "$STATE"
  chmod 700 "$STATE"
  # 32 random bytes as hex, readable only by this user.
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE/secret"
  chmod 600 "$STATE/secret"

  local seed=""
  for i in $(seq 1 $NODES); do
    local gossip resp http
    gossip=$(free_port $((7945 + i)))
    resp=$(free_port $((6379 + i)))
    http=$(free_port $((9463 + i)))
    echo "$resp" > "$STATE/node$i.resp"
    echo "$http" > "$STATE/node$i.http"
    [ -z "$seed" ] && seed="127.0.0.1:$gossip"
    mkdir -p "$STATE/data$i"
    # The embedded default config (filter crawl:seen) plus per-node addresses.
    nohup "$POLLEND" --node-name "node$i" --gossip-bind "127.0.0.1:$gossip" --seeds "$seed" \
      --resp-bind "127.0.0.1:$resp" --http-bind "127.0.0.1:$http" \
      --secret-file "$STATE/secret" --data-dir "$STATE/data$i" --join-timeout 5s \
      > "$STATE/node$i.log" 2>&1 < /dev/null &
    echo $! > "$STATE/node$i.pid"
  done

  say "== waiting for readiness"
  for i in $(seq 1 $NODES); do
    local http; http=$(cat "$STATE/node$i.http")
    local ok=0
    for _ in $(seq 1 600); do
      if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/readyz" || true)" = 200 ]; then ok=1; break; fi
      pid_alive "$(cat "$STATE/node$i.pid")" || { cat "$STATE/node$i.log" >&2; die "node$i exited"; }
      sleep 0.1
    done
    [ $ok = 1 ] || { tail -20 "$STATE/node$i.log" >&2; die "node$i not ready after 60 s"; }
    say "node$i ready (pid $(cat "$STATE/node$i.pid"), resp port $(cat "$STATE/node$i.resp"))"
  done

  demo
  info
}

demo() {
  local r1 r2 r3
  r1=$(cat "$STATE/node1.resp"); r2=$(cat "$STATE/node2.resp"); r3=$(cat "$STATE/node3.resp")
  say ""
  say "== crawl-dedup demo: $DEMO_URLS URLs added at node1, polled at node2 and node3"
  local run; run=$(date +%s)
  seq 1 "$DEMO_URLS" | sed "s|^|https://example.com/$run/page/|" > "$STATE/demo-urls.txt"
  local start_ns; start_ns=$(date +%s%N)
  local new
  new=$(sed 's|^|BF.ADD crawl:seen |' "$STATE/demo-urls.txt" | redis-cli -p "$r1" | grep -c '^1$' || true)
  local added_ns; added_ns=$(date +%s%N)
  say "node1: BF.ADD answered 1 (new) for $new of $DEMO_URLS URLs in $(( (added_ns - start_ns) / 1000000 )) ms"
  local seen2=0 seen3=0 deadline=$(( $(date +%s) + 120 ))
  while :; do
    [ "$seen2" -lt "$DEMO_URLS" ] && seen2=$(xargs redis-cli -p "$r2" BF.MEXISTS crawl:seen < "$STATE/demo-urls.txt" | grep -c '^1$' || true)
    [ "$seen3" -lt "$DEMO_URLS" ] && seen3=$(xargs redis-cli -p "$r3" BF.MEXISTS crawl:seen < "$STATE/demo-urls.txt" | grep -c '^1$' || true)
    if [ "$seen2" -ge "$DEMO_URLS" ] && [ "$seen3" -ge "$DEMO_URLS" ]; then break; fi
    [ "$(date +%s)" -lt $deadline ] || { say "timed out: node2 sees $seen2, node3 sees $seen3 of $DEMO_URLS"; return 1; }
    sleep 0.05
  done
  local done_ns; done_ns=$(date +%s%N)
  say "node2 and node3 read all $DEMO_URLS URLs as seen $(( (done_ns - added_ns) / 1000000 )) ms after the last add at node1"
  local again; again=$(redis-cli -p "$r3" BF.ADD crawl:seen "$(head -1 "$STATE/demo-urls.txt")")
  say "a crawler at node3 asking BF.ADD for an URL node1 crawled gets: $again (0 = already seen, skip it)"
}

info() {
  say ""
  say "== the cluster keeps running in the background (state, logs, pids: $STATE)"
  for i in $(seq 1 $NODES); do
    say "  node$i: redis-cli -p $(cat "$STATE/node$i.resp")    metrics: http://127.0.0.1:$(cat "$STATE/node$i.http")/metrics"
  done
  local r1; r1=$(cat "$STATE/node1.resp")
  say ""
  say "Talk to it with any Redis client, e.g.:"
  say "  redis-cli -p $r1 BF.ADD crawl:seen https://example.org/"
  say "  redis-cli -p $r1 BF.EXISTS crawl:seen https://example.org/"
  say "  redis-cli -p $r1 BF.INFO crawl:seen"
  say "  redis-cli -p $r1 POLLEN.MEMBERS"
  [ -x "$POLLENCTL" ] && say "  $POLLENCTL --port $r1 status"
  say "Scrape metrics:  curl -s http://127.0.0.1:$(cat "$STATE/node1.http")/metrics | grep ^pollen_"
  say "Stop it:         bash ops/pollen-cluster.sh stop"
}

case "${1:-start}" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status) status_cluster ;;
  -h|--help|help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (start, stop, status)" ;;
esac
