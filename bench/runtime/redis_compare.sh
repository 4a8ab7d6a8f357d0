#!/usr/bin/env bash
# redis-benchmark against pollend (BF.ADD / BF.EXISTS on random keys) next to a
# plain redis-server (SET / GET) started in the same run, pipeline 1 and 16,
# 1 and 8 clients; prints requests/s and the ratio pollend / redis per cell.
#
#   bash bench/runtime/redis_compare.sh            # uses build/node/runtime/pollend
#   BUILD_DIR=build-x N=200000 RESP_THREADS=2 APPENDFSYNC=everysec bash bench/runtime/redis_compare.sh
# APPENDFSYNC unset = pollend without a data dir (like redis --appendonly no).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
POLLEND=${POLLEND:-"$BUILD_DIR/node/runtime/pollend"}  # or POLLEND=/path/to/pollend
N=${N:-200000}
RANGE=${RANGE:-1000000}
RESP_THREADS=${RESP_THREADS:-1}
[ -x "$POLLEND" ] || { echo "no $POLLEND; build it first (cmake --build $BUILD_DIR --target pollend)" >&2; exit 1; }
command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null || { echo "need redis-server and redis-benchmark (redis-tools)" >&2; exit 1; }

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port); RESP_PORT=$(free_port); GOSSIP_PORT=$(free_port); HTTP_PORT=$(free_port)

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
persist=()
[ -n "${APPENDFSYNC:-}" ] && persist=(--data-dir "$WORK/data" --appendfsync "$APPENDFSYNC")
POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$POLLEND" --node-name bench \
  --gossip-bind "127.0.0.1:$GOSSIP_PORT" --resp-bind "127.0.0.1:$RESP_PORT" --http-bind "127.0.0.1:$HTTP_PORT" \
  --resp-threads "$RESP_THREADS" --log-level warn "${persist[@]}" > "$WORK/pollend.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 300); do
  redis-cli -p "$REDIS_PORT" PING >/dev/null 2>&1 && redis-cli -p "$RESP_PORT" PING >/dev/null 2>&1 && break
  sleep 0.1
done

rps() {  # port, pipeline, clients, command...
  local port=$1 p=$2 c=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -r "$RANGE" -n "$N" -P "$p" -c "$c" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR==2 {gsub(/"/,"",$2); print $2}'
}

echo "pollend $("$POLLEND" --version | awk '{print $2}') vs $(redis-server --version | awk '{print $1, $2, $3}'); n=$N, random keys in [0,$RANGE), resp-threads=$RESP_THREADS, appendfsync=${APPENDFSYNC:-off}, $(nproc) cores"
printf '%-3s %-3s | %12s %12s %7s | %12s %12s %7s\n' P c "BF.ADD/s" "SET/s" ratio "BF.EXISTS/s" "GET/s" ratio
for p in 1 16; do
  for c in 1 8; do
    add=$(rps "$RESP_PORT" $p $c BF.ADD crawl:seen key:__rand_int__)
    set=$(rps "$REDIS_PORT" $p $c SET key:__rand_int__ v)
    exists=$(rps "$RESP_PORT" $p $c BF.EXISTS crawl:seen key:__rand_int__)
    get=$(rps "$REDIS_PORT" $p $c GET key:__rand_int__)
    printf '%-3s %-3s | %12.0f %12.0f %7.2f | %12.0f %12.0f %7.2f\n' $p $c "$add" "$set" \
      "$(awk -v a="$add" -v b="$set" 'BEGIN{print a/b}')" "$exists" "$get" "$(awk -v a="$exists" -v b="$get" 'BEGIN{print a/b}')"
  done
done
