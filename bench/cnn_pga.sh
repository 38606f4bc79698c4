#!/usr/bin/env bash
# configs/cnn-onepeer8.yaml (8 peers, LeNet-style CNN, one-peer exponential gossip + an exact
# global average every 6 steps, 3 epochs) against 8 peers all-reducing every step with the same
# model, data, batch, schedule and epochs, on iid and on Dirichlet(0.5) shards. Prints each run's
# averaged-model test accuracy, the difference, bytes sent per peer and wall time.
# Usage: bench/cnn_pga.sh [seeds]
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${1:-1}
bash scripts/setup.sh >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # $1 name, $2 sed script; prints "accuracy sent_MB wall_s"
  sed -e "$2" -e 's/^device: .*/device: cpu/' configs/cnn-onepeer8.yaml > "$OUT/$1.yaml"
  local t0=$SECONDS
  build/bin/gossip-launch "$OUT/$1.yaml" > "$OUT/$1.log" 2>&1
  local acc mb
  acc=$(grep -o 'averaged_model_test_acc [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  mb=$(grep -o 'sent_MB [0-9.]*' "$OUT/$1.log" | awk '{s += $2} END {printf "%.0f", s / NR}')
  echo "$acc $mb $((SECONDS - t0))"
}
echo "| seed | shards | one-peer exp + PGA(6) acc | MB/peer | wall s | all-reduce acc | MB/peer | wall s | PGA − all-reduce (points) |"
echo "|---|---|---|---|---|---|---|---|---|"
for seed in $(seq "$SEEDS"); do
  for shards in iid dirichlet; do
    s="s/^seed: .*/seed: $seed/; s/sharding: iid/sharding: $shards, dirichlet_alpha: 0.5/"
    read -r pa pm pw <<< "$(run "pga-$shards" "$s")"
    read -r aa am aw <<< "$(run "ar-$shards" "$s; s/^algorithm: .*/algorithm: {kind: allreduce}/")"
    echo "| $seed | $shards | $pa | $pm | $pw | $aa | $am | $aw | $(awk -v a="$pa" -v b="$aa" 'BEGIN{printf "%+.2f", 100 * (a - b)}') |"
  done
done
