#!/usr/bin/env bash
# Server CPU per request, measured with `perf stat -e task-clock` on the server
# process (all threads, user + kernel) while redis-benchmark runs, for a plain
# redis-server (SET / GET) and one or more pollend binaries (BF.ADD / BF.EXISTS),
# interleaved round by round so machine noise hits every server alike. Finer
# than the /proc tick counts of redis_rounds.sh (10 ms ticks), and, on a
# shared 2-core machine, steadier than the request rate.
#
#   P=1 C=8 ROUNDS=3 N=100000 bash bench/runtime/server_cpu.sh build/node/runtime/pollend /tmp/pollend-old
# Prints one line per run, then per server and command the median rate and
# the median CPU microseconds and context switches per request.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 pollend-binary..." >&2; exit 2; }
P=${P:-1}; C=${C:-8}; ROUNDS=${ROUNDS:-3}; N=${N:-100000}; RANGE=${RANGE:-1000000}
for t in perf redis-server redis-benchmark redis-cli; do
  command -v "$t" >/dev/null || { echo "need $t" >&2; exit 1; }
done

# shellcheck source=scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"
wait_ping() { for _ in $(seq 1 300); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

NAMES=(redis); PORTS=(); SPIDS=()
port=$(free_port)
timeout 3600 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_ping "$port" || { echo "redis-server did not start" >&2; exit 1; }
PORTS+=("$port"); SPIDS+=("$(pgrep -P "${PIDS[-1]}")")
i=0
for bin in "$@"; do
  [ -x "$bin" ] || { echo "no executable $bin" >&2; exit 1; }
  i=$((i + 1)); port=$(free_port)
  POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') timeout 3600 "$bin" --node-name "p$i" \
    --gossip-bind "127.0.0.1:$(free_port)" --resp-bind "127.0.0.1:$port" --http-bind "" \
    --resp-threads 1 --log-level warn > "$WORK/p$i.log" 2>&1 &
  PIDS+=($!)
  wait_ping "$port" || { echo "$bin did not start" >&2; cat "$WORK/p$i.log" >&2; exit 1; }
  NAMES+=("p$i:$(basename "$bin")"); PORTS+=("$port"); SPIDS+=("$(pgrep -P "${PIDS[-1]}")")
done

run() {  # index op command... -> one result line
  local i=$1 op=$2; shift 2
  timeout 600 perf stat -e task-clock,context-switches -x, -p "${SPIDS[$i]}" -o "$WORK/stat" &
  local ps=$!
  sleep 0.1
  local rate
  rate=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "${PORTS[$i]}" -r "$RANGE" -n "$N" -P "$P" -c "$C" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR==2 {gsub(/"/,"",$2); print $2}')
  kill -INT "$ps"; wait "$ps" || true
  awk -F, -v n="$N" -v r="$rate" -v name="${NAMES[$i]}" -v op="$op" \
    '/task-clock/ {t = $1} /context-switches/ {cs = $1}
     END {printf "%s %s %.0f %.3f %.3f\n", name, op, r, t * 1000 / n, cs / n}' "$WORK/stat"
}

echo "P=$P c=$C n=$N rounds=$ROUNDS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server op rate cpu-us/request context-switches/request"
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!SPIDS[@]}"; do
    if [ "$i" = 0 ]; then
      run 0 SET SET key:__rand_int__ v; run 0 GET GET key:__rand_int__
    else
      run "$i" ADD BF.ADD crawl:seen key:__rand_int__; run "$i" EXISTS BF.EXISTS crawl:seen key:__rand_int__
    fi
  done
done | tee "$WORK/runs"
python3 - "$WORK/runs" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[1]), []).append((float(f[2]), float(f[3]), float(f[4])))
print("medians: server op rate cpu-us/request context-switches/request")
for (name, op), v in rows.items():
    print(f"{name:28} {op:6} {statistics.median(x[0] for x in v):9.0f} "
          f"{statistics.median(x[1] for x in v):7.3f} {statistics.median(x[2] for x in v):6.3f}")
EOF
