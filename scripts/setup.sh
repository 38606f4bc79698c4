#!/usr/bin/env bash
# Installs what gossip needs from Debian packages (when missing) and builds it into build/.
# Sourced by the README's two commands; safe to run again (it only installs what is missing and
# rebuilds incrementally).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(build-essential cmake pkg-config libzmq3-dev cppzmq-dev libyaml-cpp-dev libboost-dev
          libgtest-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist fortunes
          pybind11-dev python3-dev python3-numpy ${GOSSIP_EXTRA_PACKAGES:-})
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BUILD_DIR=${GOSSIP_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${GOSSIP_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
