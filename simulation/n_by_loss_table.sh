#!/usr/bin/env bash
# Issue 11's N x loss table: one seeded pollen-sim run per row, printed as
# Markdown (simulation/README.md, "N × loss table").
#   bash simulation/n_by_loss_table.sh            # uses build/simulation/pollen-sim
#   SIM=/path/to/pollen-sim ROWS=100 bash simulation/n_by_loss_table.sh   # N=100 rows only
#   ROWS="100 1000 10000" bash simulation/n_by_loss_table.sh   # with N=10,000 (~8 GB of RAM)
#   THREADS=2 bash simulation/n_by_loss_table.sh   # pollen-sim --threads=2: same rows, faster
#   THREADS=2 HUGE_PAGES=on ROWS=10000 bash simulation/n_by_loss_table.sh   # and --huge-pages=on
#     (the same runs again, faster still, for ~6% more memory: simulation/README.md, "Huge pages")
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIM=${SIM:-"$ROOT/build/simulation/pollen-sim"}
ROWS=${ROWS:-"100 1000"}
THREADS=${THREADS:-1}
HUGE_PAGES=${HUGE_PAGES:-off}
case "$HUGE_PAGES" in on|off) ;; *) echo "HUGE_PAGES must be on or off" >&2; exit 2 ;; esac
[ -x "$SIM" ] || { echo "no $SIM; build it first (cmake --build build --target pollen-sim)" >&2; exit 1; }
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

row() {  # label, pollen-sim options...
  local label=$1; shift
  "$SIM" "$@" --threads="$THREADS" --huge-pages="$HUGE_PAGES" --json > "$OUT"
  /usr/bin/python3 - "$label" "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
tx = d['transmissions_per_bit']
print("| %s | %.1f (%.3f·(N−1)) | %d | %d | %s, %s | %s | %.0f | %.1f | %.1f | %.1f | %s |" % (
    sys.argv[1], tx, tx / d['n_minus_1'], round(d['bytes_per_new_key']), round(d['window_bytes_per_new_key']),
    d['p999_median_seconds'], d['p999_max_seconds'], d['convergence_seconds'],
    d['membership_bytes_per_node_second'], d['virtual_seconds'] / max(d['cpu_seconds'], 1e-9),
    d['window_seconds'] / max(d['window_cpu_seconds'], 1e-9),
    d['window_seconds'] / max(d['window_wall_seconds'], 1e-9), d['passed']))
PY
}

echo "| run | tx per bit | bytes/key (all) | bytes/key (window) | 99.9% median, max (s) | convergence after faults (s) | membership B/node/s | sim s per CPU s (run) | (window) | sim s per wall s (window, $THREADS thread(s), huge pages $HUGE_PAGES) | passed |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for n in $ROWS; do
  case "$n" in
    100)
      base=(--nodes=100 --warmup=30 --duration=60 --digest-owners=0 --seed=1)
      row "N=100, loss 0, 20 adds/s" "${base[@]}"
      row "N=100, loss 10%" "${base[@]}" --loss=0.1
      row "N=100, partition-heal" "${base[@]}" --scenario=partition-heal
      row "N=100, 20,000 adds/s" "${base[@]}" --add-rate=20000 --capacity=2000000 ;;
    1000)
      base=(--nodes=1000 --warmup=20 --duration=15 --add-rate=0.5 --sample-every=1.5 --digest-owners=0
            --digest-rotate=0 --capacity=10000 --liveness-bound=60 --seed=1)
      row "N=1000, loss 0" "${base[@]}"
      row "N=1000, loss 10%" "${base[@]}" --loss=0.1
      row "N=1000, partition-heal" "${base[@]}" --scenario=partition-heal ;;
    10000)
      # A warm start (every node already lists every other): the cold start
      # alone would take hours here (simulation/README.md). ~8 GB, ~2 min a row.
      base=(--nodes=10000 --warm-start --warmup=5 --duration=10 --add-rate=0.5 --sample-every=1 --digest-owners=0
            --digest-rotate=0 --capacity=10000 --liveness-bound=30 --seed=1)
      row "N=10,000 (warm start), loss 0" "${base[@]}"
      row "N=10,000 (warm start), loss 10%" "${base[@]}" --loss=0.1 ;;
    *) echo "no rows for N=$n (100, 1000, 10000)" >&2; exit 2 ;;
  esac
done
