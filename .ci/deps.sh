#!/usr/bin/env bash
# Installs everything Pollen's build, tests and demo need on Debian 12.
# Idempotent and quiet: when every package is present it does nothing.
set -euo pipefail

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
[ ${#missing[@]} -eq 0 ] && exit 0

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
