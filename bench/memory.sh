#!/usr/bin/env bash
# Memory of a run: starts CONFIG's peers with gossip-launch (for EPOCHS epochs, 3 by default),
# samples every peer's /proc/PID/smaps_rollup every 0.2 s while they run, and prints, for the
# sample of all peers with the largest total, each peer's PSS (proportional set size: pages shared
# with other processes count divided among them) and private memory (Private_Clean +
# Private_Dirty), the sum of PSS, the wall time and the final models' checksums.
#   bench/memory.sh [CONFIG.yaml] [EPOCHS] [EXTRA gossip-launch FLAGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
config=${1:-$here/../configs/onepeer8.yaml}
epochs=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
log=$(mktemp); samples=$(mktemp)
trap 'rm -f "$log" "$samples"' EXIT
start=$(date +%s.%N)
"$build/bin/gossip-launch" "$config" --epochs "$epochs" "$@" >"$log" 2>&1 &
launch=$!
kb() { awk -v k="$1" '$1 == k":" {s += $2} END {print s + 0}' "$2" 2>/dev/null || echo 0; }
while kill -0 "$launch" 2>/dev/null; do
  pids=$(pgrep -P "$launch" -f gossip-peer || true)
  if [ -n "$pids" ]; then
    line=""; total=0; count=0
    for p in $pids; do
      f=/proc/$p/smaps_rollup
      [ -r "$f" ] || continue
      pss=$(kb Pss "$f"); priv=$(( $(kb Private_Clean "$f") + $(kb Private_Dirty "$f") ))
      [ "$pss" -gt 0 ] || continue  # exited between pgrep and the read
      total=$((total + pss)); line="$line $p:$pss:$priv"; count=$((count + 1))
    done
    echo "$count $total$line" >>"$samples"
  fi
  sleep 0.2
done
wait "$launch" || { echo "the run failed:"; tail -20 "$log"; exit 1; }
wall=$(echo "$(date +%s.%N) - $start" | bc)
# The largest sum among the samples that saw the most peers alive.
best=$(sort -k1,1n -k2,2n "$samples" | tail -1)
peers=${best%% *}; best=${best#* }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "config: $config, epochs $epochs, $peers peers"
printf '| %-8s | %9s | %12s |\n' "peer pid" "PSS MB" "private MB"
printf '|%s|%s|%s|\n' "----------" "-----------" "--------------"
for f in ${best#* }; do
  IFS=: read -r pid pss priv <<<"$f"
  printf '| %-8s | %9.1f | %12.1f |\n' "$pid" "$(echo "$pss / 1024" | bc -l)" "$(echo "$priv / 1024" | bc -l)"
done
printf '| %-8s | %9.1f | %12s |\n' "sum" "$(echo "${best%% *} / 1024" | bc -l)" ""
printf 'wall time %.1f s\n' "$wall"
grep -E "succeeded" "$log" || true
grep -o " test_acc [0-9.]*" "$log" | awk '{s += $2; n++} END {if (n) printf "mean final test_acc %.4f over %d peers\n", s / n, n}'
grep -o "params_crc [0-9a-f]*" "$log" | sort | uniq -c
