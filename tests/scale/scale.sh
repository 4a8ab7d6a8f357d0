#!/usr/bin/env bash
# Scale (issue 53, "web-scale filters"): three pollend nodes on loopback, each
# holding one fixed-size filter of about SIZE bytes, loaded with keys, then
# measured: memory and latency during a snapshot, snapshot bytes against the
# add log's, idle CPU and disk writes, SIGTERM-to-exit, restart-to-ready
# against a plain read of the data dir, a wiped node's rejoin, and member
# flapping. Prints one table (figure | value | target | met) and "N passed, M
# failed" (rows with a target; the others are figures to read).
#
#   bash tests/scale/scale.sh SIZE [POLLEND] [--strict]
#   bash tests/scale/scale.sh 4gb                      # the campaign (~25 min)
#   SNAPSHOT_INTERVAL=10s bash tests/scale/scale.sh 256mb build/node/runtime/pollend
#
# SIZE takes Redis' units: 256mb = 256 MiB, 4gb = 4 GiB (k/m/g alone are powers
# of 1000). Exit 0 unless something broke (a node died, a command or a wait
# failed, keys went missing): the figures and timing targets are informational,
# CI machines being slow and shared. --strict (or STRICT=1) also exits 1 when a
# row misses its target.
#
# Environment: SNAPSHOT_INTERVAL (60s), KEYS (keys loaded; default capacity/40,
# at least 10^6), ADD_RATE (adds/s of the steady load, 20000), STEADY_SECONDS
# (how long it runs, 600; at least two snapshot intervals), IDLE_SECONDS (30),
# REJOIN_TIMEOUT (seconds; default 120, or 60 per GiB above 2 GiB),
# MAX_SECONDS (whole run, 900 + STEADY_SECONDS), KEEP=1 (keep the temp dir:
# logs, data dirs).
#
# Phases:
#  1. start three nodes (config: one filter "crawl", fpr 0.01, 1 generation, no
#     expansion, capacity ~ SIZE*8/9.9; BF.INFO crawl SIZE prints the real size)
#     and load a tenth of KEYS with BF.MADD batches of 1000, pipelined,
#     round-robin over the nodes (Debian's redis-py); that touches every page;
#  2. SIGUSR1 on node 1 (its first snapshot, so a base: the whole filter,
#     unless SNAPSHOT_INTERVAL passed already): RSS before and peak during
#     (VmHWM, reset through clear_refs), the duration (until its log line;
#     pollen_snapshots_total must have risen), the slowest PING to node 1
#     meanwhile (redis-py, every 10 ms); then the rest of the keys (keys/s);
#  3. a steady add load (ADD_RATE over the nodes, round-robin) for
#     STEADY_SECONDS, with the nodes' periodic snapshots: issue 53's
#     "10-minute run with snapshots every 60 s and 20,000 adds/s". Over one
#     snapshot interval of node 1, from one of its periodic snapshots to the
#     next: pollen_snapshot_bytes_written_total against the growth of the
#     adds-*.log files of all three nodes (each node's snapshot holds every
#     node's adds, its log only its own clients'; segment sizes sampled every
#     0.25 s); the row names the kind of file written (a delta of changed
#     blocks, or a base). Over the whole phase: member suspect/dead lines, the
#     adds/s reached, and every node's peak RSS (VmHWM);
#  4. idle for IDLE_SECONDS after a snapshot of every node: CPU (utime+stime of
#     /proc/PID/stat) and write_bytes (/proc/PID/io) of every node;
#  5. node 2: a few adds, SIGTERM, time to exit; restart on the same data dir,
#     time to /readyz against `cat` of its files (caches dropped first when
#     /proc/sys/vm/drop_caches is writable, else "warm cache") and its peak RSS
#     meanwhile (VmHWM); a sample of 1000 loaded keys must still be present;
#  6. node 3: SIGKILL, data dir deleted, restart; time until its filter equals
#     node 1's. Convergence is judged by the filter's set-bit count
#     (pollen_filter_set_bit_positions): pollend computes a per-generation
#     digest (node::GenerationInfo::digest) but neither RESP nor /metrics
#     shows it. With no adds in flight and the filter a grow-only bitwise OR,
#     node 3's bits are a subset of node 1's, so equal counts mean equal
#     filters (wait_converged: the key sample first, cheap, then the counts).
#     Its peak RSS, and the key sample;
#  7. "member suspect"/"member dead" lines in all logs over the run, except
#     those about node 3 after it was killed on purpose (the bulk load of
#     phase 2 saturates both cores and is in that count; the steady phase has
#     its own row).
#
# /metrics is scraped sparingly: a scrape counts the set bits of every filter
# changed since the last one (Driver::Collect, on the HTTP thread), a scan of
# SIZE bytes that takes a core from the nodes. So snapshot
# completions are read from node 1's log line, and convergence polls the key
# sample (BF.MEXISTS) before the counts.
#
# Memory: three filters, plus a restarting node's peak (phase 5): 4-5 times
# its filter on 2026-12-04 (1.2 GiB at 256mb, 5.0 GiB at 1gb), so 4gb wants
# about 30 GiB. The script refuses less than 3 x SIZE + 1 GiB available and
# warns under 6 x SIZE + 1 GiB.
set -Eeuo pipefail
cd "$(dirname "$0")/../.."

# ---------------------------------------------------------------- arguments
STRICT=${STRICT:-0}
args=()
for a in "$@"; do
  if [ "$a" = --strict ]; then STRICT=1; else args+=("$a"); fi
done
usage() { echo "usage: scale.sh SIZE [POLLEND] [--strict]   (SIZE like 256mb, 1gb, 4gb)" >&2; exit 2; }
[ "${#args[@]}" -ge 1 ] && [ "${#args[@]}" -le 2 ] || usage
SIZE_ARG=${args[0]}
POLLEND=${args[1]:-build/node/runtime/pollend}

# Bytes in a Redis-style size: 256mb, 1gb (2^20, 2^30), 1m (10^6), 4096.
parse_size() {
  local s=${1,,} mult
  [[ "$s" =~ ^([0-9]+)(b|k|kb|m|mb|g|gb)?$ ]] || return 1
  case "${BASH_REMATCH[2]}" in
    '' | b) mult=1 ;; k) mult=1000 ;; kb) mult=1024 ;; m) mult=1000000 ;;
    mb) mult=1048576 ;; g) mult=1000000000 ;; gb) mult=1073741824 ;;
  esac
  echo $(( BASH_REMATCH[1] * mult ))
}
SIZE=$(parse_size "$SIZE_ARG") || usage
MIB=1048576
GIB=1073741824
[ "$SIZE" -ge $(( 8 * MIB )) ] && [ "$SIZE" -le $(( 64 * GIB )) ] ||
  { echo "scale.sh: SIZE must be from 8mb to 64gb" >&2; exit 2; }

SNAPSHOT_INTERVAL=${SNAPSHOT_INTERVAL:-60s}
snapshot_s=${SNAPSHOT_INTERVAL%s}
[[ "$snapshot_s" =~ ^[0-9]+$ ]] && [ "$snapshot_s" -ge 1 ] ||
  { echo "scale.sh: SNAPSHOT_INTERVAL must be whole seconds, like 60s" >&2; exit 2; }
CAPACITY=$(( SIZE * 8 * 10 / 99 ))  # ~9.9 bits per key at fpr 0.01
KEYS=${KEYS:-$(( CAPACITY / 40 > 1000000 ? CAPACITY / 40 : 1000000 ))}
ADD_RATE=${ADD_RATE:-20000}
STEADY_SECONDS=${STEADY_SECONDS:-600}
IDLE_SECONDS=${IDLE_SECONDS:-30}
GIBS=$(( (SIZE + GIB - 1) / GIB ))  # whole GiB, rounded up: scales the timeouts
REJOIN_TIMEOUT=${REJOIN_TIMEOUT:-$(( GIBS > 2 ? 60 * GIBS : 120 ))}
MAX_SECONDS=${MAX_SECONDS:-$(( 900 + STEADY_SECONDS ))}
for v in KEYS ADD_RATE STEADY_SECONDS IDLE_SECONDS REJOIN_TIMEOUT MAX_SECONDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "scale.sh: $v must be a positive integer" >&2; exit 2; }
done
[ "$STEADY_SECONDS" -ge $(( 2 * snapshot_s )) ] ||
  { echo "scale.sh: STEADY_SECONDS ($STEADY_SECONDS) under two snapshot intervals ($snapshot_s s each)" >&2; exit 2; }
[ "$KEYS" -le $(( CAPACITY / 2 )) ] || { echo "scale.sh: KEYS ($KEYS) over half the capacity ($CAPACITY)" >&2; exit 2; }

[ -x "$POLLEND" ] || { echo "no pollend at $POLLEND (build first: bash .ci/test.sh, or pass its path)" >&2; exit 2; }
command -v redis-cli >/dev/null && command -v curl >/dev/null ||
  { echo "needs redis-cli and curl (bash .ci/deps.sh)" >&2; exit 2; }
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "needs Debian's redis-py: apt-get install python3-redis" >&2; exit 2; }
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ $(( 3 * SIZE / 1024 + 1024 * 1024 )) -le "$avail_kib" ] ||
  { echo "scale.sh: three ${SIZE_ARG} filters do not fit in $(( avail_kib / 1024 )) MiB of available memory" >&2; exit 2; }
# A restarting node peaked at 4-5 x its filter (see the header).
[ $(( 6 * SIZE / 1024 + 1024 * 1024 )) -le "$avail_kib" ] ||
  echo "scale.sh: warning: $(( avail_kib / 1024 )) MiB available; the restart phase may need ~6 x ${SIZE_ARG}" >&2

# ---------------------------------------------------------------- helpers
WORK=$(mktemp -d /tmp/pollen-scale.XXXXXX)
[ "$(df -Pk "$WORK" | awk 'NR == 2 {print $4}')" -ge $(( 4 * SIZE / 1024 )) ] ||
  { echo "scale.sh: $WORK has less than 4 x SIZE free" >&2; rm -rf "$WORK"; exit 2; }
PY=/usr/bin/python3
SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CLK_TCK=$(getconf CLK_TCK)
START=$EPOCHREALTIME
declare -a PID GOSSIP RESP HTTP SAMPLE_KEYS helpers=()
declare -a FIG VAL TGT RES  # the table: RES is pass, FAIL or "" (no target)

say() { echo "scale: $*"; }
cleanup() {
  local p
  for p in "${helpers[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "scale: command failed (line $LINENO): $BASH_COMMAND" >&2' ERR
trap 'echo "scale: over MAX_SECONDS ($MAX_SECONDS s), giving up" >&2; exit 1' USR2
# The watchdog; its output goes nowhere, so no stray sleep holds ctest's pipe open.
( trap 'kill "$sp" 2>/dev/null; exit 0' TERM; sleep "$MAX_SECONDS" & sp=$!; wait "$sp"; kill -USR2 $$ ) >/dev/null 2>&1 &
helpers+=($!)

die() {
  local i
  echo "scale: BROKEN: $*" >&2
  for i in 1 2 3; do
    [ -f "$WORK/node$i.log" ] && { echo "--- node $i log, last lines:" >&2; tail -8 "$WORK/node$i.log" >&2; }
  done
  exit 1
}
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}'; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
# true when awk's expression over a and b holds: cmp 1.5 "a <= b" 2
cmp() { awk -v a="$1" -v b="$3" "BEGIN {exit !($2)}"; }
row() { FIG+=("$1"); VAL+=("$2"); TGT+=("$3"); RES+=("${4:-}"); }
verdict() { if cmp "$1" "$2" "$3"; then echo pass; else echo FAIL; fi; }

alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
check_nodes() {
  local i
  for i in 1 2 3; do alive "${PID[$i]}" || die "node $i (pid ${PID[$i]}) exited"; done
}
budget() {  # seconds left of MAX_SECONDS, at least 1
  local left=$(( MAX_SECONDS - ${EPOCHREALTIME%.*} + ${START%.*} ))
  echo $(( left > 1 ? left : 1 ))
}
rcli() { timeout 60 redis-cli -p "$@"; }
add_keys() {  # add_keys I KEY...: BF.MADD on node I, which must answer without an error
  local out
  out=$(rcli "${RESP[$1]}" BF.MADD crawl "${@:2}") && [[ "$out" != *ERR* ]] || die "BF.MADD on node $1: $out"
}
# The sum of NAME's samples (any labels) on node I's /metrics; fails if none.
try_metric() {  # try_metric I NAME
  curl -fsS --max-time 60 "http://127.0.0.1:${HTTP[$1]}/metrics" 2>/dev/null |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 {s += $2; n++} END {if (!n) exit 1; printf "%.0f\n", s}'
}
metric() { try_metric "$@" || die "no $2 on node $1's /metrics"; }
set_bits() { try_metric "$1" pollen_filter_set_bit_positions || echo none; }
# How many of the SAMPLE keys node I holds (BF.MEXISTS, one call).
present() { rcli "${RESP[$1]}" BF.MEXISTS crawl "${SAMPLE_KEYS[@]}" | grep -c '^1$' || true; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }  # utime + stime
disk_writes() { awk '$1 == "write_bytes:" {print $2}' "/proc/$1/io"; }
addlog_sizes() { stat -c '%n %s' "$1"/adds-*.log 2>/dev/null || true; }
drop_caches() { sync; { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; }

# ---------------------------------------------------------------- nodes
read -r -a ports <<< "$(python3 tests/free_ports.py 9 | tr '\n' ' ')"
for i in 1 2 3; do
  GOSSIP[$i]=${ports[$(( 3 * i - 3 ))]}; RESP[$i]=${ports[$(( 3 * i - 2 ))]}; HTTP[$i]=${ports[$(( 3 * i - 1 ))]}
done
SEEDS="127.0.0.1:${GOSSIP[1]},127.0.0.1:${GOSSIP[2]},127.0.0.1:${GOSSIP[3]}"
ALL_RESP="${RESP[1]},${RESP[2]},${RESP[3]}"
cat >"$WORK/scale.conf" <<EOF
[filter crawl]
capacity = $CAPACITY
fpr = 0.01
generations = 1
expansion = 0
EOF

start_node() {  # start_node I: node I on its ports and data dir, its log appended to
  local i=$1
  POLLEN_SECRET=$SECRET "$POLLEND" --config "$WORK/scale.conf" --node-name "scale-$i" \
    --gossip-bind "127.0.0.1:${GOSSIP[$i]}" --resp-bind "127.0.0.1:${RESP[$i]}" \
    --http-bind "127.0.0.1:${HTTP[$i]}" --seeds "$SEEDS" --data-dir "$WORK/data$i" \
    --snapshot-interval "$SNAPSHOT_INTERVAL" >>"$WORK/node$i.log" 2>&1 &
  PID[$i]=$!
}
wait_ready() {  # wait_ready I TIMEOUT: until node I's /readyz answers 200
  local deadline=$(( SECONDS + $2 ))
  until curl -fs --max-time 2 "http://127.0.0.1:${HTTP[$1]}/readyz" >/dev/null 2>&1; do
    alive "${PID[$1]}" || die "node $1 exited while starting"
    [ "$SECONDS" -lt "$deadline" ] || die "node $1 not ready within $2 s"
    sleep 0.05
  done
}
wait_exit() {  # wait_exit I TIMEOUT: until node I's process ends; EXIT_STATUS is its status
  local deadline=$(( SECONDS + $2 ))
  while alive "${PID[$1]}"; do
    [ "$SECONDS" -lt "$deadline" ] || die "node $1 still running $2 s after the signal"
    sleep 0.02
  done
  EXIT_STATUS=0
  wait "${PID[$1]}" || EXIT_STATUS=$?
}
# Until the nodes' filters hold the same bits (no adds may be running): first
# until each holds the key sample (cheap), then until their set-bit counts are
# equal (a scrape of a changed filter scans it on the driver thread, so they
# are spaced by POLL seconds, 1 per GiB).
POLL=$(awk -v g="$SIZE" 'BEGIN {p = g / 1073741824; printf "%.2f", p < 0.5 ? 0.5 : p}')
wait_converged() {  # wait_converged TIMEOUT NODE...
  local deadline=$(( SECONDS + $1 )) i b first same
  shift
  for i in "$@"; do
    until [ "$(present "$i" 2>/dev/null)" = 1000 ]; do
      check_nodes
      [ "$SECONDS" -lt "$deadline" ] || die "node $i lacks sampled keys after $1 s"
      sleep 0.2
    done
  done
  while true; do
    check_nodes
    same=1; first=""
    for i in "$@"; do
      b=$(set_bits "$i")
      [ -z "$first" ] && first=$b
      [ "$b" = "$first" ] && [ "$b" != 0 ] && [ "$b" != none ] || same=0
    done
    [ "$same" = 1 ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || die "nodes $* did not converge within $1 s"
    sleep "$POLL"
  done
}
snapshot_now() {  # snapshot_now I: POLLEN.SNAPSHOT on node I, waiting for it
  local out
  out=$(timeout "$(budget)" redis-cli -p "${RESP[$1]}" POLLEN.SNAPSHOT) && [[ "$out" != ERR* ]] ||
    die "POLLEN.SNAPSHOT on node $1: $out"
}
snapshot_lines() { grep -c 'info \[scale-1\] snapshot of' "$WORK/node1.log" || true; }
# What node 1's last snapshot wrote: "a base" (whole filter) or "a delta".
snapshot_kind() {
  grep 'info \[scale-1\] snapshot of' "$WORK/node1.log" | tail -1 |
    awk '{if (match($0, /[0-9]+ as deltas/) && substr($0, RSTART, 1) != "0") print "a delta"; else print "a base"}'
}

# ---------------------------------------------------------------- python
cat >"$WORK/scale.py" <<'EOF'
"""Clients for scale.sh (Debian's redis-py). Subcommands:
load PORTS FROM TO     BF.MADD url:FROM..TO-1, batches of 1000, one thread per node
trickle PORTS RATE STOP  RATE adds/s round-robin until file STOP exists; prints adds
ping PORT STOP         PING every 10 ms until STOP exists; prints max_ms count
sample N COUNT         prints a seeded sample of COUNT of url:0..N-1, one a line
"""
import os, random, sys, threading, time
import redis

KEY = "url:%d"


def conn(port):
    return redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=120)


def load(ports, first, end):
    ports = ports.split(",")
    batch, depth, errors = 1000, 8, []

    def worker(w):
        try:
            pipe = conn(ports[w]).pipeline(transaction=False)
            queued = 0
            for lo in range(first + w * batch, end, batch * len(ports)):
                pipe.execute_command("BF.MADD", "crawl", *[KEY % i for i in range(lo, min(end, lo + batch))])
                queued += 1
                if queued == depth:
                    pipe.execute()
                    queued = 0
            if queued:
                pipe.execute()
        except Exception as e:  # noqa: BLE001: reported, exit 1
            errors.append(f"node {w + 1}: {e}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(len(ports))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("load: " + "; ".join(errors))


def trickle(ports, rate, stop):
    rs = [conn(p) for p in ports.split(",")]
    tick, sent, start = 0.05, 0, time.monotonic()
    per_tick = max(1, round(rate * tick))
    while not os.path.exists(stop):
        keys = [f"t:{sent + i}" for i in range(per_tick)]
        rs[(sent // per_tick) % len(rs)].execute_command("BF.MADD", "crawl", *keys)
        sent += per_tick
        time.sleep(max(0.0, start + sent / rate - time.monotonic()))
    print(sent)


def ping(port, stop):
    r, worst, count = conn(port), 0.0, 0
    while not os.path.exists(stop):
        t = time.perf_counter()
        r.ping()
        worst = max(worst, time.perf_counter() - t)
        count += 1
        time.sleep(0.01)
    print(f"{worst * 1000:.1f} {count}")


def sample(n, count):
    print("\n".join(KEY % i for i in random.Random(53).sample(range(n), min(n, count))))


cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "load":
    load(args[0], int(args[1]), int(args[2]))
elif cmd == "trickle":
    trickle(args[0], float(args[1]), args[2])
elif cmd == "ping":
    ping(args[0], args[1])
elif cmd == "sample":
    sample(int(args[0]), int(args[1]))
else:
    sys.exit(f"scale.py: unknown command {cmd}")
EOF

# ---------------------------------------------------------------- phases
phase_start() {
  say "SIZE ${SIZE_ARG} ($SIZE bytes): capacity $CAPACITY per filter, $KEYS keys, snapshots every $SNAPSHOT_INTERVAL, work dir $WORK"
  for i in 1 2 3; do mkdir -p "$WORK/data$i"; start_node "$i"; done
  for i in 1 2 3; do wait_ready "$i" $(( 60 + 10 * GIBS )); done
  FILTER_BYTES=$(rcli "${RESP[1]}" BF.INFO crawl SIZE)
  [[ "$FILTER_BYTES" =~ ^[0-9]+$ ]] || die "BF.INFO crawl SIZE answered '$FILTER_BYTES'"
  say "filter size (BF.INFO crawl SIZE): $FILTER_BYTES bytes = $(mib "$FILTER_BYTES") (asked $(mib "$SIZE"))"
  row "filter size (BF.INFO SIZE)" "$(mib "$FILTER_BYTES")" "" ""
  mapfile -t SAMPLE_KEYS < <("$PY" "$WORK/scale.py" sample "$KEYS" 1000)
  [ "${#SAMPLE_KEYS[@]}" = 1000 ] || die "no key sample"
}

LOAD_SECONDS=0
load_keys() {  # load_keys FROM TO: url:FROM .. url:TO-1
  local t0=$EPOCHREALTIME
  timeout "$(budget)" "$PY" "$WORK/scale.py" load "$ALL_RESP" "$1" "$2" || die "the load failed"
  LOAD_SECONDS=$(awk -v a="$LOAD_SECONDS" -v b="$(since "$t0")" 'BEGIN {print a + b}')
  check_nodes
}

# A tenth of the keys: every page of the filters is touched (~8 keys per 4 KiB).
phase_preload() {
  say "loading $KEYS keys (BF.MADD x 1000, round-robin over 3 nodes), a tenth first"
  load_keys 0 $(( KEYS / 10 ))
}

phase_load() {
  local t0 secs rate
  load_keys $(( KEYS / 10 )) "$KEYS"
  rate=$(awk -v n="$KEYS" -v s="$LOAD_SECONDS" 'BEGIN {printf "%.0f", n / s}')
  say "loaded $KEYS keys in $LOAD_SECONDS s: $rate keys/s"
  row "load (BF.MADD x 1000, 3 nodes)" "$rate keys/s" "" ""
  t0=$EPOCHREALTIME
  wait_converged $(( 120 + 60 * GIBS )) 1 2 3
  secs=$(since "$t0")
  say "replicated on all nodes $secs s after the load ended ($(set_bits 1) bits set)"
  row "replicated, after the load" "$secs s" "" ""
}

phase_snapshot_rss() {
  local p=${PID[1]} kind before snaps0 lines0 written0 written t0 secs peak rss hwm ping limit
  # A few adds, so the snapshot has something to write.
  add_keys 1 s:1 s:2 s:3 s:4 s:5
  snaps0=$(metric 1 pollen_snapshots_total)
  written0=$(metric 1 pollen_snapshot_bytes_written_total)
  lines0=$(snapshot_lines)
  echo 5 >"/proc/$p/clear_refs" 2>/dev/null || say "cannot reset VmHWM (/proc/$p/clear_refs): peak from 50 ms samples"
  before=$(rss_kib "$p")
  peak=$before
  rm -f "$WORK/ping.stop"
  "$PY" "$WORK/scale.py" ping "${RESP[1]}" "$WORK/ping.stop" >"$WORK/ping.out" & local pinger=$!
  helpers+=("$pinger")
  sleep 0.3
  t0=$EPOCHREALTIME
  kill -USR1 "$p"
  while true; do
    rss=$(rss_kib "$p"); [ "$rss" -gt "$peak" ] && peak=$rss
    [ "$(snapshot_lines)" -gt "$lines0" ] && break  # its log line: no /metrics scans meanwhile
    alive "$p" || die "node 1 exited during the snapshot"
    cmp "$(since "$t0")" "a < b" $(( 120 + 60 * GIBS )) || die "node 1's snapshot did not finish"
    sleep 0.05
  done
  secs=$(since "$t0")
  touch "$WORK/ping.stop"
  wait "$pinger" || die "the PING loop failed"
  read -r ping _ <"$WORK/ping.out"
  hwm=$(hwm_kib "$p"); [ "$hwm" -gt "$peak" ] && peak=$hwm
  written=$(( $(metric 1 pollen_snapshot_bytes_written_total) - written0 ))
  [ "$(metric 1 pollen_snapshots_total)" -gt "$snaps0" ] || die "node 1 logged a snapshot, pollen_snapshots_total did not rise"
  limit=$(( FILTER_BYTES + 64 * MIB ))
  kind=$(snapshot_kind)
  say "snapshot on SIGUSR1 ($kind): ${secs} s, $written bytes written, RSS $(mib $(( before * 1024 ))) before, $(mib $(( peak * 1024 ))) peak, slowest PING ${ping} ms"
  row "RSS node 1 before snapshot" "$(mib $(( before * 1024 )))" "" ""
  row "RSS node 1 peak in snapshot" "$(mib $(( peak * 1024 )))" "<= filter + 64 MiB ($(mib "$limit"))" \
    "$(verdict $(( peak * 1024 )) "a <= b" "$limit")"
  row "RSS node 1 growth in snapshot" "$(mib $(( (peak - before) * 1024 )))" "" ""
  row "snapshot duration (SIGUSR1, $kind)" "$secs s" "" ""
  row "bytes written by that snapshot" "$(mib "$written")" "" ""
  row "slowest PING in snapshot" "$ping ms" "" ""
}

# Every add-log segment's largest size seen so far, in seen[] (by path; the
# caller declares seen): a segment is deleted after the snapshot that follows
# its rotation, so growth is summed over segments, not read from the dir.
sample_logs() {
  local name size
  while read -r name size; do
    if [ "${seen[$name]:--1}" -lt "$size" ]; then seen[$name]=$size; fi
  done < <(addlog_sizes "$WORK/data1"; addlog_sizes "$WORK/data2"; addlog_sizes "$WORK/data3")
}
wait_snapshot_line() {  # wait_snapshot_line N0 TRICKLER DEADLINE: until node 1 logs snapshot N0+1
  while [ "$(snapshot_lines)" -le "$1" ]; do
    check_nodes; alive "$2" || die "the steady load stopped"
    [ "$SECONDS" -lt "$3" ] || die "no periodic snapshot on node 1 in time"
    sample_logs
    sleep 0.25
  done
}

phase_steady() {
  local deadline=$(( SECONDS + STEADY_SECONDS + 2 * snapshot_s + 240 + 60 * GIBS ))
  local bytes0 bytes written recs0 recs adds log1=0 logs=0 limit name kind trickler i t0 secs n hwm
  local -A seen=() start=()
  local marks=()
  # Settle node 1's files first: the bulk load's deltas may have called for a new
  # base, which belongs to the load, not to the steady state measured here.
  snapshot_now 1
  for i in 1 2 3; do
    marks[$i]=$(wc -l <"$WORK/node$i.log")
    echo 5 >"/proc/${PID[$i]}/clear_refs" 2>/dev/null || say "cannot reset node $i's VmHWM: its peak is the run's"
  done
  say "steady load: $ADD_RATE adds/s over the nodes for $STEADY_SECONDS s, snapshots every $snapshot_s s"
  rm -f "$WORK/trickle.stop"
  t0=$EPOCHREALTIME
  "$PY" "$WORK/scale.py" trickle "$ALL_RESP" "$ADD_RATE" "$WORK/trickle.stop" >"$WORK/trickle.out" & trickler=$!
  helpers+=("$trickler")
  # From node 1's next periodic snapshot (its log line: see the header) to the one after.
  wait_snapshot_line "$(snapshot_lines)" "$trickler" "$deadline"
  bytes0=$(metric 1 pollen_snapshot_bytes_written_total)
  recs0=$(metric 1 pollen_addlog_records_total)
  seen=(); sample_logs
  for name in "${!seen[@]}"; do start[$name]=${seen[$name]}; done
  wait_snapshot_line "$(snapshot_lines)" "$trickler" "$deadline"
  written=$(( $(metric 1 pollen_snapshot_bytes_written_total) - bytes0 ))
  recs=$(( $(metric 1 pollen_addlog_records_total) - recs0 ))
  sample_logs
  kind=$(snapshot_kind)
  for name in "${!seen[@]}"; do
    bytes=$(( seen[$name] - ${start[$name]:-0} ))
    logs=$(( logs + bytes ))
    [[ "$name" == "$WORK/data1/"* ]] && log1=$(( log1 + bytes ))
  done
  # Every node's snapshot holds every node's adds; each add log only its own
  # clients' adds: node 1's snapshot bytes go against all three logs.
  limit=$(( 2 * logs + MIB ))
  say "node 1 over one interval: its snapshot ($kind) wrote $written bytes; the add logs grew $logs bytes" \
    "(node 1's: $log1 bytes, $recs records)"
  row "snapshot bytes, 1 interval (node 1, $kind)" "$(mib "$written")" \
    "<= 2 x add logs + 1 MiB ($(mib "$limit"))" "$(verdict "$written" "a <= b" "$limit")"
  row "add-log growth, same interval (3 nodes)" "$(mib "$logs")" "" ""
  row "add-log growth, same interval (node 1)" "$(mib "$log1")" "" ""
  # The rest of the phase.
  while cmp "$(since "$t0")" "a < b" "$STEADY_SECONDS"; do
    check_nodes; alive "$trickler" || die "the steady load stopped"
    sleep 1
  done
  touch "$WORK/trickle.stop"
  wait "$trickler" || die "the steady load failed"
  secs=$(since "$t0")
  adds=$(cat "$WORK/trickle.out")
  n=0
  for i in 1 2 3; do
    n=$(( n + $(tail -n "+$(( marks[i] + 1 ))" "$WORK/node$i.log" | grep -cE 'member (suspect|dead): ' || true) ))
  done
  say "steady load: $adds adds in $secs s; $n member suspect/dead lines"
  row "steady load: adds/s over ${secs%.*} s" "$(awk -v a="$adds" -v s="$secs" 'BEGIN {printf "%.0f", a / s}')" "$ADD_RATE" \
    "$(verdict "$adds" "a >= 0.95 * b * $secs" "$ADD_RATE")"
  row "steady load: member suspect/dead lines" "$n" "0" "$(verdict "$n" "a == b" 0)"
  limit=$(( FILTER_BYTES + 64 * MIB ))
  for i in 1 2 3; do
    hwm=$(hwm_kib "${PID[$i]}")
    row "steady load: RSS peak node $i" "$(mib $(( hwm * 1024 )))" "<= filter + 64 MiB ($(mib "$limit"))" \
      "$(verdict $(( hwm * 1024 )) "a <= b" "$limit")"
  done
}

phase_idle() {
  local i t0 s cpu0=() io0=() cpu io pct
  wait_converged $(( 120 + 60 * GIBS )) 1 2 3
  # Every node's file up to date, and its anti-entropy summaries recomputed
  # after the steady load (64 MiB a gossip round: ~13 s at 4 GiB, work the
  # load left, not idling), so that idle means idle.
  for i in 1 2 3; do snapshot_now "$i"; done
  t0=$EPOCHREALTIME
  for i in 1 2 3; do
    until [ "$(metric "$i" pollen_anti_entropy_stale_ranges)" = 0 ]; do
      check_nodes
      [ "$(since "$t0" | cut -d. -f1)" -lt $(( 60 + 30 * GIBS )) ] || die "node $i's summaries still stale after $(since "$t0") s"
      sleep "$POLL"
    done
  done
  s=$(since "$t0")
  say "summaries current on every node $s s after the snapshots"
  row "summaries current, after convergence + snapshots" "$s s" "-" "-"
  sleep 1
  say "idle for $IDLE_SECONDS s"
  for i in 1 2 3; do cpu0[$i]=$(cpu_ticks "${PID[$i]}"); io0[$i]=$(disk_writes "${PID[$i]}"); done
  t0=$EPOCHREALTIME
  sleep "$IDLE_SECONDS"
  check_nodes
  s=$(since "$t0")
  for i in 1 2 3; do
    cpu=$(( $(cpu_ticks "${PID[$i]}") - cpu0[i] ))
    io=$(( $(disk_writes "${PID[$i]}") - io0[i] ))
    pct=$(awk -v t="$cpu" -v hz="$CLK_TCK" -v s="$s" 'BEGIN {printf "%.2f", t / hz / s * 100}')
    row "idle CPU node $i" "$pct %" "<= 2 %" "$(verdict "$pct" "a <= b" 2)"
    row "idle disk writes node $i" "$io bytes" "0" "$(verdict "$io" "a == b" 0)"
  done
}

phase_restart() {
  local dir="$WORK/data2" t0 exit_s read_s ready_s cache present hwm
  add_keys 2 x:1 x:2 x:3 x:4 x:5 x:6 x:7 x:8 x:9 x:10
  sleep 0.2
  t0=$EPOCHREALTIME
  kill -TERM "${PID[2]}"
  wait_exit 2 $(( 120 + 30 * GIBS ))
  exit_s=$(since "$t0")
  [ "$EXIT_STATUS" = 0 ] || die "node 2 exited $EXIT_STATUS on SIGTERM"
  if drop_caches; then cache="cold cache"; else cache="warm cache"; fi
  t0=$EPOCHREALTIME
  cat "$dir"/* >/dev/null
  read_s=$(since "$t0")
  drop_caches || true
  t0=$EPOCHREALTIME
  start_node 2
  wait_ready 2 $(( 120 + 30 * GIBS ))
  ready_s=$(since "$t0")
  hwm=$(hwm_kib "${PID[2]}")
  present=$(present 2)
  say "node 2: SIGTERM to exit $exit_s s; restart to /readyz $ready_s s; reading $(du -sh "$dir" | cut -f1) of files $read_s s ($cache); $present/1000 keys present"
  row "SIGTERM to exit (node 2)" "$exit_s s" "<= 5 s" "$(verdict "$exit_s" "a <= b" 5)"
  row "read data dir (node 2, $cache)" "$read_s s" "" ""
  row "restart to /readyz (node 2)" "$ready_s s" "<= read + 2 s ($(awk -v r="$read_s" 'BEGIN {printf "%.2f", r + 2}') s)" \
    "$(verdict "$ready_s" "a <= b + 2" "$read_s")"
  row "RSS peak, start to ready (node 2)" "$(mib $(( hwm * 1024 )))" "" ""
  row "keys present after restart" "$present/1000" "1000/1000" "$(verdict "$present" "a == b" 1000)"
  [ "$present" = 1000 ] || BROKEN="$(( 1000 - present )) of 1000 sampled keys missing on node 2 after its restart"
}

phase_rejoin() {
  local i t0 secs present hwm
  for i in 1 2 3; do MARK[$i]=$(wc -l <"$WORK/node$i.log"); done
  kill -KILL "${PID[3]}"
  wait "${PID[3]}" 2>/dev/null || true
  rm -rf "$WORK/data3"
  mkdir -p "$WORK/data3"
  t0=$EPOCHREALTIME
  start_node 3
  wait_converged "$REJOIN_TIMEOUT" 1 3
  secs=$(since "$t0")
  hwm=$(hwm_kib "${PID[3]}")
  present=$(present 3)
  say "node 3 wiped: its filter equals node 1's $secs s after its restart; $present/1000 keys present"
  row "wipe to rejoin (node 3)" "$secs s" "<= 20 s" "$(verdict "$secs" "a <= b" 20)"
  row "RSS peak, rejoin (node 3)" "$(mib $(( hwm * 1024 )))" "" ""
  row "keys present after rejoin" "$present/1000" "1000/1000" "$(verdict "$present" "a == b" 1000)"
  [ "$present" = 1000 ] || BROKEN="$(( 1000 - present )) of 1000 sampled keys missing on node 3 after its rejoin"
}

phase_flapping() {
  local i n=0 before after
  for i in 1 2 3; do
    before=$(head -n "${MARK[$i]}" "$WORK/node$i.log" | grep -cE 'member (suspect|dead): ' || true)
    after=$(tail -n "+$(( MARK[i] + 1 ))" "$WORK/node$i.log" | grep -E 'member (suspect|dead): ' |
      grep -cvE 'member (suspect|dead): scale-3( |$)' || true)
    n=$(( n + before + after ))
  done
  row "member suspect/dead lines, whole run (bulk load included)" "$n" "" ""
}

print_table() {
  local i w1=6 w2=5 w3=6 passed=0 failed=0
  for i in "${!FIG[@]}"; do
    [ "${#FIG[$i]}" -gt "$w1" ] && w1=${#FIG[$i]}
    [ "${#VAL[$i]}" -gt "$w2" ] && w2=${#VAL[$i]}
    [ "${#TGT[$i]}" -gt "$w3" ] && w3=${#TGT[$i]}
  done
  echo
  printf "%-${w1}s | %-${w2}s | %-${w3}s | %s\n" figure value target met
  printf '%s\n' "$(printf '%*s' $(( w1 + w2 + w3 + 13 )) '' | tr ' ' -)"
  for i in "${!FIG[@]}"; do
    printf "%-${w1}s | %-${w2}s | %-${w3}s | %s\n" "${FIG[$i]}" "${VAL[$i]}" "${TGT[$i]:--}" "${RES[$i]:--}"
    [ "${RES[$i]}" = pass ] && passed=$(( passed + 1 ))
    [ "${RES[$i]}" = FAIL ] && failed=$(( failed + 1 ))
  done
  echo
  echo "$passed passed, $failed failed (SIZE ${SIZE_ARG}, $(since "$START") s)"
  FAILED=$failed
}

BROKEN=""
declare -a MARK
phase_start
phase_preload
phase_snapshot_rss
phase_load
phase_steady
phase_idle
phase_restart
phase_rejoin
check_nodes
phase_flapping
print_table
[ -z "$BROKEN" ] || die "$BROKEN"
if [ "$STRICT" = 1 ] && [ "$FAILED" -gt 0 ]; then
  say "--strict: $FAILED of the targets missed"
  exit 1
fi
