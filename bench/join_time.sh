#!/usr/bin/env bash
# Benchmark: how long a joiner waits. Starts configs/ring4.yaml's four peers on Fashion-MNIST,
# and once they train, one `gossip-peer --join` through peer 0; reads from the joiner's log the
# time from its start to its first step in the new view (it asks first and loads its data while
# the members agree). REPEATS runs; prints each and the median as a markdown table.
# Usage: bench/join_time.sh [repeats]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
bash scripts/setup.sh >/dev/null
source bench/lib.sh
dir=$(mktemp -d)
trap 'pkill -f "gossip-peer --config configs/ring4.yaml" 2>/dev/null || true; rm -rf "$dir"' EXIT
echo "| run | join request to first step (ms) | joiner start to first step (ms) |"
echo "|---|---|---|"
for i in $(seq "$REPEATS"); do
  build/bin/gossip-launch configs/ring4.yaml > "$dir/run.log" 2>&1 &
  launcher=$!
  for _ in $(seq 300); do grep -q "step 100/" "$dir/run.log" 2>/dev/null && break; sleep 0.1; done
  contact=$(grep -oP '\[peer 0\] bound \Ktcp://[0-9.:]+' "$dir/run.log")
  build/bin/gossip-peer --config configs/ring4.yaml --join "$contact" > "$dir/join.log" 2>&1 &
  for _ in $(seq 300); do grep -q "joined as peer" "$dir/join.log" 2>/dev/null && break; sleep 0.1; done
  line=$(grep -oP '\d+ ms after the join request \(\d+ ms after this peer started' "$dir/join.log" || true)
  request=$(echo "$line" | grep -oP '^\d+'); start=$(echo "$line" | grep -oP '\(\K\d+')
  echo "| $i | ${request:-?} | ${start:-?} |"
  echo "${start:-}" >> "$dir/starts"
  wait "$launcher" || true
  wait || true
done
echo "| median | | $(grep . "$dir/starts" | median) |"
