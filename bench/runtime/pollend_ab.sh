#!/usr/bin/env bash
# Two pollend binaries side by side under redis-benchmark (BF.ADD / BF.EXISTS
# on random keys, RESP2, no transactions), cells interleaved round by round;
# prints requests/s per cell and the median ratio NEW / OLD. For "does this
# change slow the plain path", e.g. a binary built from an older commit:
#
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DPOLLEN_BUILD_BENCH=OFF && ninja -C /tmp/old/build pollend
#   OLD=/tmp/old/build/node/runtime/pollend N=100000 ROUNDS=5 bash bench/runtime/pollend_ab.sh
#
# NEW defaults to build/node/runtime/pollend. CELLS as in redis_compare.sh.
# NEW_ARGS / OLD_ARGS: more pollend flags for one side, e.g. the same binary
# with and without a feature:
#   OLD=build/node/runtime/pollend NEW_ARGS= OLD_ARGS="--resp-latency-tracking false" bash bench/runtime/pollend_ab.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NEW=${NEW:-"$ROOT/build/node/runtime/pollend"}
OLD=${OLD:?set OLD to the baseline pollend binary}
N=${N:-100000}
RANGE=${RANGE:-1000000}
ROUNDS=${ROUNDS:-3}
RESP_THREADS=${RESP_THREADS:-1}
CELLS=${CELLS:-"1:1 1:8 16:1 16:8"}
for b in "$NEW" "$OLD"; do [ -x "$b" ] || { echo "no executable $b" >&2; exit 1; }; done
command -v redis-benchmark >/dev/null || { echo "need redis-benchmark (redis-tools)" >&2; exit 1; }

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

start() {  # binary, name, extra flags: sets PORT and PID (not in a subshell: cleanup must see the PID)
  local gossip http extra
  read -r -a extra <<< "${3:-}"
  PORT=$(free_port); gossip=$(free_port); http=$(free_port)
  POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$1" --node-name "$2" \
    --gossip-bind "127.0.0.1:$gossip" --resp-bind "127.0.0.1:$PORT" --http-bind "127.0.0.1:$http" \
    --resp-threads "$RESP_THREADS" --log-level warn "${extra[@]}" > "$WORK/$2.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
}
start "$NEW" new "${NEW_ARGS:-}"; NEW_PORT=$PORT; NEW_PID=$PID
start "$OLD" old "${OLD_ARGS:-}"; OLD_PORT=$PORT; OLD_PID=$PID
for _ in $(seq 1 300); do
  redis-cli -p "$NEW_PORT" PING >/dev/null 2>&1 && redis-cli -p "$OLD_PORT" PING >/dev/null 2>&1 && break
  sleep 0.1
done

# CPU time (ns) a process's threads have used so far: schedstat's first
# field, in nanoseconds (clock ticks in /proc/PID/stat are 10 ms, too coarse
# for a 1% difference over a short cell).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }

rps() {  # port, pipeline, clients, command...
  local port=$1 p=$2 c=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -r "$RANGE" -n "$N" -P "$p" -c "$c" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR==2 {gsub(/"/,"",$2); print $2}'
}

# run NAME PID PORT P C CMD...: requests/s into ${NAME}_rps, and the server's
# CPU time per request (ns; less sensitive to a noisy neighbour than the
# rate) into ${NAME}_cpu.
run() {
  local name=$1 pid=$2 port=$3 p=$4 c=$5; shift 5
  local before after
  before=$(cpu_ns "$pid")
  printf -v "${name}_rps" '%s' "$(rps "$port" "$p" "$c" "$@")"
  after=$(cpu_ns "$pid")
  printf -v "${name}_cpu" '%s' "$(( (after - before) / N ))"
}

echo "new $NEW vs old $OLD; n=$N, resp-threads=$RESP_THREADS, $(nproc) cores, $ROUNDS round(s)"
echo "rate = requests/s; cpu = server CPU ns per request"
printf '%-5s %-3s %-3s %-9s | %10s %10s %6s | %6s %6s %6s\n' round P c cmd "new rate" "old rate" ratio "new cpu" "old cpu" ratio
declare -A rate_ratios cpu_ratios
for round in $(seq 1 "$ROUNDS"); do
  for cell in $CELLS; do
    p=${cell%%:*}; c=${cell##*:}
    for cmd in BF.ADD BF.EXISTS; do
      # Alternate which binary goes first, so neither always meets a warmer machine.
      if (( round % 2 )); then
        run new "$NEW_PID" "$NEW_PORT" "$p" "$c" "$cmd" crawl:seen key:__rand_int__
        run old "$OLD_PID" "$OLD_PORT" "$p" "$c" "$cmd" crawl:seen key:__rand_int__
      else
        run old "$OLD_PID" "$OLD_PORT" "$p" "$c" "$cmd" crawl:seen key:__rand_int__
        run new "$NEW_PID" "$NEW_PORT" "$p" "$c" "$cmd" crawl:seen key:__rand_int__
      fi
      rr=$(awk -v a="$new_rps" -v b="$old_rps" 'BEGIN{printf "%.3f", a/b}')
      cr=$(awk -v a="$new_cpu" -v b="$old_cpu" 'BEGIN{printf "%.3f", (b > 0) ? a/b : 0}')
      rate_ratios[$p,$c,$cmd]+="$rr "; cpu_ratios[$p,$c,$cmd]+="$cr "
      printf '%-5s %-3s %-3s %-9s | %10.0f %10.0f %6s | %6s %6s %6s\n' "$round" "$p" "$c" "$cmd" "$new_rps" "$old_rps" "$rr" "$new_cpu" "$old_cpu" "$cr"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "median ratios new / old: rate (higher is better), cpu per request (lower is better)"
for cell in $CELLS; do
  p=${cell%%:*}; c=${cell##*:}
  for cmd in BF.ADD BF.EXISTS; do
    printf '  P%-3s c%-3s %-9s rate %s  cpu %s\n' "$p" "$c" "$cmd" "$(echo "${rate_ratios[$p,$c,$cmd]}" | median)" \
      "$(echo "${cpu_ratios[$p,$c,$cmd]}" | median)"
  done
done
