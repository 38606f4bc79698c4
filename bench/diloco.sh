#!/usr/bin/env bash
# Decentralized DiLoCo against all-reduce every step: configs/gpt-diloco8.yaml (8 peers, the
# byte-level GPT on the fortunes text, AdamW inside) for STEPS steps with the pseudo-gradients
# averaged every H steps as RUNS lists, and the same YAML with `algorithm: allreduce` (the models
# averaged after every step). Progress lines (whose consensus measurement is itself a collective)
# only at the end, so bytes are the algorithms'.
# Prints each run's averaged model's validation loss and bits per byte, bytes sent per peer, the
# ratio of bytes to all-reduce's and wall time.
# Usage: bench/diloco.sh [steps] [inner_steps] [seed]   (defaults: 400 50 1; RUNS="allreduce,1.0,0.5,int8
# gossip,1.0,0.5,bf16": the outer average, outer lr, outer momentum and wire of each DiLoCo run, " " none;
# ALLREDUCE="loss bpb MB s": take all-reduce's row from an earlier run instead of running it)
# (timeout_s 300: runs may share the 2 cores with each other; a slow peer is not a dead one here)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
H=${2:-50}
SEED=${3:-1}
RUNS=${RUNS:-"allreduce,1.0,0.5,bf16 allreduce,1.0,0.5,int8 allreduce,0.7,0.9,bf16 allreduce,1.0,0.0,bf16 gossip,1.0,0.5,bf16"}
bash scripts/setup.sh >/dev/null
source bench/lib.sh
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # $1 name, $2 algorithm; prints "loss bpb sent_MB wall_s"
  sed -e "s/^algorithm: .*/algorithm: $2/" -e 's/^device: .*/device: cpu/' -e "s/^log_every: .*/log_every: $STEPS/" \
      -e "s/^  steps: .*/  steps: $STEPS/" -e "s/^seed: .*/seed: $SEED/" configs/gpt-diloco8.yaml > "$OUT/$1.yaml"
  local t0=$SECONDS
  build/bin/gossip-launch "$OUT/$1.yaml" > "$OUT/$1.log" 2>&1 || { tail -n 20 "$OUT/$1.log" >&2; echo "- - - -"; return; }
  local loss bpb mb
  loss=$(grep -o 'averaged_model_test_loss [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  bpb=$(grep -o 'averaged_model_test_bpb [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  mb=$(grep 'final:' "$OUT/$1.log" | grep -o 'sent_MB [0-9.]*' | awk '{s += $2} END {printf "%.1f", s / NR}')
  echo "$loss $bpb $mb $((SECONDS - t0))"
}
echo "| algorithm (8 peers, $STEPS steps, seed $SEED) | val loss | val bits/byte | vs all-reduce | MB sent/peer | all-reduce's bytes / these | wall s |"
echo "|---|---|---|---|---|---|---|"
if [[ ${ALLREDUCE:-run} == run ]]; then read -r al ab am aw <<< "$(run allreduce "{kind: allreduce, timeout_s: 300}")"; else read -r al ab am aw <<< "$ALLREDUCE"; fi
echo "| all-reduce every step | $al | $ab | — | $am | 1 | $aw |"
for r in $RUNS; do
  IFS=, read -r avg lr mu wire <<< "$r"
  read -r l b m w <<< "$(run "diloco-$avg-$lr-$mu-$wire" \
    "{kind: diloco, inner_steps: $H, outer_lr: $lr, outer_momentum: $mu, outer_average: $avg, wire: $wire, timeout_s: 300}")"
  echo "| DiLoCo H = $H, $avg average ($wire), outer lr $lr, momentum $mu | $l | $b |" \
       "$(awk -v x="$b" -v y="$ab" 'BEGIN{printf "%+.1f %%", 100 * (x - y) / y}') | $m |" \
       "$(awk -v x="$am" -v y="$m" 'BEGIN{printf "%.0f", x / y}') | $w |"
done
echo
machine_line
