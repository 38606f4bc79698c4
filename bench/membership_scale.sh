#!/usr/bin/env bash
# The failure detector at size: for each N (default 8 32 64) runs N peers of the MLP on
# Fashion-MNIST (one-peer exponential + global average every 6, device cpu) on this machine and
# prints the heartbeats each peer sent per second (mean, min, max of the peers' final lines);
# then runs the largest N again, kills one peer with SIGKILL once it trains, and prints how long
# until the first "suspected dead" line and until every survivor has changed its view.
#   bench/membership_scale.sh [N...]     (WATCHERS=k sets algorithm.watchers, default 3;
#   PROBES=k algorithm.indirect_probes, default 3; KILLS=r repeats the kill run r times; RATES=0
#   skips the heartbeat runs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
sizes=("${@:-8 32 64}"); [ $# -gt 0 ] || sizes=(8 32 64)
watchers=${WATCHERS:-3}
probes=${PROBES:-3}
work=$(mktemp -d); trap 'pkill -KILL -f "gossip-peer --config $work/" 2>/dev/null || true; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
stamp() { python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="", flush=True)'; }
config() {  # N EPOCHS
  cat > "$work/run$1.yaml" <<YAML
seed: 1
device: cpu
log_every: 10
peers: {count: $1, host: 127.0.0.1, base_port: 0}
topology: one_peer_exponential
algorithm: {kind: gossip, global_average_every: 6, watchers: $watchers, indirect_probes: $probes, dead_after_s: 3}
model: {hidden: [256, 256]}
data: {dataset: fashion-mnist, sharding: iid}
optimizer: {lr: 0.05, momentum: 0.9, batch: 64, epochs: $2, schedule: {kind: cosine, warmup_steps: 10}}
YAML
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; watchers $watchers, indirect_probes $probes, heartbeat_s 0.25, dead_after_s 3"
printf '| %5s | %22s | %8s | %8s | %s |\n' peers "heartbeats/s per peer" min max "outcome"
printf '|%s|%s|%s|%s|%s|\n' ------- ------------------------ ---------- ---------- ---------
last=${sizes[${#sizes[@]}-1]}
# run N KILL: one run of N peers (KILL=1: SIGKILL of peer N/3 once the run trains); sets $log.
run() {
  config "$1" 3
  log=$work/run$1-$2.log
  "$build/bin/gossip-launch" "$work/run$1.yaml" 2>&1 | stamp >"$log" &
  local launch=$!
  if [ "$2" = 1 ]; then
    until grep -q "] step 20/" "$log"; do sleep 0.2; done
    victim=$(($1 / 3))
    kill_at=$(python3 -c 'import time; print(f"{time.time():.3f}")')
    pkill -KILL -f "gossip-peer --config $work/run$1.yaml --rank $victim " || true
  fi
  wait "$launch" || true
}
for n in "${sizes[@]}"; do
  [ "${RATES:-1}" = 0 ] && break
  run "$n" 0
  stats=$(grep -o "heartbeats_per_s [0-9.]*" "$log" | awk '{print $2}' |
          awk 'NR == 1 {mn = $1; mx = $1} {s += $1; if ($1 < mn) mn = $1; if ($1 > mx) mx = $1}
               END {printf "%.2f %.2f %.2f", s / NR, mn, mx}')
  read -r mean mn mx <<<"$stats"
  printf '| %5d | %22s | %8s | %8s | %s |\n' "$n" "$mean" "$mn" "$mx" \
    "$(grep -o '[0-9]* of [0-9]* peers succeeded, [0-9]* distinct final model' "$log" | head -1)"
done
for ((k = 0; k < ${KILLS:-1}; k++)); do
  run "$last" 1
  suspect=$(grep -m1 "suspected dead" "$log" | cut -d' ' -f1)
  changed=$(grep "view change to epoch 1:" "$log" | cut -d' ' -f1 | sort -n | tail -1)
  count=$(grep -c "view change to epoch 1:" "$log" || true)
  echo "kill -9 of peer $victim of $last: first suspicion after $(echo "$suspect - $kill_at" | bc) s," \
       "all $count survivors in the new view after $(echo "$changed - $kill_at" | bc) s (dead_after_s 3);" \
       "$(grep -o '[0-9]* of [0-9]* peers succeeded, [0-9]* distinct final model' "$log" | head -1)"
  grep "gone: $victim," "$log" | grep -o "agreed in [0-9]* ms" | awk '{print $3}' | sort -n |
    awk '{a[NR] = $1} END {printf "agreement: %d..%d ms (median %d)\n", a[1], a[NR], a[int((NR + 1) / 2)]}'
  [ -z "${KEEP:-}" ] || cp "$log" "$work/kill$k.log"
done
