#!/usr/bin/env bash
# The README's test command: install, build, run the whole suite through ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# PyTorch (Debian's python3-torch) for the tests of the Python module with torch models; Open MPI
# and a one-node Slurm (slurm-wlm, munge) for the tests that start peers with mpirun and srun;
# tmux for the test of gossip-launch's live view under a real terminal.
GOSSIP_EXTRA_PACKAGES="python3-torch openmpi-bin slurm-wlm munge tmux" bash scripts/setup.sh
cd "${GOSSIP_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
