#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer, built with clang and ASan+UBSan.
#
#   bash fuzz/run.sh TARGET SECONDS        # one target, e.g. fuzz_node_frames 600
#   bash fuzz/run.sh all SECONDS           # every target, JOBS at a time (the long campaign)
#   bash fuzz/run.sh list                  # the target names
#
# Each target starts from its committed, minimized corpus (fuzz/corpus/TARGET,
# read only) and its working corpus (CORPUS_DIR/TARGET, kept between runs), with
# its protocol's dictionary (fuzz/dict/) where it has one. `bash fuzz/minimize.sh`
# folds the working corpora back into fuzz/corpus.
#
# Prints one line per target (executions, coverage edges, corpus size, crashes)
# and exits 1 if any target crashed or failed to start. A crash input is kept
# as CORPUS_DIR/TARGET.artifacts/crash-* and replays alone (every harness
# builds its state from the input): `BUILD_DIR/fuzz/<dir>/TARGET CRASH_FILE`.
# Turn it into a regression test by copying it to fuzz/regressions/TARGET/
# (ctest replays that directory on every run).
#
# Environment: BUILD_DIR (build-fuzz), CORPUS_DIR (BUILD_DIR/corpus), JOBS
# (targets fuzzed at once; default the core count), FUZZ_ARGS (more libFuzzer
# flags).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac

BUILD_DIR=${BUILD_DIR:-build-fuzz}
CORPUS_DIR=${CORPUS_DIR:-$BUILD_DIR/corpus}
JOBS=${JOBS:-$(nproc)}

mapfile -t all_targets < <(grep -rho --include=CMakeLists.txt 'pollen_add_fuzz_target(fuzz_[a-z_0-9]*' fuzz |
  sed 's/pollen_add_fuzz_target(//' | sort)
if [ "$1" = list ]; then printf '%s\n' "${all_targets[@]}"; exit 0; fi
[ $# -eq 2 ] || usage
if [ "$1" = all ]; then
  targets=("${all_targets[@]}")
else
  # A loop, not `printf | grep -q`: under pipefail, grep's early exit can
  # SIGPIPE printf and fail the pipeline for a known target.
  known=0
  for t in "${all_targets[@]}"; do [ "$t" = "$1" ] && known=1; done
  [ "$known" = 1 ] || { echo "unknown target $1 (bash fuzz/run.sh list)" >&2; exit 2; }
  targets=("$1")
fi
SECONDS_PER_TARGET=$2
[[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] && [ "$SECONDS_PER_TARGET" -gt 0 ] || { echo "SECONDS must be a positive integer" >&2; exit 2; }

# The dictionary a target's input format calls for (none: binary, structure-aware harnesses).
dictionary_of() {
  case "$1" in
    fuzz_resp_request_parser|fuzz_resp_dispatcher) echo fuzz/dict/resp_request.dict ;;
    fuzz_resp_reply_reader) echo fuzz/dict/resp_reply.dict ;;
    fuzz_runtime_config_parse) echo fuzz/dict/config.dict ;;
  esac
}

bash .ci/deps.sh
if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
fi

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPOLLEN_LIBFUZZER=ON -DPOLLEN_SANITIZE=address -DPOLLEN_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

fuzz_one() {
  local target=$1 binary work seeds log dict artifacts
  binary=$(find "$BUILD_DIR/fuzz" -type f -name "$target" -perm -u+x | head -n 1)
  work="$CORPUS_DIR/$target"
  seeds="fuzz/corpus/$target"
  log="$CORPUS_DIR/$target.log"
  # Crash inputs go beside the working corpus, not into it: libFuzzer loads
  # every file of the corpus at start-up, so an old crash would crash again
  # before any fuzzing (and under the same name, unnoticed).
  artifacts="$CORPUS_DIR/$target.artifacts"
  mkdir -p "$work" "$artifacts"
  touch "$artifacts/.start"
  # -entropic=0: libFuzzer's entropic schedule (LLVM 14's default) spent 71%
  # of fuzz_node_frames' time updating feature frequencies with a 2k-input
  # corpus; without it the target runs 4719 inputs/s instead of 971 (20 s
  # each, same corpus). FUZZ_ARGS=-entropic=1 brings it back.
  local args=(-max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=25 -rss_limit_mb=4096
              -entropic=0 -artifact_prefix="$artifacts/")
  dict=$(dictionary_of "$target")
  [ -n "$dict" ] && args+=(-dict="$dict")
  local dirs=("$work")
  [ -d "$seeds" ] && dirs+=("$seeds")
  # Every crash turned into a regression input replays first, here under
  # clang's ASan+UBSan (and under g++ in ctest's Release run).
  [ -d "fuzz/regressions/$target" ] && dirs+=("fuzz/regressions/$target")
  local status=0
  # shellcheck disable=SC2086
  "$binary" "${args[@]}" ${FUZZ_ARGS:-} "${dirs[@]}" >"$log" 2>&1 || status=$?
  local execs edges size crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{print $2}' || true)
  size=$(find "$work" -maxdepth 1 -type f | wc -l)
  crashes=$(find "$artifacts" -maxdepth 1 -type f -newer "$artifacts/.start" | wc -l)
  printf '%-36s %12s execs %6s edges %7s corpus %3s crashes\n' "$target" "${execs:-?}" "${edges:-?}" "$size" "$crashes"
  # libFuzzer exits non-zero on a crash, timeout, leak or out-of-memory, and
  # on a failure before fuzzing (a bad dictionary, a crash in the seeds).
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    echo "  $target: FAILED (exit $status); log $log, inputs in $artifacts"
    tail -n 5 "$log" | sed 's/^/    /'
    return 1
  fi
}

echo "libFuzzer: ${#targets[@]} target(s) x ${SECONDS_PER_TARGET}s, $JOBS at a time; logs in $CORPUS_DIR"
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
if [ "$failed" -eq 0 ]; then echo "libFuzzer: no crashes"; else echo "libFuzzer: crashes found (see above)"; exit 1; fi
