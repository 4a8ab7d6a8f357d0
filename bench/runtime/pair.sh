# Sourced by the bench/runtime scripts that compare pollend with RedisBloom:
# checks the tools, sources scratch.sh, and starts redis-server with the
# RedisBloom module on REDIS_PORT and a single pollend on RESP_PORT (both
# stopped on exit). POLLEND (default BUILD_DIR/node/runtime/pollend, BUILD_DIR
# default build) and MODULE (default ../shared/anchors' RedisBloom) may be set;
# waits until both answer PING.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
POLLEND=${POLLEND:-"$BUILD_DIR/node/runtime/pollend"}
MODULE=${MODULE:-"$ROOT/../shared/anchors/redisbloom-2.4.23.so"}
[ -x "$POLLEND" ] || { echo "no $POLLEND; build it first (cmake --build <build dir> --target pollend)" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "no RedisBloom module at $MODULE (set MODULE=)" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { echo "need redis-server and redis-cli (redis-tools)" >&2; exit 1; }

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

REDIS_PORT=$(free_port); RESP_PORT=$(free_port); GOSSIP_PORT=$(free_port); HTTP_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --loadmodule "$MODULE" \
  > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$POLLEND" --node-name pair \
  --gossip-bind "127.0.0.1:$GOSSIP_PORT" --resp-bind "127.0.0.1:$RESP_PORT" --http-bind "127.0.0.1:$HTTP_PORT" \
  --log-level warn > "$WORK/pollend.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 300); do
  redis-cli -p "$REDIS_PORT" PING >/dev/null 2>&1 && redis-cli -p "$RESP_PORT" PING >/dev/null 2>&1 && break
  sleep 0.1
done
