#!/usr/bin/env bash
# Memory of a filter grown by adds, pollend against RedisBloom in the same run
# (issue 10's figure): both get BF.RESERVE grow 0.01 1000 (expansion 2), then
# KEYS distinct keys in BF.MADD batches of 1000 through redis-cli --pipe; a
# NONSCALING filter reserved for KEYS at 0.01 on pollend is the right-sized
# baseline. Prints each side's BF.INFO (filters, capacity, size) and the ratios.
# build/bench/crdt/scaling_floor prints the floor any rate schedule has.
#
#   bash bench/runtime/scaling_memory.sh                 # KEYS=10000000
#   KEYS=1000000 BUILD_DIR=build-x bash bench/runtime/scaling_memory.sh
set -euo pipefail
KEYS=${KEYS:-10000000}
# shellcheck source=pair.sh
source "$(dirname "${BASH_SOURCE[0]}")/pair.sh"

# The same RESP stream for both: BF.MADD grow k... in batches of 1000.
python3 - "$KEYS" > "$WORK/adds.resp" <<'PY'
import sys
keys, batch = int(sys.argv[1]), 1000
out = sys.stdout.buffer
for start in range(0, keys, batch):
    items = [b"key:%d" % i for i in range(start, min(keys, start + batch))]
    parts = [b"BF.MADD", b"grow"] + items
    out.write(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
PY

info() {  # port, filter, field -> value
  redis-cli -p "$1" BF.INFO "$2" | awk -v f="$3" 'prev == f {print; exit} {prev = $0}'
}
for port in "$REDIS_PORT" "$RESP_PORT"; do
  redis-cli -p "$port" BF.RESERVE grow 0.01 1000 >/dev/null
  redis-cli -p "$port" --pipe < "$WORK/adds.resp" > "$WORK/pipe.$port.log"
done
redis-cli -p "$RESP_PORT" BF.RESERVE right 0.01 "$KEYS" NONSCALING >/dev/null

echo "$KEYS keys into BF.RESERVE grow 0.01 1000 (expansion 2); pollend $("$POLLEND" --version | awk '{print $2}') vs RedisBloom $(basename "$MODULE" .so) on redis $(redis-server --version | awk '{print $3}')"
printf '%-12s %8s %12s %14s\n' side filters capacity "size (bytes)"
for side in "RedisBloom:$REDIS_PORT:grow" "pollend:$RESP_PORT:grow" "right-sized:$RESP_PORT:right"; do
  IFS=: read -r name port filter <<< "$side"
  printf '%-12s %8s %12s %14s\n' "$name" "$(info "$port" "$filter" "Number of filters")" \
    "$(info "$port" "$filter" Capacity)" "$(info "$port" "$filter" Size)"
done
rb=$(info "$REDIS_PORT" grow Size); pl=$(info "$RESP_PORT" grow Size); right=$(info "$RESP_PORT" right Size)
awk -v pl="$pl" -v rb="$rb" -v right="$right" \
  'BEGIN { printf "pollend / RedisBloom: %.3f   pollend / right-sized: %.3f   RedisBloom / right-sized: %.3f\n", pl / rb, pl / right, rb / right }'
