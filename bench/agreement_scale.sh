#!/usr/bin/env bash
# One view change at size, simulated (bench/agreement_bench.cc: the real membership code, one
# thread per member, over the in-process transport, no latency or loss): for each N (default
# 8 32 64 256), a crash told to the victim's 3 watchers only, a crash told to everyone (an
# all-to-all failure detector) and a join; prints the time until every member had the new view
# and the view-change messages and KB each member sent.
#   bench/agreement_scale.sh [N...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
sizes=("$@"); [ $# -gt 0 ] || sizes=(8 32 64 256)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
printf '| %5s | %-5s | %8s | %10s | %12s | %8s | %10s |\n' members event told "agreed ms" "msgs/member" "max" "KB/member"
printf '|%s|%s|%s|%s|%s|%s|%s|\n' ------- ------- ---------- ------------ -------------- ---------- ------------
for n in "${sizes[@]}"; do
  "$build/bin/agreement_bench" --peers "$n" --event crash --watchers 3 2>/dev/null
  "$build/bin/agreement_bench" --peers "$n" --event crash --watchers 0 2>/dev/null
  "$build/bin/agreement_bench" --peers "$n" --event join 2>/dev/null
done
