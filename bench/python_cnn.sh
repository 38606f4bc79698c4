#!/usr/bin/env bash
# examples/torch_cnn.py (a PyTorch CNN, 4 Python peers, Fashion-MNIST iid shards) mixed by
# gossip with configs/torch-cnn4.yaml (one-peer exponential + a global average every 6 steps)
# against the same script averaging every step through torch.distributed gloo all-reduce, the same
# shards, seeds, steps and schedule. Prints each run's averaged-model test accuracy and wall time.
# Usage: bench/python_cnn.sh [epochs]   (default 3; the script fixes its seeds)
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-3}
GOSSIP_EXTRA_PACKAGES=python3-torch bash scripts/setup.sh >/dev/null
acc() { grep -o 'averaged_model_test_acc [0-9.]*' | head -1 | awk '{print $2}'; }
t0=$SECONDS
g=$(EPOCHS=$EPOCHS PYTHONPATH=build/python build/bin/gossip-launch configs/torch-cnn4.yaml -- /usr/bin/python3 examples/torch_cnn.py | acc)
t1=$SECONDS
a=$(EPOCHS=$EPOCHS GLOO_ALLREDUCE=1 PYTHONPATH=build/python build/bin/gossip-launch configs/torch-cnn4.yaml -- /usr/bin/python3 examples/torch_cnn.py | acc)
t2=$SECONDS
echo "| epochs | one-peer exp + PGA(6) acc | wall s | gloo all-reduce acc | wall s | gossip − all-reduce (points) |"
echo "|---|---|---|---|---|---|"
echo "| $EPOCHS | $g | $((t1 - t0)) | $a | $((t2 - t1)) | $(awk -v a="$g" -v b="$a" 'BEGIN{printf "%+.2f", 100 * (a - b)}') |"
