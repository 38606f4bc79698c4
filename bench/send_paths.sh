#!/usr/bin/env bash
# Benchmark: what one byte sent over loopback TCP costs in CPU with each of the kernel's send
# paths — write() (a copy into the socket buffers: ZeroMQ's and Open MPI's path), vmsplice() +
# splice() and send(MSG_ZEROCOPY) (the sender's pages handed to TCP without that copy) —, the
# three interleaved in one run, medians of REPEATS runs of 40 × 16.8 MB (bench/send_paths.c).
# Whether a zero-copy send path could lower a gossip round's CPU time, which bounds it on a
# machine whose cores are all busy moving bytes (bench/exchange_round.sh).
# Usage: bench/send_paths.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
source bench/lib.sh
mkdir -p build/bench-mpi
gcc -O2 -o build/bench-mpi/send_paths bench/send_paths.c
bench_tee send_paths
PATHS=(write splice zerocopy)
declare -A rate=() cpu=()
for _ in $(seq "$REPEATS"); do
  for p in "${PATHS[@]}"; do
    read -r _ _ _ r _ c < <(build/bench-mpi/send_paths "$p")
    rate[$p]+="$r "
    cpu[$p]+="$c "
  done
done
echo "loopback TCP, 16.8 MB per round, the receiver answering each round before the sender reuses its"
echo "buffer; CPU = user + system time of both processes per GB; medians of $REPEATS runs, min-max in brackets"
echo
echo "| send path | GB/s | CPU s per GB | CPU / write() |"
echo "|---|---|---|---|"
write_cpu=$(printf '%s\n' ${cpu[write]} | median)
for p in "${PATHS[@]}"; do
  r=$(printf '%s\n' ${rate[$p]} | median)
  c=$(printf '%s\n' ${cpu[$p]} | median)
  spread=$(printf '%s\n' ${cpu[$p]} | sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}')
  printf '| %s | %s | %s (%s) | %.2f |\n' "$p" "$r" "$c" "$spread" "$(echo "$c $write_cpu" | awk '{print $1 / $2}')"
done
echo
echo "$(machine_line), kernel $(uname -r)"
