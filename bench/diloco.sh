#!/usr/bin/env bash
# Decentralized DiLoCo against all-reduce every step: configs/gpt-diloco8.yaml (8 peers, the
# byte-level GPT on the fortunes text, AdamW inside) for STEPS steps with the pseudo-gradients
# averaged by the ring all-reduce and by one gossip round on the ring every H steps, and the same
# YAML with `algorithm: allreduce` (the models averaged after every step). Progress lines (whose
# consensus measurement is itself a collective) only at the end, so bytes are the algorithms'.
# Prints each run's averaged model's validation loss and bits per byte, bytes sent per peer, the
# ratio of bytes to all-reduce's and wall time.
# Usage: bench/diloco.sh [steps] [inner_steps]   (defaults: 400 50)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
H=${2:-50}
bash scripts/setup.sh >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # $1 name, $2 algorithm; prints "loss bpb sent_MB wall_s"
  sed -e "s/^algorithm: .*/algorithm: $2/" -e 's/^device: .*/device: cpu/' -e "s/^log_every: .*/log_every: $STEPS/" \
      -e "s/^  steps: .*/  steps: $STEPS/" configs/gpt-diloco8.yaml > "$OUT/$1.yaml"
  local t0=$SECONDS
  build/bin/gossip-launch "$OUT/$1.yaml" > "$OUT/$1.log" 2>&1 || { tail -n 20 "$OUT/$1.log" >&2; echo "- - - -"; return; }
  local loss bpb mb
  loss=$(grep -o 'averaged_model_test_loss [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  bpb=$(grep -o 'averaged_model_test_bpb [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  mb=$(grep -o 'sent_MB [0-9.]*' "$OUT/$1.log" | awk '{s += $2} END {printf "%.1f", s / NR}')
  echo "$loss $bpb $mb $((SECONDS - t0))"
}
read -r al ab am aw <<< "$(run allreduce "{kind: allreduce}")"
echo "| algorithm (8 peers, $STEPS steps) | val loss | val bits/byte | vs all-reduce | MB sent/peer | all-reduce's bytes / these | wall s |"
echo "|---|---|---|---|---|---|---|"
echo "| all-reduce every step | $al | $ab | — | $am | 1 | $aw |"
for avg in allreduce gossip; do
  read -r l b m w <<< "$(run "diloco-$avg" "{kind: diloco, inner_steps: $H, outer_lr: 0.7, outer_momentum: 0.9, outer_average: $avg}")"
  echo "| DiLoCo H = $H, $avg average | $l | $b | $(awk -v x="$b" -v y="$ab" 'BEGIN{printf "%+.1f %%", 100 * (x - y) / y}') | $m | $(awk -v x="$am" -v y="$m" 'BEGIN{printf "%.0f", x / y}') | $w |"
done
