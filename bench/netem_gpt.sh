#!/usr/bin/env bash
# Benchmark: decentralized DiLoCo against all-reduce every step on an emulated network — the
# 8 peers of configs/gpt-diloco8.yaml (byte-level GPT on the fortunes text, AdamW inside), each in
# its own network namespace with its egress shaped to RATE (bench/netns.sh; DELAY one way where
# the kernel has sch_netem). Every peer evaluates its model on the validation text every 50 steps
# (DiLoCo's outer steps, so both algorithms' peers then hold one model) and at the end.
# Quality: within 2 % of all-reduce's final validation bits per byte (of its averaged model,
# median over the repeats). Time to quality: the slowest peer's training time (evaluations
# excluded) at the first evaluation whose mean bits per byte over the 8 peers reaches it.
# REPEATS interleaved runs per algorithm, each printed as it ends; the table gives medians and,
# for the ratio to all-reduce, the spread over the repeats (run i of both side by side).
# Curves of the last repeat: docs/bench/netem_gpt.svg (table: docs/bench/netem_gpt.md).
# Usage: sudo bench/netem_gpt.sh [repeats] [rate] [delay] [steps]   (defaults: 2 1gbit 5ms 400)
set -euo pipefail
cd "$(dirname "$0")/.."
N=8
EVERY=50  # evaluations: every outer step of gpt-diloco8.yaml's DiLoCo (inner_steps: 50)
REPEATS=${1:-2}
RATE=${2:-1gbit}
DELAY=${3:-5ms}
STEPS=${4:-400}
source bench/netns.sh
netns_start netem_gpt "$N" "$RATE" "$DELAY"
dir=$NETNS_DIR

diloco=$(sed -n 's/^algorithm: {\(.*\)}$/\1/p' configs/gpt-diloco8.yaml)
yaml() {  # $1 = name, $2 = algorithm
  { sed -e "s/^algorithm: .*/algorithm: $2/" -e 's/^device: .*/device: cpu/' -e "s/^log_every: .*/log_every: $STEPS/" \
        -e "s/^  steps: .*/  steps: $STEPS/" -e '/^peers:/d' configs/gpt-diloco8.yaml
    echo "eval_every: $EVERY"
    netns_peers "$N" 29500
  } > "$dir/$1.yaml"
}
# A slow peer is not a dead one here: 8 peers share the cores.
yaml allreduce "{kind: allreduce, timeout_s: 300}"
yaml diloco "{$diloco, timeout_s: 300}"
ALGOS=(allreduce diloco)

# One run of $1: writes its curve ("step slowest-train_s mean-bpb", the final point included) to
# $dir/curve-$1-$2 and prints "final-averaged-bpb MB-sent-per-peer tokens/s".
run() {
  netns_run "$dir/$1.yaml" "$N" "$dir/log-"
  cat "$dir"/log-* | awk -v n="$N" -v last="$STEPS" -v sorted="sort -n > $dir/curve-$1-$2" '
    function field(name,   i) { for (i = 1; i < NF; i++) if ($i == name) return $(i+1); return "" }
    /eval step/ { s = field("step") }
    /final:/ { s = last; fin = field("averaged_model_test_bpb"); mb += field("sent_MB"); tps += field("tokens/s"); k++ }
    /eval step|final:/ { b[s] += field("test_bpb"); cnt[s]++; t = field("train_s"); if (t > tmax[s]) tmax[s] = t }
    END { for (s in b) if (cnt[s] == n) printf "%s %s %.4f\n", s, tmax[s], b[s] / n | sorted
          close(sorted); printf "%s %.1f %.0f\n", fin, mb / k, tps }'
}

declare -A final=() sent=() rate=()
for r in $(seq "$REPEATS"); do
  for a in "${ALGOS[@]}"; do
    read -r f m t <<< "$(run "$a" "$r")"
    final[$a]+="$f "; sent[$a]+="$m "; rate[$a]+="$t "
    echo "run $r $a: final averaged bpb $f, $m MB sent per peer, $t tokens/s; curve (step train_s bpb):" \
         $(tr '\n' ';' < "$dir/curve-$a-$r")
  done
done
m() { printf '%s\n' $1 | median; }
target=$(awk -v b="$(m "${final[allreduce]}")" 'BEGIN{printf "%.4f", 1.02 * b}')
reach() {  # $1 curve file: "step seconds" of the first point at or below the target, or "nan nan"
  awk -v t="$target" '$3 <= t { print $1, $2; found = 1; exit } END { if (!found) print "nan nan" }' "$1"
}
declare -A secs=() steps=()
for a in "${ALGOS[@]}"; do
  for r in $(seq "$REPEATS"); do read -r k s <<< "$(reach "$dir/curve-$a-$r")"; steps[$a]+="$k "; secs[$a]+="$s "; done
done
echo
echo "8 peers, each in its own namespace; link: $NETNS_LINK; GPT 4x128 on fortunes, AdamW, batch 32,"
echo "$STEPS steps; quality: validation bits/byte <= $target (1.02 x all-reduce's final); medians of $REPEATS runs"
echo
echo "| algorithm | steps to quality | time to quality (s) | vs all-reduce (spread) | final averaged bpb | MB sent/peer | total tokens/s |"
echo "|---|---|---|---|---|---|---|"
for a in "${ALGOS[@]}"; do
  label="all-reduce every step"
  [[ $a == diloco ]] && label="DiLoCo: ${diloco#kind: diloco, }"
  t=$(m "${secs[$a]}")
  echo "| $label | $(m "${steps[$a]}") | $t | $(awk -v x="$t" -v y="$(m "${secs[allreduce]}")" 'BEGIN{printf "%.2f", x / y}')" \
       "($(ratio_spread "${secs[$a]}" "${secs[allreduce]}" | tr ' ' -)) | $(m "${final[$a]}") | $(m "${sent[$a]}") | $(m "${rate[$a]}") |"
done
echo
machine_line
for a in "${ALGOS[@]}"; do awk -v name="$a" '{print name, $2, $3}' "$dir/curve-$a-$REPEATS"; done > "$dir/curves"
python3 bench/plot.py lines "$dir/curves" "seconds of training (slowest peer, evaluations excluded)" \
  "mean validation bits per byte of the 8 peers' models" "8 peers, GPT, $NETNS_LINK (last of $REPEATS runs)" \
  > "$BENCH_OUT/netem_gpt.svg"
