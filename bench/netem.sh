#!/usr/bin/env bash
# Benchmark 5: 8 peers on an emulated network. Each peer runs in its own network namespace with a
# veth into one bridge; its egress is shaped with `tc netem delay DELAY rate RATE` (so DELAY one
# way between any two peers, RATE out of each). Everything is built and torn down by this script
# (root only). Where the kernel has no sch_netem the link is shaped by `tbf` to RATE and no delay
# is added; the table says which.
# Reports, per algorithm, the time to TARGET test accuracy on Fashion-MNIST: the first eval_every
# point at which the mean of the 8 peers' own models' test accuracies reaches TARGET, timed as the
# slowest peer's training time at that step (evaluation time excluded); medians of REPEATS
# interleaved runs. Draws each algorithm's curve of its last run — mean test accuracy against the
# slowest peer's training time — into docs/bench/netem.svg (table: docs/bench/netem.md).
# The namespaces and shaping: bench/netns.sh.
# Usage: sudo bench/netem.sh [repeats] [rate] [delay] [target]   (defaults: 3 1gbit 5ms 0.85)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
RATE=${2:-1gbit}
DELAY=${3:-5ms}
TARGET=${4:-0.85}
N=8
source bench/netns.sh
netns_start netem "$N" "$RATE" "$DELAY"
dir=$NETNS_DIR
link=$NETNS_LINK

yaml() {  # $1 = name, $2 = topology, $3 = algorithm
  {
    cat <<YAML
seed: 1
device: cpu
threads: 1
log_every: 100000
eval_every: 40
topology: $2
algorithm: $3
model: {hidden: [256, 256]}
data: {dataset: fashion-mnist}
optimizer: {lr: 0.05, momentum: 0.9, batch: 64, epochs: 3}
YAML
    netns_peers "$N" 29500
  } > "$dir/$1.yaml"
}
yaml allreduce ring allreduce
yaml ring-pga ring '{kind: gossip, global_average_every: 6}'
yaml onepeer-pga one_peer_exponential '{kind: gossip, global_average_every: 6}'
yaml onepeer-pga-bf16 one_peer_exponential '{kind: gossip, global_average_every: 6, wire: bf16}'
ALGOS=(allreduce ring-pga onepeer-pga onepeer-pga-bf16)

# One run of $1: prints "seconds-to-target steps-to-target final-averaged-accuracy samples/s"
# ("nan nan ..." when TARGET is never reached).
run() {
  netns_run "$dir/$1.yaml" "$N" "$dir/log-"
  # The curve: per eval step every peer reported, "step slowest-train_s mean-test_acc".
  cat "$dir"/log-* | awk -v n="$N" '
    /eval step/ { for (i = 1; i < NF; i++) { if ($i == "step") s = $(i+1); if ($i == "test_acc") a = $(i+1);
                                             if ($i == "train_s") t = $(i+1) }
                  acc[s] += a; cnt[s]++; if (t > tmax[s]) tmax[s] = t }
    END { for (s in acc) if (cnt[s] == n) printf "%s %s %.4f\n", s, tmax[s], acc[s] / n }' | sort -n > "$dir/curve-$1"
  local fin sps
  read -r fin sps <<< "$(cat "$dir"/log-* | awk '
    /final:/ { for (i = 1; i < NF; i++) { if ($i == "averaged_model_test_acc") fin = $(i+1); if ($i == "samples/s") sps += $(i+1) } }
    END { printf "%s %.0f", fin, sps }')"
  awk -v target="$TARGET" -v fin="$fin" -v sps="$sps" '
    $3 >= target { printf "%s %s %s %s\n", $2, $1, fin, sps; found = 1; exit }
    END { if (!found) printf "nan nan %s %s\n", fin, sps }' "$dir/curve-$1"
}

declare -A secs=() steps=() final=() rate=()
for _ in $(seq "$REPEATS"); do
  for a in "${ALGOS[@]}"; do
    run "$a" > "$dir/result"
    read -r s k f r < "$dir/result"
    secs[$a]+="$s "; steps[$a]+="$k "; final[$a]+="$f "; rate[$a]+="$r "
  done
done
m() { printf '%s\n' $1 | median; }
base=$(m "${secs[allreduce]}")
label() {
  case $1 in
    allreduce) echo "all-reduce every step (ring reduce-scatter + all-gather)" ;;
    ring-pga) echo "ring gossip + global average every 6 (Gossip-PGA)" ;;
    onepeer-pga) echo "one-peer exponential gossip + global average every 6" ;;
    onepeer-pga-bf16) echo "the same with bf16 gossip values (wire: bf16; the averages stay f32)" ;;
  esac
}
echo "8 peers, each in its own namespace; link: $link; Fashion-MNIST, 784-256-256-10, batch 64, 3 epochs;"
echo "medians of $REPEATS runs"
echo
echo "| algorithm | steps to $TARGET | time to $TARGET (s) | vs all-reduce | total samples/s | final averaged test acc |"
echo "|---|---|---|---|---|---|"
for a in "${ALGOS[@]}"; do
  t=$(m "${secs[$a]}")
  echo "| $(label "$a") | $(m "${steps[$a]}") | $t | $(awk -v a="$t" -v b="$base" 'BEGIN{printf "%.2f", a/b}') |" \
       "$(m "${rate[$a]}") | $(m "${final[$a]}") |"
done
echo
machine_line
declare -A legend=([allreduce]=all-reduce [ring-pga]=ring_+_PGA_6 [onepeer-pga]=one-peer_exp_+_PGA_6
                   [onepeer-pga-bf16]=one-peer_exp_+_PGA_6,_bf16)
for a in "${ALGOS[@]}"; do awk -v name="${legend[$a]}" '{print name, $2, $3}' "$dir/curve-$a"; done > "$dir/curves"
python3 bench/plot.py lines "$dir/curves" "seconds of training (slowest peer, evaluations excluded)" \
  "mean test accuracy of the 8 peers' own models" "8 peers, $link: time to accuracy (last of $REPEATS runs)" \
  > "$BENCH_OUT/netem.svg"
