#!/usr/bin/env bash
# Bytes per key of a filter reserved at the capacity it will hold, pollend
# against RedisBloom in the same run (issue 54's table): on each side
# BF.RESERVE k P CAPACITY [NONSCALING] for P in 1%, 0.1%, 0.01%, 1e-7, then
# BF.INFO k Size x 8 / CAPACITY. Filters made this way use hash scheme 3
# (docs/crdt.md, "Layouts"). The FPR behind those bytes: ctest -R crdt_fpr_test
# and build/bench/crdt/bench_filter --benchmark_filter=SplitFprAt1e7.
#
#   bash bench/runtime/bits_per_key.sh            # CAPACITY=1000000
set -euo pipefail
CAPACITY=${CAPACITY:-1000000}
# shellcheck source=pair.sh
source "$(dirname "${BASH_SOURCE[0]}")/pair.sh"

size() {  # port, filter -> BF.INFO Size
  redis-cli -p "$1" BF.INFO "$2" | awk 'prev == "Size" {print; exit} {prev = $0}'
}
echo "BF.RESERVE k P $CAPACITY; pollend $("$POLLEND" --version | awk '{print $2}') vs RedisBloom $(basename "$MODULE" .so), bits per key (Size x 8 / capacity)"
printf '%-8s %12s %12s %8s %14s %14s %8s\n' p "RB scaling" "pollen" ratio "RB NONSCALING" "pollen" ratio
for p in 0.01 0.001 0.0001 0.0000001; do
  row=()
  for mode in scaling nonscaling; do
    extra=(); [ "$mode" = nonscaling ] && extra=(NONSCALING)
    for port in "$REDIS_PORT" "$RESP_PORT"; do
      redis-cli -p "$port" BF.RESERVE "k:$p:$mode" "$p" "$CAPACITY" "${extra[@]}" > /dev/null
      row+=("$(size "$port" "k:$p:$mode")")
    done
  done
  awk -v p="$p" -v n="$CAPACITY" -v a="${row[0]}" -v b="${row[1]}" -v c="${row[2]}" -v d="${row[3]}" \
    'BEGIN { printf "%-8s %12.2f %12.2f %8.3f %14.2f %14.2f %8.3f\n", p, a*8/n, b*8/n, b/a, c*8/n, d*8/n, d/c }'
done
