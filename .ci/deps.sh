#!/usr/bin/env bash
# Installs everything Pollen's build, tests and demo need on Debian 12.
# Idempotent and quiet: when every package is present it does nothing.
# With --tests (the README's test command): also Node.js (if missing) and
# clients/node's npm packages (npm ci), which the demo does not need.
set -euo pipefail
FOR_TESTS=0
[ "${1:-}" = "--tests" ] && FOR_TESTS=1

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-system-dev
  libprotobuf-dev protobuf-compiler
  libsodium-dev libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server redis-tools python3 python3-redis python3-scrapy python3-venv python3-setuptools python3-wheel libhiredis-dev
  prometheus curl procps iproute2 iptables chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js for clients/node: Debian's nodejs and npm only where there is no
# node or npm at all (nodesource's nodejs brings its own npm, and conflicts
# with Debian's npm package).
if [ "$FOR_TESTS" = 1 ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # prometheus is only needed for promtool; don't let its service start matter.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# clients/node's npm packages (ioredis; Crawlee for its tests), as its
# package-lock.json pins them: installed again when node_modules is missing or
# older than the lock file (npm ci writes node_modules/.package-lock.json last).
NODE_CLIENT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/clients/node
if [ "$FOR_TESTS" = 1 ] && { [ ! -f "$NODE_CLIENT/node_modules/.package-lock.json" ] ||
   [ "$NODE_CLIENT/package-lock.json" -nt "$NODE_CLIENT/node_modules/.package-lock.json" ]; }; then
  echo "deps: npm ci in clients/node"
  npm_log=$(mktemp)
  if ! (cd "$NODE_CLIENT" && npm ci --no-audit --no-fund --loglevel=error) >"$npm_log" 2>&1; then
    cat "$npm_log" >&2
    rm -f "$npm_log"
    echo "deps: npm ci in clients/node failed" >&2
    exit 1
  fi
  rm -f "$npm_log"
fi
