#!/usr/bin/env bash
# The cost of peer.mix from Python (the module over gossip::Peer, numpy buffer mixed in place)
# against the C++ peer's exchange round on the same buffer: the same gossip::Peer used from C++
# (bench/peer_mix_bench.cc: what Python adds) and the bare gossip step (bench/exchange_bench.cc:
# GossipStep on a plain buffer, no membership or control layer: what the library peer adds).
# Ring gossip, n peers on this machine over tcp://127.0.0.1; the three interleaved in ONE run,
# medians of REPEATS runs of 10 rounds, each run's figure its slowest peer.
# Usage: bench/python_mix.sh [repeats] [floats] [peers]   (defaults 5, 4194304 = 16.8 MB, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
FLOATS=${2:-4194304}
N=${3:-4}
bash scripts/setup.sh >/dev/null
source bench/lib.sh
cfg=$(mktemp --suffix .yaml)
trap 'rm -f "$cfg"' EXIT
printf 'peers: {count: %d, host: 127.0.0.1, base_port: 0}\ntopology: ring\nalgorithm: {kind: gossip}\n' "$N" > "$cfg"
step=() lib=() py=()
slowest() { awk '/seconds_per_round/ {print $NF}' | sort -g | tail -1; }
for _ in $(seq "$REPEATS"); do
  step+=("$(build/bin/exchange_bench --n "$N" --floats "$FLOATS" --algo ring --rounds 10 | awk '{print $NF}')")
  lib+=("$(build/bin/gossip-launch "$cfg" -- build/bin/peer_mix_bench "$FLOATS" 10 | slowest)")
  py+=("$(PYTHONPATH=build/python build/bin/gossip-launch "$cfg" -- /usr/bin/python3 bench/python_mix.py "$FLOATS" 10 | slowest)")
done
ratios() { for i in "${!py[@]}"; do awk -v a="${py[$i]}" -v b="$1" 'BEGIN{split(b, v, " "); printf "%.3f\n", a / v['$((i + 1))']}' ; done; }
ms() { printf '%s\n' "$@" | median | awk '{printf "%.1f", $1 * 1e3}'; }
r_lib=$(ratios "${lib[*]}") r_step=$(ratios "${step[*]}")
echo "| floats (MB) | n | gossip step ms | C++ gossip::Peer mix ms | Python peer.mix ms | Python / C++ Peer (median; runs) | Python / gossip step (median; runs) |"
echo "|---|---|---|---|---|---|---|"
echo "| $FLOATS ($(awk -v f="$FLOATS" 'BEGIN{printf "%.1f", f*4/1e6}')) | $N | $(ms "${step[@]}") | $(ms "${lib[@]}") | $(ms "${py[@]}") |" \
     "$(echo "$r_lib" | median); $(echo $r_lib) | $(echo "$r_step" | median); $(echo $r_step) |"
