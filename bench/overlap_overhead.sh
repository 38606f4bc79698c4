#!/usr/bin/env bash
# Benchmark 3: step-time overhead of communication, overlap on vs off. Two peers on this host (one
# core each, 784-1024-1024-10, batch 64, Fashion-MNIST), each run once without communication
# (algorithm none), once with push-sum and overlap on, once with overlap off, and once with ring
# gossip; medians of REPEATS runs, interleaved. Step time ratio = samples/s without / with.
# Usage: bench/overlap_overhead.sh [repeats] [hidden] [batch]   (target: overlap on <= 1.15x when
# the exchange takes less time than a step's computation: raise the batch until it does)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
HIDDEN=${2:-1024}
BATCH=${3:-512}
bash scripts/setup.sh >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source bench/lib.sh
yaml() {  # $1 = algorithm line, $2 = topology
  cat > "$dir/run.yaml" <<YAML
seed: 1
device: cpu
threads: 1
log_every: 100000
peers: {count: 2, host: 127.0.0.1, base_port: 0}
topology: $2
algorithm: $1
model: {hidden: [$HIDDEN, $HIDDEN]}
data: {dataset: fashion-mnist, limit_train: 51200}
optimizer: {lr: 0.01, momentum: 0.9, batch: $BATCH, epochs: 1}
YAML
}
# Mean samples/s over the peers (their own timing of the training loop).
run() { yaml "$1" "$2"; build/bin/gossip-launch "$dir/run.yaml" | awk '/final:/ {for (i=1;i<NF;i++) if ($i=="samples/s") {s+=$(i+1); n++}} END {print s/n}'; }
declare -A res=()
for _ in $(seq "$REPEATS"); do
  res[none]+="$(run none ring) "
  res[on]+="$(run '{kind: push_sum, overlap: true}' push_sum_one_peer_exponential) "
  res[off]+="$(run '{kind: push_sum, overlap: false}' push_sum_one_peer_exponential) "
  res[ring]+="$(run gossip ring) "
done
m() { printf '%s\n' ${res[$1]} | median; }
none=$(m none)
echo "| 2 peers, 784-$HIDDEN-$HIDDEN-10, batch $BATCH | samples/s per peer | step time / no communication |"
echo "|---|---|---|"
for k in none on off ring; do
  case $k in
    none) label="no communication" ;;
    on) label="push-sum, overlap on" ;;
    off) label="push-sum, overlap off" ;;
    ring) label="gossip ring (no overlap)" ;;
  esac
  echo "| $label | $(m $k) | $(awk -v a="$none" -v b="$(m $k)" 'BEGIN{printf "%.2f", a/b}') |"
done
