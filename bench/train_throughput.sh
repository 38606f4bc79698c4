#!/usr/bin/env bash
# Benchmark 1: local training throughput of gossip vs PyTorch CPU (Debian python3-torch, run with
# /usr/bin/python3), same model, batch and thread count, alternating runs in ONE session; prints a
# markdown table of medians, the ratio and the spread of the per-pair ratios, and draws the
# ratios as bars (docs/bench/train_throughput.{md,svg}). Usage: bench/train_throughput.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "installing python3-torch"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null; }
bash scripts/setup.sh >/dev/null
BIN=build/bin/train_bench
source bench/lib.sh
bench_tee train_throughput
bars=$(mktemp)
echo "| model | batch | threads | gossip samples/s | torch samples/s | gossip / torch | per-pair ratios min..max |"
echo "|---|---|---|---|---|---|---|"
for cfg in "784,256,256,10 64 1" "784,1024,1024,10 64 1" "784,256,256,10 64 2"; do
  set -- $cfg
  g=(); t=()
  for _ in $(seq "$REPEATS"); do
    g+=("$($BIN --dims "$1" --batch "$2" --threads "$3" | awk '{print $NF}')")
    t+=("$(/usr/bin/python3 bench/train_torch.py --dims "$1" --batch "$2" --threads "$3" | awk '{print $NF}')")
  done
  gm=$(printf '%s\n' "${g[@]}" | median); tm=$(printf '%s\n' "${t[@]}" | median)
  read -r lo hi <<< "$(ratio_spread "${g[*]}" "${t[*]}")"
  ratio=$(awk -v a="$gm" -v b="$tm" 'BEGIN{printf "%.2f", a/b}')
  echo "| $1 | $2 | $3 | $gm | $tm | $ratio | $lo..$hi |"
  echo "MLP_${1//,/-}_batch_${2}_${3}_thread(s) $ratio $lo $hi" >> "$bars"
done
echo
machine_line
python3 bench/plot.py bars "$bars" "gossip samples/s ÷ PyTorch CPU samples/s (median, whiskers: per-pair min..max)" \
  "Local training throughput against PyTorch ($REPEATS pairs of runs)" 1 > "$BENCH_OUT/train_throughput.svg"
rm -f "$bars"
