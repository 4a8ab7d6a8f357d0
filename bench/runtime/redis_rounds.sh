#!/usr/bin/env bash
# Repeated, interleaved redis-benchmark rounds: one plain redis-server (SET/GET)
# and one or more pollend variants (BF.ADD/BF.EXISTS), all started once and
# measured in the same run, cell by cell, so machine noise hits every variant
# alike. Prints every round and then, per variant and cell, the median of the
# per-round ratios pollend/redis (the issue 4 benchmark, made robust to a noisy
# shared machine). It also reads each server's CPU time (utime+stime from
# /proc) around every run and prints the median server CPU microseconds per
# request: on an oversubscribed machine the rate mostly measures the
# scheduler, while CPU per request measures the server.
#
#   ROUNDS=5 N=100000 bash bench/runtime/redis_rounds.sh \
#       new=build/node/runtime/pollend:2 old=/tmp/pollend-old:2
# Each variant is label=path[:resp-threads] (default 2 threads). CELLS limits the
# cells ("1x1 1x8 16x1 16x8" = pipeline x clients, the default).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 label=path[:threads]..." >&2; exit 2; }
N=${N:-100000}
RANGE=${RANGE:-1000000}
ROUNDS=${ROUNDS:-3}
CELLS=${CELLS:-"1x1 1x8 16x1 16x8"}
command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null || {
  echo "need redis-server and redis-benchmark (redis-tools)" >&2; exit 1; }

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"
wait_ping() { for _ in $(seq 1 300); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

REDIS_PORT=$(free_port)
timeout 3600 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_ping "$REDIS_PORT" || { echo "redis-server did not start" >&2; exit 1; }
REDIS_PID=$(pgrep -P "${PIDS[-1]}")
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime of a process (all threads)

LABELS=(); PORTS=(); SPIDS=()
for spec in "$@"; do
  label=${spec%%=*}; rest=${spec#*=}; path=${rest%%:*}; threads=2
  [ "$rest" != "$path" ] && threads=${rest##*:}
  [ -x "$path" ] || { echo "no executable $path" >&2; exit 1; }
  port=$(free_port)
  POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') timeout 3600 "$path" --node-name "$label" \
    --gossip-bind "127.0.0.1:$(free_port)" --resp-bind "127.0.0.1:$port" --http-bind "" \
    --resp-threads "$threads" --log-level warn > "$WORK/$label.log" 2>&1 &
  PIDS+=($!)
  wait_ping "$port" || { echo "$label did not start" >&2; cat "$WORK/$label.log" >&2; exit 1; }
  LABELS+=("$label"); PORTS+=("$port"); SPIDS+=("$(pgrep -P "${PIDS[-1]}")")
done

TICK_US=$((1000000 / $(getconf CLK_TCK)))
rps() {  # server-pid port pipeline clients command... -> "rate cpu-us-per-request"
  local pid=$1 port=$2 p=$3 c=$4; shift 4
  local t0 t1 rate
  t0=$(cpu_ticks "$pid")
  rate=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -r "$RANGE" -n "$N" -P "$p" -c "$c" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR==2 {gsub(/"/,"",$2); print $2}')
  t1=$(cpu_ticks "$pid")
  echo "$rate $(awk -v d=$((t1 - t0)) -v t="$TICK_US" -v n="$N" 'BEGIN{printf "%.3f", d * t / n}')"
}

echo "redis $(redis-server --version | awk '{print $3}'); n=$N; rounds=$ROUNDS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
RESULTS="$WORK/results.txt"  # round cell label op rate cpu-us
for r in $(seq 1 "$ROUNDS"); do
  for cell in $CELLS; do
    p=${cell%x*}; c=${cell#*x}
    echo "$r $cell redis SET $(rps "$REDIS_PID" "$REDIS_PORT" "$p" "$c" SET key:__rand_int__ v)" >> "$RESULTS"
    for i in "${!LABELS[@]}"; do
      echo "$r $cell ${LABELS[$i]} ADD $(rps "${SPIDS[$i]}" "${PORTS[$i]}" "$p" "$c" BF.ADD crawl:seen key:__rand_int__)" >> "$RESULTS"
    done
    echo "$r $cell redis GET $(rps "$REDIS_PID" "$REDIS_PORT" "$p" "$c" GET key:__rand_int__)" >> "$RESULTS"
    for i in "${!LABELS[@]}"; do
      echo "$r $cell ${LABELS[$i]} EXISTS $(rps "${SPIDS[$i]}" "${PORTS[$i]}" "$p" "$c" BF.EXISTS crawl:seen key:__rand_int__)" >> "$RESULTS"
    done
  done
  echo "round $r done (load $(cut -d' ' -f1 /proc/loadavg))"
done

python3 - "$RESULTS" "$CELLS" "${LABELS[@]}" <<'EOF'
import statistics, sys
path, cells, labels = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
rate, cpu = {}, {}
for line in open(path):
    f = line.split()
    if len(f) == 6:
        rate[(int(f[0]), f[1], f[2], f[3])] = float(f[4])
        cpu[(int(f[0]), f[1], f[2], f[3])] = float(f[5])
rounds = sorted({k[0] for k in rate})
def ratios(cell, label, op, base):
    return [rate[(r, cell, label, op)] / rate[(r, cell, "redis", base)] for r in rounds
            if (r, cell, label, op) in rate and rate.get((r, cell, "redis", base))]
print("per-round ratios pollend/redis (ADD/SET, EXISTS/GET); median in brackets")
print(f"{'P x c':6} {'variant':10} {'ADD/SET':>36} {'EXISTS/GET':>36}")
for cell in cells:
    for label in labels:
        cols = []
        for op, base in (("ADD", "SET"), ("EXISTS", "GET")):
            rs = ratios(cell, label, op, base)
            cols.append(" ".join(f"{x:.2f}" for x in rs) + (f" [{statistics.median(rs):.2f}]" if rs else " [-]"))
        print(f"{cell:6} {label:10} {cols[0]:>36} {cols[1]:>36}")
print("median rates (requests/s)")
for cell in cells:
    parts = []
    for label, op in [("redis", "SET"), ("redis", "GET")] + [(l, o) for l in labels for o in ("ADD", "EXISTS")]:
        v = [rate[(r, cell, label, op)] for r in rounds if (r, cell, label, op) in rate]
        if v: parts.append(f"{label}:{op}={statistics.median(v):.0f}")
    print(f"{cell:6} " + " ".join(parts))
print("median server CPU microseconds per request (all threads; lower is better)")
for cell in cells:
    parts = []
    for label, op in [("redis", "SET"), ("redis", "GET")] + [(l, o) for l in labels for o in ("ADD", "EXISTS")]:
        v = [cpu[(r, cell, label, op)] for r in rounds if (r, cell, label, op) in cpu]
        if v: parts.append(f"{label}:{op}={statistics.median(v):.2f}")
    print(f"{cell:6} " + " ".join(parts))
EOF
