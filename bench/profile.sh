#!/usr/bin/env bash
# What bounds the figures of the other benchmarks, measured on this machine (root: perf):
#  1. memcpy bandwidth of one thread (in cache and not), the bound on every copy of a byte;
#  2. an exchange round (gossip ring, n peers, FLOATS floats over tcp://127.0.0.1): its time, the
#     bytes the kernel copies per round, and the lower bound those copies put on the round;
#  3. where the round's CPU time goes (perf record, all peer processes and their threads);
#  4. system calls per peer and round (strace -f -c);
#  5. where a training step's instructions go (valgrind --tool=callgrind on train_bench).
# Prints markdown. Usage: bench/profile.sh [n] [floats]   (defaults: 4 4194304, i.e. 16.8 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4}
FLOATS=${2:-4194304}
ROUNDS=20
for tool in perf:linux-perf valgrind:valgrind strace:strace; do
  command -v "${tool%%:*}" >/dev/null ||
    { echo "installing ${tool#*:}"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool#*:}" >/dev/null; }
done
bash scripts/setup.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p build/bench-mpi
gcc -O2 -o build/bench-mpi/memcpy_bw bench/memcpy_bw.c
source bench/lib.sh
xb=(build/bin/exchange_bench --n "$N" --floats "$FLOATS" --algo ring --transport tcp)

echo "## 1. memcpy, one thread"
echo
echo "| buffer | GB/s |"
echo "|---|---|"
build/bench-mpi/memcpy_bw | awk '{printf "| %.1f MB | %s |\n", $3 / 1e6, $5}'
hot=$(build/bench-mpi/memcpy_bw | awk 'NR == 1 {print $5}')
cold=$(build/bench-mpi/memcpy_bw | awk 'NR == 2 {print $5}')

round=$(for _ in 1 2 3; do "${xb[@]}" --rounds 10 | awk '{print $NF}'; done | median)
mb=$(awk -v f="$FLOATS" 'BEGIN{printf "%.1f", f * 4 / 1e6}')
# Ring: every peer sends its vector to 2 neighbours and receives 2; the kernel copies each byte
# twice (sender's buffer -> socket buffer, socket buffer -> receiver's buffer).
copied=$(awk -v f="$FLOATS" -v n="$N" 'BEGIN{printf "%.0f", n * 2 * 2 * f * 4 / 1e6}')
cores=$(nproc)
echo
echo "## 2. one ring exchange round, n = $N, $mb MB per vector, tcp://127.0.0.1, $cores cores"
echo
echo "| measured round (median of 3 runs of 10) | kernel copies per round (all peers) | copy time at the cold memcpy rate over $cores cores | at the in-cache rate |"
echo "|---|---|---|---|"
awk -v r="$round" -v c="$copied" -v cold="$cold" -v hot="$hot" -v k="$cores" \
  'BEGIN{printf "| %.1f ms | %s MB | %.1f ms | %.1f ms |\n", r * 1e3, c, c / 1e3 / cold / k * 1e3, c / 1e3 / hot / k * 1e3}'

echo
echo "## 3. CPU time of the round by function (perf record -g, every process and thread, $ROUNDS rounds)"
echo
perf record -q -g -o "$out/perf.data" "${xb[@]}" --rounds "$ROUNDS" > /dev/null 2>&1
echo "| share | where | function |"
echo "|---|---|---|"
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -q 2>/dev/null |
  awk '/^ +[0-9.]+%/ && n < 12 {n++; sym = $4; for (i = 5; i <= NF; i++) sym = sym " " $i
       printf "| %s | %s | %s |\n", $1, $2, sym}'
echo
echo "| share | thread |"
echo "|---|---|"
perf report -i "$out/perf.data" --no-children --sort comm --stdio -q 2>/dev/null |
  awk '/^ +[0-9.]+%/ && n < 4 {n++; printf "| %s | %s |\n", $1, $2}'

echo
echo "## 4. system calls per peer and round (strace -f -c; warm-up rounds and the start included; the"
echo "benchmark's parent waiting for its peers left out)"
echo
strace -f -c -o "$out/strace.txt" "${xb[@]}" --rounds "$ROUNDS" > /dev/null 2>&1
echo "| system call | calls per peer and round | share of system-call time |"
echo "|---|---|---|"
awk -v n="$N" -v r="$((ROUNDS + 5))" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "wait4" && n_ < 8 {n_++
     printf "| %s | %.1f | %s%% |\n", $NF, $4 / n / r, $1}' "$out/strace.txt"
awk -v n="$N" -v r="$((ROUNDS + 5))" '$NF == "total" {printf "\nall: %.0f calls per peer and round\n", $4 / n / r}' "$out/strace.txt"

echo
echo "## 5. a training step's instructions (callgrind, train_bench 784-256-256-10, batch 64, 1 thread; only inside train_batch and the SGD step)"
echo
valgrind --tool=callgrind --collect-atstart=no --toggle-collect='gossip::model::Mlp::train_batch*' \
  --toggle-collect='gossip::model::Sgd::step*' --callgrind-out-file="$out/cg.out" build/bin/train_bench --steps 30 \
  > /dev/null 2>&1
echo "| share of instructions | function |"
echo "|---|---|"
callgrind_annotate "$out/cg.out" 2>/dev/null | grep -v "PROGRAM TOTALS" |
  awk 'match($0, /\( *[0-9.]+%\)/) && n < 10 {n++; pct = substr($0, RSTART + 1, RLENGTH - 2); gsub(/ /, "", pct)
       fn = substr($0, RSTART + RLENGTH); sub(/^ +/, "", fn); sub(/ \[.*$/, "", fn); sub(/^.*:/, "", fn); sub(/\(.*$/, "", fn)
       printf "| %s | %s |\n", pct, fn}'
