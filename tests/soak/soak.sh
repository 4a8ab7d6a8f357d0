#!/usr/bin/env bash
# Soak: one pollend under pipelined mixed load for a while, its resident set
# sampled every second. Memory must stay flat after warm-up: the floor (lowest
# RSS) of the last quarter after WARMUP may not exceed the first quarter's by
# more than MAX_GROWTH_PCT percent (default 5), and no peak (highest, snapshots
# included) after warm-up may exceed that floor by more than SNAPSHOT_MIB
# (64: issue 53's bound; a snapshot streams from the live filter and holds no
# copy of it), or the run fails.
#
#   bash tests/soak/soak.sh [SECONDS] [POLLEND]     # default 600 s, build/node/runtime/pollend
#
# Load, all at once on loopback: redis-benchmark pipelines (BF.ADD of fresh
# keys from a 20M keyspace into a 50M-capacity filter, BF.EXISTS, BF.MADD,
# BF.MEXISTS, INFO), a loop of short-lived connections (a new client every
# 100 ms: connect, MULTI/EXEC, HELLO 3, quit), snapshots every
# SNAPSHOT_INTERVAL (30s) and a /metrics scrape at every printed line.
# Environment: WARMUP (seconds, default SECONDS/10, at least 20), PRINT
# (seconds per printed line: lowest and highest RSS in it, commands served;
# default 10), MAX_GROWTH_PCT (5), SNAPSHOT_MIB (64).
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${1:-600}
POLLEND=${2:-build/node/runtime/pollend}
PRINT=${PRINT:-10}
SNAPSHOT_INTERVAL=${SNAPSHOT_INTERVAL:-30s}
WARMUP=${WARMUP:-$(( DURATION / 10 > 20 ? DURATION / 10 : 20 ))}
MAX_GROWTH_PCT=${MAX_GROWTH_PCT:-5}
SNAPSHOT_MIB=${SNAPSHOT_MIB:-64}
[[ "$DURATION" =~ ^[0-9]+$ ]] && [ "$DURATION" -gt "$WARMUP" ] ||
  { echo "usage: soak.sh [SECONDS > WARMUP ($WARMUP)] [POLLEND]" >&2; exit 2; }
snapshot_s=${SNAPSHOT_INTERVAL%s}
[[ "$snapshot_s" =~ ^[0-9]+$ ]] || { echo "SNAPSHOT_INTERVAL must be whole seconds, like 30s" >&2; exit 2; }
[ $(( (DURATION - WARMUP) / 4 )) -ge $(( 2 * snapshot_s )) ] ||
  { echo "a quarter after warm-up ($(( (DURATION - WARMUP) / 4 ))s) must hold two snapshot intervals ($SNAPSHOT_INTERVAL)" >&2; exit 2; }
[ -x "$POLLEND" ] || { echo "no pollend at $POLLEND (build first: bash .ci/test.sh, or pass its path)" >&2; exit 2; }
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null && command -v curl >/dev/null ||
  { echo "needs redis-benchmark, redis-cli and curl (bash .ci/deps.sh)" >&2; exit 2; }

read -r GOSSIP RESP HTTP <<< "$(python3 tests/free_ports.py 3 | tr '\n' ' ')"
WORK=$(mktemp -d /tmp/pollen-soak.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${NODE:-}" ]; then kill "$NODE" 2>/dev/null || true; wait "$NODE" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$POLLEND" --node-name soak \
  --gossip-bind "127.0.0.1:$GOSSIP" --resp-bind "127.0.0.1:$RESP" --http-bind "127.0.0.1:$HTTP" \
  --data-dir "$WORK/data" --appendfsync everysec --snapshot-interval "$SNAPSHOT_INTERVAL" >"$WORK/pollend.log" 2>&1 &
NODE=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$HTTP/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "http://127.0.0.1:$HTTP/readyz" >/dev/null || { echo "pollend did not become ready:"; tail -20 "$WORK/pollend.log"; exit 1; }
redis-cli -p "$RESP" BF.RESERVE soak 0.001 50000000 NONSCALING >/dev/null

bench() { redis-benchmark -p "$RESP" -l -q "$@" >/dev/null 2>&1 & pids+=($!); }
bench -c 8 -P 32 -r 20000000 BF.ADD soak "k:__rand_int__"
bench -c 8 -P 32 -r 20000000 BF.EXISTS soak "k:__rand_int__"
bench -c 2 -P 16 -r 20000000 BF.MADD soak "a:__rand_int__" "b:__rand_int__" "c:__rand_int__"
bench -c 2 -P 16 -r 20000000 BF.MEXISTS soak "a:__rand_int__" "z:__rand_int__"
bench -c 1 -P 4 INFO
( while true; do
    printf 'MULTI\r\nBF.ADD soak churn\r\nBF.EXISTS soak churn\r\nEXEC\r\nHELLO 3\r\nQUIT\r\n' |
      redis-cli -p "$RESP" >/dev/null 2>&1 || true
    sleep 0.1
  done ) & pids+=($!)

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$NODE/status"; }
# The highest RSS since the last call: VmHWM, then reset it (clear_refs 5), so
# a snapshot's brief peak between two samples is still seen.
peak_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$NODE/status"; echo 5 >"/proc/$NODE/clear_refs"; }
echo 5 >"/proc/$NODE/clear_refs" 2>/dev/null || { echo "soak: cannot reset /proc/$NODE/clear_refs" >&2; exit 1; }
mib() { awk -v k="$1" 'BEGIN {print k / 1024}'; }
# An unlabelled metric's value ("-1" when the scrape fails).
metric() { curl -fs "http://127.0.0.1:$HTTP/metrics" | awk -v m="$1" '$1 == m {v = $2} END {print (v == "" ? -1 : v)}'; }
served() { metric pollen_resp_commands_total; }

echo "soak: ${DURATION}s, warm-up ${WARMUP}s, snapshots every ${SNAPSHOT_INTERVAL}, pollend pid $NODE"
printf '%8s %10s %10s %14s\n' elapsed min_mib max_mib commands
start=$(date +%s)
after=()  # one "RSS peak" pair (KiB) a second after warm-up
lo=""; hi=0
while true; do
  sleep 1
  elapsed=$(( $(date +%s) - start ))
  kill -0 "$NODE" 2>/dev/null || { echo "pollend exited:"; tail -20 "$WORK/pollend.log"; exit 1; }
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "soak: a load generator (pid $p) stopped: the load is not what was asked"; exit 1; }
  done
  rss=$(rss_kib)
  peak=$(peak_kib)
  [ "$elapsed" -ge "$WARMUP" ] && after+=("$rss $peak $(metric pollen_resp_commands_total) $(metric pollen_snapshots_total)")
  if [ -z "$lo" ] || [ "$rss" -lt "$lo" ]; then lo=$rss; fi
  [ "$peak" -gt "$hi" ] && hi=$peak
  if [ $(( elapsed % PRINT )) -eq 0 ] || [ "$elapsed" -ge "$DURATION" ]; then
    printf '%8s %10.1f %10.1f %14s\n' "$elapsed" "$(mib "$lo")" "$(mib "$hi")" "$(served || echo '?')"
    lo=""; hi=0
  fi
  [ "$elapsed" -ge "$DURATION" ] && break
done

# Flat: the floor (RSS between snapshots) of the last quarter after warm-up
# does not exceed the first quarter's by more than MAX_GROWTH_PCT (a leak
# raises it), and no peak exceeds that floor by more than SNAPSHOT_MIB. The
# peaks were compared quarter to quarter too while a snapshot held a copy of
# the filter (peaks of 204-211 MiB over a 109-117 MiB floor); without the copy
# a peak is the floor plus the load's own transients (2-9 MiB, rising and
# falling over ~100 s: 114.9 -> 121.0 MiB between two quarters of one CI run),
# which 5% of a ~115 MiB peak does not cover.
verdict=$(printf '%s\n' "${after[@]}" | awk -v g="$MAX_GROWTH_PCT" -v room="$SNAPSHOT_MIB" '
  { v[NR] = $1; p[NR] = $2; c[NR] = $3; s[NR] = $4 }
  END {
    q = int(NR / 4); if (q < 1) q = 1
    for (i = 1; i <= q; i++) { if (i == 1 || v[i] < fmin) fmin = v[i]; if (p[i] > fmax) fmax = p[i] }
    for (i = NR - q + 1; i <= NR; i++) { if (i == NR - q + 1 || v[i] < lmin) lmin = v[i]; if (p[i] > lmax) lmax = p[i] }
    for (i = 1; i <= NR; i++) if (p[i] > pmax) pmax = p[i]
    floor = (lmin - fmin) * 100 / fmin; over = (pmax - fmin) / 1024
    # The comparison means something only under load with snapshots in both quarters.
    if (c[NR] <= c[NR - q + 1]) { print "no commands served in the last quarter"; exit 1 }
    if (s[q] <= s[1] || s[NR] <= s[NR - q + 1]) { print "no snapshot in the first or the last quarter"; exit 1 }
    printf "floor %.1f -> %.1f MiB (%+.2f%%, limit %s%%) from the first to the last quarter after warm-up; highest peak %.1f MiB, %.1f MiB over the first floor (limit %s MiB; quarters peaked at %.1f and %.1f MiB)\n", fmin / 1024, lmin / 1024, floor, g, pmax / 1024, over, room, fmax / 1024, lmax / 1024
    exit (floor > g || over > room)
  }') && ok=1 || ok=0
echo "soak: $verdict"
if [ "$ok" -ne 1 ]; then
  echo "soak: FAILED, memory grew after warm-up"
  exit 1
fi
echo "soak: PASSED, memory flat after warm-up"
