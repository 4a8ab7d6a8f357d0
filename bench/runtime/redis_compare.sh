#!/usr/bin/env bash
# redis-benchmark against pollend (BF.ADD / BF.EXISTS on random keys) next to a
# redis-server started in the same run, pipeline 1 and 16, 1 and 8 clients;
# prints requests/s and the ratio pollend / redis per cell, for ROUNDS rounds
# (cells interleaved) and the median ratio per cell.
#
# The peer is RedisBloom when its module is there (MODULE, default
# ../shared/anchors/redisbloom-2.4.23.so): redis-server loads it, both sides
# hold crawl:seen reserved at capacity 1,000,000 and error 0.01, and both run
# BF.ADD / BF.EXISTS. Without the module the peer runs SET / GET.
#
#   bash bench/runtime/redis_compare.sh            # uses build/node/runtime/pollend
#   BUILD_DIR=build-x N=200000 ROUNDS=3 RESP_THREADS=2 APPENDFSYNC=everysec bash bench/runtime/redis_compare.sh
# APPENDFSYNC unset = pollend without a data dir (like redis --appendonly no).
# POLLEND_FLAGS: extra pollend flags (e.g. "--resp-busy-poll-us 0"); CELLS:
# the (pipeline:clients) cells to run, default "1:1 1:8 16:1 16:8".
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
POLLEND=${POLLEND:-"$BUILD_DIR/node/runtime/pollend"}  # or POLLEND=/path/to/pollend
N=${N:-200000}
RANGE=${RANGE:-1000000}
RESP_THREADS=${RESP_THREADS:-1}
ROUNDS=${ROUNDS:-1}
MODULE=${MODULE:-"$ROOT/../shared/anchors/redisbloom-2.4.23.so"}
[ -x "$POLLEND" ] || { echo "no $POLLEND; build it first (cmake --build $BUILD_DIR --target pollend)" >&2; exit 1; }
command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null || { echo "need redis-server and redis-benchmark (redis-tools)" >&2; exit 1; }

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

REDIS_PORT=$(free_port); RESP_PORT=$(free_port); GOSSIP_PORT=$(free_port); HTTP_PORT=$(free_port)

module=()
[ -f "$MODULE" ] && module=(--loadmodule "$MODULE")
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no "${module[@]}" > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
persist=()
[ -n "${APPENDFSYNC:-}" ] && persist=(--data-dir "$WORK/data" --appendfsync "$APPENDFSYNC")
POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$POLLEND" --node-name bench \
  --gossip-bind "127.0.0.1:$GOSSIP_PORT" --resp-bind "127.0.0.1:$RESP_PORT" --http-bind "127.0.0.1:$HTTP_PORT" \
  --resp-threads "$RESP_THREADS" --log-level warn "${persist[@]}" ${POLLEND_FLAGS:-} > "$WORK/pollend.log" 2>&1 &
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

if [ ${#module[@]} -gt 0 ]; then
  redis-cli -p "$REDIS_PORT" BF.RESERVE crawl:seen 0.01 1000000 >/dev/null
  peer="RedisBloom $(basename "$MODULE" .so) on $(redis-server --version | awk '{print $3}')"
  peer_add=(BF.ADD crawl:seen key:__rand_int__); peer_read=(BF.EXISTS crawl:seen key:__rand_int__); names=("BF.ADD" "BF.EXISTS")
else
  peer="$(redis-server --version | awk '{print $1, $2, $3}') (no RedisBloom module: SET/GET)"
  peer_add=(SET key:__rand_int__ v); peer_read=(GET key:__rand_int__); names=("SET" "GET")
fi

echo "pollend $("$POLLEND" --version | awk '{print $2}') vs $peer; n=$N, random keys in [0,$RANGE), resp-threads=$RESP_THREADS, appendfsync=${APPENDFSYNC:-off}, $(nproc) cores, $ROUNDS round(s)"
printf '%-5s %-3s %-3s | %12s %12s %7s | %12s %12s %7s\n' round P c "BF.ADD/s" "peer/s" ratio "BF.EXISTS/s" "peer/s" ratio
declare -A add_ratios read_ratios
CELLS=${CELLS:-"1:1 1:8 16:1 16:8"}
for round in $(seq 1 "$ROUNDS"); do
  for cell in $CELLS; do
    p=${cell%%:*}; c=${cell##*:}
    {
      add=$(rps "$RESP_PORT" $p $c BF.ADD crawl:seen key:__rand_int__)
      peer_a=$(rps "$REDIS_PORT" $p $c "${peer_add[@]}")
      exists=$(rps "$RESP_PORT" $p $c BF.EXISTS crawl:seen key:__rand_int__)
      peer_r=$(rps "$REDIS_PORT" $p $c "${peer_read[@]}")
      ra=$(awk -v a="$add" -v b="$peer_a" 'BEGIN{printf "%.2f", a/b}')
      rr=$(awk -v a="$exists" -v b="$peer_r" 'BEGIN{printf "%.2f", a/b}')
      add_ratios[$p,$c]+="$ra "; read_ratios[$p,$c]+="$rr "
      printf '%-5s %-3s %-3s | %12.0f %12.0f %7s | %12.0f %12.0f %7s\n' "$round" $p $c "$add" "$peer_a" "$ra" "$exists" "$peer_r" "$rr"
    }
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "median ratio pollend / peer (${names[0]} | ${names[1]}):"
for cell in $CELLS; do
  p=${cell%%:*}; c=${cell##*:}
  printf '  P%-3s c%-3s BF.ADD %s  BF.EXISTS %s\n' $p $c "$(echo "${add_ratios[$p,$c]}" | median)" "$(echo "${read_ratios[$p,$c]}" | median)"
done
