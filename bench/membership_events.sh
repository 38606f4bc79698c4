#!/usr/bin/env bash
# One view change with real processes: for each N (default 8 32 64) runs N peers of the MLP on
# Fashion-MNIST (one-peer exponential + global average every 6, device cpu, dead_after_s 3) on
# this machine three times, and at step 20 of each:
#   join   - a new gossip-peer --join asks peer 0;
#   crash  - SIGKILL of peer N/3;
#   stall  - SIGSTOP of the half of the peers without id 0 (ranks N/2..N-1) for 8 s: the other
#            half, a majority at exactly half, sees a 2-way partition and goes on; the stalled
#            half, woken, finds itself cut off and asks to be taken back.
# Prints, for the first view change after the event (epoch 1): how many members made it, the
# proposals each sent (mean, max, from its "view change to epoch 1" line), the longest agreement,
# and the seconds from the event until the last member had the new view (failure detection
# included), and how the run ended.
#   bench/membership_events.sh [N...]        (BASE_PORT, default 32000, must be free for N ports;
#                                            EVENTS="join crash stall" picks events; STALL_S=8)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
sizes=("$@"); [ $# -gt 0 ] || sizes=(8 32 64)
base=${BASE_PORT:-32000}
work=$(mktemp -d); trap 'pkill -KILL -f "gossip-peer --config $work/" 2>/dev/null || true; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
stamp() { python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="", flush=True)'; }
config() {  # N
  cat > "$work/run$1.yaml" <<YAML
seed: 1
device: cpu
log_every: 10
peers: {count: $1, host: 127.0.0.1, base_port: $base}
topology: one_peer_exponential
algorithm: {kind: gossip, global_average_every: 6, dead_after_s: 3}
model: {hidden: [256, 256]}
data: {dataset: fashion-mnist, sharding: iid}
optimizer: {lr: 0.05, momentum: 0.9, batch: 64, epochs: 3, schedule: {kind: cosine, warmup_steps: 10}}
YAML
}
pids_of_ranks() {  # N FIRST LAST: the peer processes of ranks FIRST..LAST
  for r in $(seq "$2" "$3"); do pgrep -f "gossip-peer --config $work/run$1.yaml --rank $r( |$)" || true; done
}
event() {  # N EVENT LOG
  case $2 in
    join) "$build/bin/gossip-peer" --config "$work/run$1.yaml" --join "tcp://127.0.0.1:$base" 2>&1 | stamp >>"$3" & ;;
    crash) kill -KILL $(pids_of_ranks "$1" $(($1 / 3)) $(($1 / 3))) ;;
    stall) local stalled; stalled=$(pids_of_ranks "$1" $(($1 / 2)) $(($1 - 1)))
           kill -STOP $stalled; (sleep "${STALL_S:-8}"; kill -CONT $stalled) & ;;
  esac
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; watchers 3, heartbeat_s 0.25, dead_after_s 3"
printf '| %5s | %-5s | %9s | %15s | %5s | %11s | %12s | %s |\n' peers event "in epoch 1" "proposals/member" max "agreed ms" "event→view s" outcome
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' ------- ------- ----------- ----------------- ------- ------------- -------------- ---------
for n in "${sizes[@]}"; do
  for ev in ${EVENTS:-join crash stall}; do
    config "$n"
    log=$work/run$n-$ev.log
    "$build/bin/gossip-launch" "$work/run$n.yaml" 2>&1 | stamp >"$log" &
    launch=$!
    until grep -q "] step 20/" "$log"; do sleep 0.2; done
    t0=$(now)
    event "$n" "$ev" "$log"
    wait "$launch" || true
    wait || true
    lines=$(grep "view change to epoch 1:" "$log" || true)
    members=$(grep -m1 -o "epoch 1: [0-9]* members" <<<"$lines" | awk '{print $3}')
    sent=$(grep -o "sent [0-9]* proposals" <<<"$lines" | awk '{s += $2; if ($2 > m) m = $2; k++} END {printf "%.1f %d", s / k, m}')
    agreed=$(grep -o "agreed in [0-9]*" <<<"$lines" | awk '{if ($3 > m) m = $3} END {print m + 0}')
    last=$(cut -d' ' -f1 <<<"$lines" | sort -n | tail -1)
    read -r mean max <<<"$sent"
    printf '| %5d | %-5s | %9s | %15s | %5s | %11s | %12.2f | %s |\n' "$n" "$ev" "$members" "$mean" "$max" "$agreed" \
      "$(echo "$last - $t0" | bc)" "$(grep -o '[0-9]* of [0-9]* peers succeeded, [0-9]* distinct final model' "$log" | head -1)"
  done
done
