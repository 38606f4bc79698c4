#!/usr/bin/env bash
# One view change at size, simulated (bench/agreement_bench.cc: the real membership code, one
# thread per member, over the in-process transport): for each N (default 8 32 64 256), a crash
# told to the victim's 3 watchers only, a join and a 2-way partition, first with messages
# arriving at once, then with 1 ms + up to 1 ms of latency and 1 % of view-change messages lost
# (LINK="--latency-ms L --jitter-ms J --loss P" to change it). Prints the time until every member
# had the new view (or knew it was cut off), the view-change messages and KB each member sent
# (mean and max), the messages the link lost and the CPU seconds the simulation used.
#   bench/agreement_scale.sh [N...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
sizes=("$@"); [ $# -gt 0 ] || sizes=(8 32 64 256)
link=${LINK:---latency-ms 1 --jitter-ms 1 --loss 0.01}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
printf '| %5s | %-9s | %6s | %5s | %10s | %11s | %6s | %9s | %6s | %6s |\n' \
  members event "lat ms" loss "agreed ms" "msgs/member" max "KB/member" lost "CPU s"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ------- ----------- -------- ------- ------------ ------------- -------- \
  ----------- -------- --------
for n in "${sizes[@]}"; do
  for args in "" "$link"; do
    for event in crash join partition; do
      # shellcheck disable=SC2086
      "$build/bin/agreement_bench" --peers "$n" --event "$event" $args 2>/dev/null ||
        echo "| $n | $event | failed: rerun it as bench/agreement_bench --peers $n --event $event $args |"
    done
  done
done
