#!/usr/bin/env bash
# The README's test command: install, build, run the whole suite through ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# PyTorch (Debian's python3-torch) for the tests of the Python module with torch models.
GOSSIP_EXTRA_PACKAGES=python3-torch bash scripts/setup.sh
cd "${GOSSIP_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
