#!/usr/bin/env bash
# The README's main command: install, build, then train with the embedded default config
# (or the YAML given as first argument).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
CONFIG=${1:-configs/single.yaml}
exec build/src/gossip-peer --config "$CONFIG"
