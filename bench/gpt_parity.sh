#!/usr/bin/env bash
# The GPT of configs/gpt-ring4.yaml (4 layers, 4 heads, width 128, context 128, batch 32, AdamW
# lr 1e-3 with weight decay 0.1, clipping at 1, cosine schedule with 50 warm-up steps to 1e-4) on
# the fortunes text, three ways, validation bits per byte over the whole validation part:
#   1. gossip, one peer, STEPS steps;
#   2. PyTorch (python3-torch, /usr/bin/python3, bench/model_torch.py): the same architecture,
#      data split, window rule, steps, batch, optimiser and schedule (run beside 1, one core each);
#   3. gossip, 4 ring-gossip peers, STEPS/4 steps each (the same total samples), averaged model.
# Usage: bench/gpt_parity.sh [steps] [seeds]   (defaults 800 and 1)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-800}
SEEDS=${2:-1}
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "installing python3-torch"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null; }
bash scripts/setup.sh >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
config() {  # $1 peers, $2 steps, $3 seed
  sed -e "s/^seed: .*/seed: $3/" -e "s/count: 4/count: $1/" -e "s/^  steps: [0-9]*/  steps: $2/" \
      -e "s/^log_every: .*/log_every: 100/" -e "s/^device: .*/device: cpu/" configs/gpt-ring4.yaml
}
echo "| seed | steps | gossip 1 peer bpb | torch bpb | gossip / torch | 4 ring peers ($((STEPS / 4)) steps each) bpb | 4 peers / 1 peer |"
echo "|---|---|---|---|---|---|---|"
for seed in $(seq "$SEEDS"); do
  config 1 "$STEPS" "$seed" | sed '/^peers:/d; /^topology:/d; /^algorithm:/d' > "$OUT/one.yaml"
  echo "threads: 1" >> "$OUT/one.yaml"
  build/bin/gossip-peer --config "$OUT/one.yaml" > "$OUT/one.log" 2>&1 &
  G=$!
  /usr/bin/python3 bench/model_torch.py --model gpt --mode train --steps "$STEPS" --batch 32 --seed "$seed" \
    > "$OUT/torch.log" 2>&1
  wait $G
  config 4 $((STEPS / 4)) "$seed" > "$OUT/four.yaml"
  build/bin/gossip-launch "$OUT/four.yaml" > "$OUT/four.log" 2>&1
  g=$(grep -o 'test_bpb [0-9.]*' "$OUT/one.log" | head -1 | awk '{print $2}')
  t=$(grep -o 'bpb [0-9.]*' "$OUT/torch.log" | tail -1 | awk '{print $2}')
  f=$(grep -o 'averaged_model_test_bpb [0-9.]*' "$OUT/four.log" | head -1 | awk '{print $2}')
  echo "| $seed | $STEPS | $g | $t | $(awk -v a="$g" -v b="$t" 'BEGIN{printf "%.3f", a/b}') | $f |" \
       "$(awk -v a="$f" -v b="$g" 'BEGIN{printf "%.3f", a/b}') |"
done
