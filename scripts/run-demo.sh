#!/usr/bin/env bash
# The README's main command: install, build, then run the embedded default — 4 peers on loopback,
# ring gossip on Fashion-MNIST — through gossip-launch (or the YAML given as first argument).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
CONFIG=${1:-configs/ring4.yaml}
shift || true
exec build/bin/gossip-launch "$CONFIG" "$@"
