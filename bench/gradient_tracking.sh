#!/usr/bin/env bash
# Gradient tracking and quasi-global momentum on non-iid shards: configs/ring8-tracking.yaml (8
# peers, ring, Dirichlet(0.1) shards of Fashion-MNIST, MLP 784-256-256-10, 3 epochs) against the
# same YAML with plain gossip and with all-reduce every step. Prints, per run, the mean of the
# peers' own test accuracies, the averaged model's, bytes sent per peer and wall time, and which
# share of the gap between plain gossip and all-reduce each remedy closes (own models and
# averaged model).
# Usage: bench/gradient_tracking.sh [seed]   (QGM=0: only gossip, tracking and all-reduce)
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${1:-1}
bash scripts/setup.sh >/dev/null
source bench/lib.sh
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # $1 name, $2 algorithm, $3 optimizer fields to add; prints "own_mean averaged sent_MB wall_s"
  sed -e "s/^algorithm: .*/algorithm: $2/" -e 's/^device: .*/device: cpu/' -e "s/^seed: .*/seed: $SEED/" \
      -e "s/^optimizer: {/optimizer: {${3:-}/" configs/ring8-tracking.yaml > "$OUT/$1.yaml"
  local t0=$SECONDS
  build/bin/gossip-launch "$OUT/$1.yaml" > "$OUT/$1.log" 2>&1 || { tail -n 20 "$OUT/$1.log" >&2; echo "- - - -"; return; }
  local own avg mb
  own=$(grep -o 'final: peer [0-9]* test_acc [0-9.]*' "$OUT/$1.log" | awk '{s += $5} END {printf "%.4f", s / NR}')
  avg=$(grep -o 'averaged_model_test_acc [0-9.]*' "$OUT/$1.log" | head -1 | awk '{print $2}')
  mb=$(grep 'final:' "$OUT/$1.log" | grep -o 'sent_MB [0-9.]*' | awk '{s += $2} END {printf "%.1f", s / NR}')
  echo "$own $avg $mb $((SECONDS - t0))"
}
QGM="quasi_global_momentum: true, "
read -r go ga gm gw <<< "$(run gossip "{kind: gossip}")"
read -r to ta tm tw <<< "$(run tracking "{kind: gossip, gradient_tracking: true}")"
if [[ ${QGM:-1} != 0 ]]; then
  read -r qo qa qm qw <<< "$(run qgm "{kind: gossip}" "$QGM")"
  read -r bo ba bm bw <<< "$(run both "{kind: gossip, gradient_tracking: true}" "$QGM")"
fi
read -r ao aa am aw <<< "$(run allreduce "{kind: allreduce}")"
closed() { awk -v g="$1" -v t="$2" -v a="$3" 'BEGIN{ if (a == g) print "—"; else printf "%.0f %%", 100 * (t - g) / (a - g) }'; }
echo "| 8 peers, ring, Dirichlet(0.1), seed $SEED | own models' mean acc | averaged model acc | MB sent/peer | wall s | gap closed (own / averaged) |"
echo "|---|---|---|---|---|---|"
echo "| gossip | $go | $ga | $gm | $gw | |"
echo "| gossip + gradient tracking | $to | $ta | $tm | $tw | $(closed "$go" "$to" "$ao") / $(closed "$ga" "$ta" "$aa") |"
if [[ ${QGM:-1} != 0 ]]; then
  echo "| gossip + quasi-global momentum | $qo | $qa | $qm | $qw | $(closed "$go" "$qo" "$ao") / $(closed "$ga" "$qa" "$aa") |"
  echo "| gossip + tracking + quasi-global momentum | $bo | $ba | $bm | $bw | $(closed "$go" "$bo" "$ao") / $(closed "$ga" "$ba" "$aa") |"
fi
echo "| all-reduce every step | $ao | $aa | $am | $aw | |"
echo
machine_line
