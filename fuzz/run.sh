#!/usr/bin/env bash
# Coverage-guided fuzzing of every fuzz target under libFuzzer, built with clang
# and ASan+UBSan. The long campaign; CI runs the same targets as bounded
# standalone corpus runners (ctest label "fuzz") instead.
#
#   bash fuzz/libfuzzer.sh [SECONDS_PER_TARGET] [TARGET ...]   # default 600 s, every target
#
# Environment: BUILD_DIR (build-fuzz), CORPUS_DIR (build-fuzz/corpus, kept
# between runs), JOBS (targets fuzzed at once; default the core count).
# Prints one line per target (executions, coverage edges, corpus size, crashes) and exits 1 if
# any target crashed; each crash input is kept as CORPUS_DIR/<target>/crash-*
# and replays alone: `BUILD_DIR/fuzz/<dir>/<target> CRASH_FILE`. Every harness
# builds its state from the input, so no earlier input is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-600}
shift || true
BUILD_DIR=${BUILD_DIR:-build-fuzz}
CORPUS_DIR=${CORPUS_DIR:-$BUILD_DIR/corpus}
JOBS=${JOBS:-$(nproc)}

bash .ci/deps.sh
if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(grep -rho --include=CMakeLists.txt 'pollen_add_fuzz_target(fuzz_[a-z_]*' fuzz | sed 's/pollen_add_fuzz_target(//' | sort)
fi

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPOLLEN_LIBFUZZER=ON -DPOLLEN_SANITIZE=address -DPOLLEN_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

fuzz_one() {
  local target=$1 binary corpus log
  binary=$(find "$BUILD_DIR/fuzz" -type f -name "$target" -perm -u+x | head -n 1)
  corpus="$CORPUS_DIR/$target"
  log="$CORPUS_DIR/$target.log"
  mkdir -p "$corpus"
  local before
  before=$(find "$corpus" -maxdepth 1 -name 'crash-*' | wc -l)
  "$binary" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=25 -rss_limit_mb=4096 \
    -artifact_prefix="$corpus/" "$corpus" >"$log" 2>&1 || true
  local execs edges size crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  size=$(find "$corpus" -maxdepth 1 -type f ! -name 'crash-*' ! -name 'timeout-*' ! -name 'oom-*' | wc -l)
  crashes=$(( $(find "$corpus" -maxdepth 1 \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l) - before ))
  printf '%-36s %12s execs %6s edges %7s corpus %3s crashes\n' "$target" "${execs:-?}" "${edges:-?}" "$size" "$crashes"
  [ "$crashes" -eq 0 ]
}

echo "libFuzzer: ${#targets[@]} targets x ${SECONDS_PER_TARGET}s, $JOBS at a time; logs in $CORPUS_DIR"
failed=0
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ "$failed" -eq 0 ] && echo "libFuzzer: no crashes" || { echo "libFuzzer: crashes found (see above)"; exit 1; }
