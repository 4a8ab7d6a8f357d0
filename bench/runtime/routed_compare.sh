#!/usr/bin/env bash
# Issue 12's figures: a NODES-process pollend cluster on loopback (default 5)
# against RedisBloom on one redis-server, in the same run. Crawlers at every
# node add the same URLs at the same time (bench/runtime/routed_dedup.py):
# the duplicate-new rate and the add latencies of a routed filter, of a plain
# (gossip-only) filter, and of RedisBloom (every crawler on the one server);
# then WAIT's latency (numreplicas = every peer, then 2) and POLLEN.QEXISTS's
# against a local BF.EXISTS (bench/runtime/wait_latency.py; WAITS=2000);
# and, from one client in turn, a routed new-key add against a PING and a
# local add (bench/runtime/routed_latency.py; ROUNDS=3000); and the add
# throughput of CLIENTS=32 connections at one node (redis-benchmark).
# EXTRA_ARGS go to every pollend (e.g. "--resp-busy-poll-us 0").
#
#   bash bench/runtime/routed_compare.sh            # KEYS=3000 COPIES=3 NODES=5
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
POLLEND=${POLLEND:-"$BUILD_DIR/node/runtime/pollend"}
MODULE=${MODULE:-"$ROOT/../shared/anchors/redisbloom-2.4.23.so"}
NODES=${NODES:-5}
KEYS=${KEYS:-3000}
COPIES=${COPIES:-3}
[ -x "$POLLEND" ] || { echo "no $POLLEND; build it first" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { echo "need redis-server and redis-cli" >&2; exit 1; }

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

export POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n')
endpoints=()
seed=""
for i in $(seq 1 "$NODES"); do
  g=$(free_port); r=$(free_port); h=$(free_port)
  seeds=()
  [ -n "$seed" ] && seeds=(--seeds "$seed")
  "$POLLEND" --node-name "n$i" --gossip-bind "127.0.0.1:$g" --resp-bind "127.0.0.1:$r" --http-bind "127.0.0.1:$h" \
    --log-level warn ${EXTRA_ARGS:-} "${seeds[@]}" > "$WORK/n$i.log" 2>&1 &
  PIDS+=($!)
  [ -z "$seed" ] && seed="127.0.0.1:$g"
  endpoints+=("127.0.0.1:$r")
  eval "http_$i=$h"
done
for i in $(seq 1 "$NODES"); do
  port=${endpoints[$((i-1))]##*:}
  for _ in $(seq 1 300); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  h=$(eval echo "\$http_$i")
  for _ in $(seq 1 300); do
    alive=$(curl -s "http://127.0.0.1:$h/metrics" | awk '/^pollen_members\{state="alive"\}/ {print $2}')
    [ "${alive:-0}" = "$NODES" ] && break
    sleep 0.1
  done
done
first=${endpoints[0]##*:}
redis-cli -p "$first" BF.RESERVE routed 0.001 1000000 ROUTED >/dev/null
redis-cli -p "$first" BF.RESERVE plain 0.001 1000000 >/dev/null
for e in "${endpoints[@]}"; do
  for _ in $(seq 1 300); do
    [ "$(redis-cli -p "${e##*:}" EXISTS routed plain)" = "2" ] && break
    sleep 0.1
  done
done
echo "pollend $("$POLLEND" --version | awk '{print $2}'), $NODES processes on loopback, $(nproc) cores; $KEYS URLs, each added by $COPIES crawlers at once"
python3 "$ROOT/bench/runtime/routed_dedup.py" routed "$KEYS" "$COPIES" "${endpoints[@]}"
python3 "$ROOT/bench/runtime/routed_dedup.py" plain "$KEYS" "$COPIES" "${endpoints[@]}"
python3 "$ROOT/bench/runtime/routed_latency.py" routed plain "${ROUNDS:-3000}" "${endpoints[0]}"
# Throughput: CLIENTS connections at the first node adding random (almost
# always new) keys; a routed add's reply waits for its owner, its RESP
# thread does not.
throughput() {  # label port filter
  printf '%-10s %s clients, %s adds at one endpoint: ' "$1" "${CLIENTS:-32}" "${ADDS:-50000}"
  redis-benchmark -p "$2" -c "${CLIENTS:-32}" -n "${ADDS:-50000}" -r 100000000 -q BF.ADD "$3" "t:__rand_int__" 2>/dev/null |
    tr '\r' '\n' | grep "requests per second" | tail -1 | sed 's/^.*: //'
}
if command -v redis-benchmark >/dev/null; then
  throughput routed "$first" routed
  throughput plain "$first" plain
fi
python3 "$ROOT/bench/runtime/wait_latency.py" plain "${WAITS:-2000}" "$((NODES - 1))" "${endpoints[@]}"
python3 "$ROOT/bench/runtime/wait_latency.py" plain "${WAITS:-2000}" 2 "${endpoints[@]}"
if [ -f "$MODULE" ]; then
  rp=$(free_port)
  redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --loadmodule "$MODULE" > "$WORK/redis.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 300); do redis-cli -p "$rp" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$rp" BF.RESERVE redisbloom 0.001 1000000 >/dev/null
  one=()
  for _ in $(seq 1 "$NODES"); do one+=("127.0.0.1:$rp"); done
  python3 "$ROOT/bench/runtime/routed_dedup.py" redisbloom "$KEYS" "$COPIES" "${one[@]}"
  if command -v redis-benchmark >/dev/null; then throughput redisbloom "$rp" redisbloom; fi
else
  echo "no $MODULE: RedisBloom not compared"
fi
