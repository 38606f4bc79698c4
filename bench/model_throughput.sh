#!/usr/bin/env bash
# Training throughput of gossip's CNNs (LeNet-style and the residual net, batch 64, SGD
# momentum) and GPT (4 layers, 4 heads, width 128, context 128, batch 32, AdamW) against the
# same models in PyTorch CPU (Debian python3-torch, /usr/bin/python3, bench/torch_models.py),
# one thread each, runs interleaved in ONE session; prints medians, the ratio and the spread
# of the per-pair ratios, and draws the ratios as bars (docs/bench/model_throughput.{md,svg}).
# Usage: bench/model_throughput.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "installing python3-torch"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null; }
bash scripts/setup.sh >/dev/null
BIN=build/bin/train_bench
source bench/lib.sh
bench_tee model_throughput
bars=$(mktemp)
echo "| model | batch | unit | gossip | torch | gossip / torch (median) | per-pair ratios min..max |"
echo "|---|---|---|---|---|---|---|"
for cfg in "lenet 64 samples/s 60" "resnet 64 samples/s 20" "gpt 32 tokens/s 20"; do
  set -- $cfg
  g=(); t=(); r=()
  for _ in $(seq "$REPEATS"); do
    gv=$($BIN --model "$1" --batch "$2" --steps "$4" --threads 1 | awk '{print $NF}')
    tv=$(/usr/bin/python3 bench/model_torch.py --model "$1" --batch "$2" --steps "$4" --threads 1 | awk '{print $NF}')
    g+=("$gv"); t+=("$tv"); r+=("$(awk -v a="$gv" -v b="$tv" 'BEGIN{printf "%.3f", a/b}')")
  done
  gm=$(printf '%s\n' "${g[@]}" | median); tm=$(printf '%s\n' "${t[@]}" | median)
  lo=$(printf '%s\n' "${r[@]}" | sort -n | head -1); hi=$(printf '%s\n' "${r[@]}" | sort -n | tail -1)
  ratio=$(awk -v a="$gm" -v b="$tm" 'BEGIN{printf "%.2f", a/b}')
  echo "| $1 | $2 | $3 | $gm | $tm | $ratio | $lo..$hi |"
  echo "${1}_(batch_$2,_$3) $ratio $lo $hi" >> "$bars"
done
echo
machine_line
python3 bench/plot.py bars "$bars" "gossip ÷ PyTorch CPU throughput, one thread (median, whiskers: per-pair min..max)" \
  "CNN and GPT training throughput against PyTorch ($REPEATS pairs of runs)" 1 > "$BENCH_OUT/model_throughput.svg"
rm -f "$bars"
