#!/usr/bin/env bash
# CHOCO-SGD against uncompressed gossip: configs/choco8.yaml (8 peers, LeNet-style CNN,
# Fashion-MNIST, ring, 3 epochs) with every compressor, and the same YAML with `algorithm:
# gossip` (the whole model to both neighbours every step). No progress lines (their consensus
# measurement is itself an all-reduce), so the bytes are the algorithm's plus the final average.
# Prints each run's averaged-model test accuracy, its difference to gossip's, bytes sent per peer,
# gossip's bytes over these and wall time, and draws accuracy against bytes (log scale) into
# docs/bench/choco.svg (shown in docs/benchmarks.md).
# Usage: bench/choco.sh [seed]   (RUNS="top_k,0.01,0.05 sign,,0.5 top_k,0.01,0.2,100": the
# compressors, ratios, consensus steps and, optionally, an exact global average every H steps;
# GOSSIP="acc MB s": take gossip's row from an earlier run instead of running it)
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${1:-1}
RUNS=${RUNS:-"top_k,0.01,0.05 top_k,0.01,0.2 top_k,0.01,0.2,100 random_k,0.01,0.02 sign,,0.5 int8,,0.5"}
bash scripts/setup.sh >/dev/null
source bench/lib.sh
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir -p docs/bench
run() {  # $1 name, $2 algorithm; prints "accuracy sent_MB wall_s"
  sed -e "s/^algorithm: .*/algorithm: $2/" -e 's/^device: .*/device: cpu/' -e 's/^log_every: .*/log_every: 1000000/' \
      -e "s/^seed: .*/seed: $SEED/" configs/choco8.yaml > "$OUT/$1.yaml"
  local t0=$SECONDS
  build/bin/gossip-launch "$OUT/$1.yaml" > "$OUT/$1.log" 2>&1 || { tail -n 20 "$OUT/$1.log" >&2; echo "- - -"; return; }
  local acc mb
  acc=$(grep -o 'averaged_model_test_acc [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  mb=$(grep 'final:' "$OUT/$1.log" | grep -o 'sent_MB [0-9.]*' | awk '{s += $2} END {printf "%.1f", s / NR}')
  echo "$acc $mb $((SECONDS - t0))"
}
{
  echo "| algorithm (8 peers, ring, seed $SEED) | consensus step | averaged acc | vs gossip (points) | MB sent/peer | gossip's bytes / these | wall s |"
  echo "|---|---|---|---|---|---|---|"
  if [[ ${GOSSIP:-run} == run ]]; then read -r ga gm gw <<< "$(run gossip "{kind: gossip}")"; else read -r ga gm gw <<< "$GOSSIP"; fi
  echo "| gossip (f32, uncompressed) | — | $ga | — | $gm | 1 | $gw |"
  echo "gossip $ga $gm" > "$OUT/points"
  for r in $RUNS; do
    IFS=, read -r kind ratio step pga <<< "$r"
    extra=${ratio:+, ratio: $ratio}${pga:+, global_average_every: $pga}
    name="CHOCO ${kind//_/-}${ratio:+ $ratio}${pga:+ + global average every $pga}"
    read -r a m w <<< "$(run "choco-$kind" "{kind: choco, compressor: $kind$extra, consensus_step: $step}")"
    echo "| $name | $step | $a | $(awk -v x="$a" -v y="$ga" 'BEGIN{printf "%+.2f", 100 * (x - y)}') | $m | $(awk -v x="$gm" -v y="$m" 'BEGIN{printf "%.1f", x / y}') | $w |"
    echo "${name// /_}_γ$step $a $m" | sed 's/_+_global_average_every_/+PGA/' >> "$OUT/points"
  done
  echo
  machine_line
}
python3 bench/plot.py points "$OUT/points" "MB sent per peer (log)" "averaged-model test accuracy" \
  "CHOCO-SGD: accuracy against bytes (8 LeNet peers, ring, 3 epochs)" > "$BENCH_OUT/choco.svg"
echo "wrote $BENCH_OUT/choco.svg"
