#!/usr/bin/env bash
# The README's test command: installs dependencies, configures and builds a
# Release build in build/, and runs every test (ctest) with a summary.
#   bash .ci/test.sh            # everything
#   BUILD_DIR=... BUILD_TYPE=... SANITIZE=address|thread CTEST_ARGS="-L concurrency" TARGETS="a b" \
#     CMAKE_ARGS="-DPOLLEN_BUILD_FUZZ=OFF" bash .ci/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/deps.sh --tests

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
SANITIZE=${SANITIZE:-}
JOBS=${JOBS:-$(nproc)}

# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DPOLLEN_SANITIZE="$SANITIZE" \
  -DPOLLEN_BUILD_BENCH="${BUILD_BENCH:-ON}" ${CMAKE_ARGS:-} >/dev/null
if [ -n "${TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS
else
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
# shellcheck disable=SC2086
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" ${CTEST_ARGS:-}
