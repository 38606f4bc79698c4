#!/usr/bin/env bash
# Training-quality runs that take hours on this project's 2-core VMs and minutes on a GPU, all
# started at once (one process per run; each peer owns its device context):
#   resnet  the residual net, one peer, Fashion-MNIST, 3 epochs, in several widths, depths and
#           learning rates (test accuracy; the issue's target is 0.92);
#   gpt     configs/gpt-ring4.yaml's GPT: one peer STEPS steps against 4 ring-gossip peers STEPS/4
#           steps each (the same total samples), validation bits per byte of the averaged model.
# Usage: bench/train_sweep.sh [resnet] [gpt]     (both when none is named)
# Environment: BIN (default build/bin), DEVICE (default auto), FMNIST (default Debian's
# /usr/share/datasets/fashion-mnist), TEXT (default Debian's /usr/share/games/fortunes), STEPS
# (default 3200), LOGS (a folder to keep the logs in; default a temporary one), LIMIT_TRAIN
# (training rows for the resnet runs; 0, the default, for all 60000: a smaller number only to try
# the script), TIME_LIMIT (seconds after which unfinished runs are stopped; 0, the default, for none).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
DEVICE=${DEVICE:-auto}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
TEXT=${TEXT:-/usr/share/games/fortunes}
STEPS=${STEPS:-3200}
what=("$@")
(( ${#what[@]} )) || what=(resnet gpt)
if [[ -n ${LOGS:-} ]]; then mkdir -p "$LOGS"; else LOGS=$(mktemp -d); trap 'rm -rf "$LOGS"' EXIT; fi
run() { timeout "${TIME_LIMIT:-0}" "$@"; }
field() { grep -o "$2 [0-9.]*" "$1" | tail -1 | awk '{print $2}' || true; }

# width blocks lr batch: the first is configs/cnn-single.yaml's resnet line with lr 0.05.
variants=("32 1 0.05 32" "32 2 0.05 32" "48 1 0.05 32" "48 2 0.05 32" "64 1 0.05 32" "64 2 0.05 32"
          "32 2 0.1 64" "64 2 0.1 64" "64 2 0.2 128")
resnet_yaml() {  # $1 width, $2 blocks, $3 lr, $4 batch
  cat <<YAML
seed: 1
device: $DEVICE
log_every: 1000
model: {kind: cnn, net: resnet, width: $1, groups: 8, blocks: $2}
data: {dataset: fashion-mnist, dir: $FMNIST, limit_train: ${LIMIT_TRAIN:-0}}
optimizer: {lr: $3, momentum: 0.9, weight_decay: 0.0005, batch: $4, epochs: 3, schedule: {kind: cosine, warmup_steps: 100}}
YAML
}
gpt_yaml() {  # $1 peers, $2 steps
  sed -e "s/count: 4/count: $1/" -e "s/^  steps: [0-9]*/  steps: $2/" -e "s/^device: .*/device: $DEVICE/" \
      -e "s|^data: .*|data: {dataset: text, dir: $TEXT}|" -e "s/^log_every: .*/log_every: 200/" configs/gpt-ring4.yaml
}

pids=()
if [[ " ${what[*]} " == *" resnet "* ]]; then
  for v in "${variants[@]}"; do
    set -- $v
    resnet_yaml "$@" > "$LOGS/resnet-$1-$2-$3-$4.yaml"
    run "$BIN/gossip-peer" --config "$LOGS/resnet-$1-$2-$3-$4.yaml" > "$LOGS/resnet-$1-$2-$3-$4.log" 2>&1 &
    pids+=($!)
  done
fi
if [[ " ${what[*]} " == *" gpt "* ]]; then
  gpt_yaml 1 "$STEPS" | sed '/^peers:/d; /^topology:/d; /^algorithm:/d' > "$LOGS/gpt-one.yaml"
  gpt_yaml 4 $((STEPS / 4)) > "$LOGS/gpt-four.yaml"
  run "$BIN/gossip-peer" --config "$LOGS/gpt-one.yaml" > "$LOGS/gpt-one.log" 2>&1 &
  pids+=($!)
  run "$BIN/gossip-launch" "$LOGS/gpt-four.yaml" > "$LOGS/gpt-four.log" 2>&1 &
  pids+=($!)
fi
t0=$SECONDS
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
echo "all runs ended after $((SECONDS - t0)) s"

if [[ " ${what[*]} " == *" resnet "* ]]; then
  echo "| resnet width | blocks | lr | batch | parameters | test accuracy | samples/s |"
  echo "|---|---|---|---|---|---|---|"
  for v in "${variants[@]}"; do
    set -- $v
    log=$LOGS/resnet-$1-$2-$3-$4.log
    params=$(grep -o '[0-9]* parameters' "$log" | head -1 | awk '{print $1}' || true)
    echo "| $1 | $2 | $3 | $4 | $params | $(field "$log" test_acc) | $(field "$log" samples/s) |"
  done
fi
if [[ " ${what[*]} " == *" gpt "* ]]; then
  one=$(field "$LOGS/gpt-one.log" test_bpb)
  four=$(field "$LOGS/gpt-four.log" averaged_model_test_bpb)
  echo "| GPT | steps per peer | validation bits/byte |"
  echo "|---|---|---|"
  echo "| 1 peer | $STEPS | $one |"
  echo "| 4 ring peers, averaged | $((STEPS / 4)) | $four |"
  awk -v a="$four" -v b="$one" 'BEGIN { if (a > 0 && b > 0) printf "4 peers / 1 peer: %.3f\n", a / b }'
fi
exit $failed
