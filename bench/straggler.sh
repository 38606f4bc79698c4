#!/usr/bin/env bash
# Benchmark 4: one of 8 peers slowed 3x. Total samples/s of the 8 peers (each peer's own timing of
# its training loop, summed) for push-sum with overlap and for all-reduce, with and without the
# straggler; medians of REPEATS interleaved runs.
# 8 peers share this machine's cores, so every peer's step is stretched to BASE times its compute
# (gossip-peer --slowdown BASE: the extra time is spent asleep): the peers then need only ~1/BASE
# of a core each, and a straggler (--slowdown BASE*SLOW) does not hand its core to the others,
# as it would if the peers were CPU-bound (a sleeping straggler speeds up everyone else).
# Usage: bench/straggler.sh [repeats] [slowdown] [base]   (defaults 3 3 8; target: push-sum keeps
# >= 0.8 of its no-straggler throughput)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
SLOW=${2:-3}
BASE=${3:-8}
bash scripts/setup.sh >/dev/null
dir=$(mktemp -d)
trap 'pkill -f "gossip-peer --config $dir/" 2>/dev/null || true; rm -rf "$dir"' EXIT
source bench/lib.sh
yaml() {  # $1 = name, $2 = algorithm, $3 = topology
  cat > "$dir/$1.yaml" <<YAML
seed: 1
device: cpu
threads: 1
log_every: 100000
peers: {count: 8, host: 127.0.0.1, base_port: 0}
topology: $3
algorithm: $2
model: {hidden: [256, 256]}
data: {dataset: fashion-mnist, limit_train: 51200}
optimizer: {lr: 0.02, momentum: 0.9, batch: 64, epochs: 1}
YAML
}
yaml pushsum '{kind: push_sum, overlap: true, max_staleness: 2}' push_sum_one_peer_exponential
yaml async '{kind: push_sum, overlap: true, max_staleness: unbounded}' push_sum_one_peer_exponential
yaml allreduce allreduce ring
# Starts the 8 peers (rank 3 slowed by $2) and prints the sum of their samples/s.
run() {
  local y="$dir/$1.yaml" rv="$dir/rv-$RANDOM"
  mkdir -p "$rv"
  for r in $(seq 0 7); do
    factor=$BASE; [[ $r == 3 ]] && factor=$(awk -v b="$BASE" -v s="$2" 'BEGIN{print b * s}')
    build/bin/gossip-peer --config "$y" --rank "$r" --rendezvous "$rv" --slowdown "$factor" > "$dir/log-$r" 2>&1 &
  done
  wait
  cat "$dir"/log-* | awk '/final:/ {for (i=1;i<NF;i++) if ($i=="samples/s") s+=$(i+1)} END {print s}'
}
declare -A res=()
for _ in $(seq "$REPEATS"); do
  for a in pushsum async allreduce; do
    res[$a-1]+="$(run $a 1) "
    res[$a-$SLOW]+="$(run $a "$SLOW") "
  done
done
m() { printf '%s\n' ${res[$1]} | median; }
echo "8 peers, 784-256-256-10, batch 64, every step stretched to ${BASE}x its compute; medians of $REPEATS runs"
echo
echo "| algorithm | total samples/s | with one peer ${SLOW}x slower | kept |"
echo "|---|---|---|---|"
for a in pushsum async allreduce; do
  case $a in
    pushsum) label="push-sum, overlap, staleness 2" ;;
    async) label="push-sum, overlap, staleness unbounded (asynchronous)" ;;
    allreduce) label="all-reduce every step" ;;
  esac
  echo "| $label | $(m $a-1) | $(m $a-$SLOW) | $(awk -v a="$(m $a-$SLOW)" -v b="$(m $a-1)" 'BEGIN{printf "%.2f", a/b}') |"
done
