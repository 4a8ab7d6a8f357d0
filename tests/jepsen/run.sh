#!/usr/bin/env bash
# The long Jepsen-style run, in one command (as root): installs dependencies,
# builds pollend (Release, build/) and runs tests/jepsen/jepsen.py.
#
#   bash tests/jepsen/run.sh [SECONDS] [SEED]     # default 600 s, a random seed
#
# More options (nodes, writers, rate, bounds): /usr/bin/python3 tests/jepsen/jepsen.py --help
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-600}
bash .ci/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target pollend
args=(--pollend build/node/runtime/pollend --seconds "$SECONDS_TO_RUN" --converge-timeout 120)
[ $# -ge 2 ] && args+=(--seed "$2")
exec /usr/bin/python3 tests/jepsen/jepsen.py "${args[@]}"
