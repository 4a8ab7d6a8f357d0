#!/usr/bin/env bash
# Folds the working corpora of `fuzz/run.sh` back into the committed seed
# corpus: for each target, libFuzzer's -merge=1 keeps the smallest set of
# inputs (from fuzz/corpus/TARGET and CORPUS_DIR/TARGET) that covers every
# feature either reached, and that set replaces fuzz/corpus/TARGET.
#
#   bash fuzz/minimize.sh [TARGET ...]     # default: every target with a working corpus
#
# Uses the libFuzzer build fuzz/run.sh made (BUILD_DIR, default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
CORPUS_DIR=${CORPUS_DIR:-$BUILD_DIR/corpus}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then mapfile -t targets < <(bash fuzz/run.sh list); fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
merged=""
trap 'rm -rf "$merged"' EXIT
for target in "${targets[@]}"; do
  binary=$(find "$BUILD_DIR/fuzz" -type f -name "$target" -perm -u+x 2>/dev/null | head -n 1)
  [ -n "$binary" ] || { echo "$target: not built (run bash fuzz/run.sh $target SECONDS first)" >&2; exit 1; }
  [ -d "$CORPUS_DIR/$target" ] || { echo "$target: no working corpus, skipped"; continue; }
  merged=$(mktemp -d)
  sources=("$CORPUS_DIR/$target")
  [ -d "fuzz/corpus/$target" ] && sources=("fuzz/corpus/$target" "${sources[@]}")
  "$binary" -merge=1 -timeout=25 -rss_limit_mb=4096 "$merged" "${sources[@]}" >"$CORPUS_DIR/$target.merge.log" 2>&1 ||
    { echo "$target: merge failed, see $CORPUS_DIR/$target.merge.log" >&2; exit 1; }
  rm -rf "fuzz/corpus/$target"
  mkdir -p fuzz/corpus
  mv "$merged" "fuzz/corpus/$target"
  merged=""
  chmod 755 "fuzz/corpus/$target"
  printf '%-36s %6d inputs %8d bytes\n' "$target" "$(find "fuzz/corpus/$target" -type f | wc -l)" \
    "$(du -sb "fuzz/corpus/$target" | cut -f1)"
done
