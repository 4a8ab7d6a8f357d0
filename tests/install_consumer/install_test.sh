#!/usr/bin/env bash
# The install test: installs the build tree into a fresh prefix, then
# configures, builds and runs tests/install_consumer/project against it.
#   install_test.sh <build dir> <work dir> <consumer source> <c++ flags> <generator>
# Needs a complete build of <build dir> (as after `cmake --build`).
set -euo pipefail
build=$1 work=$2 src=$3 cxxflags=$4 generator=$5
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in bin/pollend lib/libpollen_crdt.a include/crdt/blocked_filter.h include/protocol/wire.pb.h \
         lib/cmake/Pollen/PollenConfig.cmake lib/cmake/Pollen/PollenConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "install_test: $prefix/$f was not installed" >&2; exit 1; }
done
# Only the installed package is visible to the consumer, not the build tree.
cmake -S "$src" -B "$work/consumer" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$cxxflags" \
  >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
"$work/consumer/pollen_consumer"
# The version file refuses an incompatible request.
if cmake -S "$src" -B "$work/consumer-v9" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" -DPOLLEN_WANT_VERSION=9.0 \
     >"$work/configure-v9.log" 2>&1; then
  echo "install_test: find_package(Pollen 9.0) succeeded against version 0.x" >&2
  exit 1
fi
grep -q 'requested version "9.0"' "$work/configure-v9.log" ||
  { echo "install_test: the 9.0 request failed for another reason:" >&2; cat "$work/configure-v9.log" >&2; exit 1; }
echo "install_test: ok"
