#!/usr/bin/env bash
# Benchmark 2: time of one exchange round (gossip ring, one-peer exponential, push-sum, and the
# peers' own ring all-reduce) vs OpenMPI's MPI_Allreduce (Debian openmpi-bin, --mca btl tcp,self)
# and torch.distributed's gloo all_reduce (Debian python3-torch) on the same buffer size and
# process count, interleaved in ONE run; medians of REPEATS runs and ratios to MPI, drawn as bars
# with the spread of the per-repeat ratios (docs/bench/exchange_round.{md,svg}), and a machine line
# with this run's memcpy and loopback TCP bandwidth and the MPI version.
# Usage: bench/exchange_round.sh [repeats] [floats...]   (1, 16, 64 MB: 262144 4194304 16777216)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
shift || true
SIZES=${*:-4194304}
echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1 || {  # mpicc and MPI's headers
  echo "installing openmpi"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; }
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "installing python3-torch"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null; }
bash scripts/setup.sh >/dev/null
mkdir -p build/bench-mpi
mpicc -O2 -o build/bench-mpi/mpi_allreduce bench/mpi_allreduce.c
gcc -O2 -o build/bench-mpi/memcpy_bw bench/memcpy_bw.c
gcc -O2 -o build/bench-mpi/tcp_bw bench/tcp_bw.c
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo)
MPISHM=(mpirun --allow-run-as-root --oversubscribe --mca btl vader,self)  # shared memory: the same-host best case
# Open MPI's recursive doubling all-reduce, forced: each peer sends its whole vector log2(n) times —
# at n = 4 the two vectors per peer the gossip ring sends (the default sends 2(n − 1)/n of one).
MPIRD=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 3)
source bench/lib.sh
bench_tee exchange_round
# What bounds the rounds on this machine, measured in this run before every repeat (the floors
# below take the medians, so one low measurement does not put a round under its floor): one
# thread's memcpy of a 16.8 MB buffer (out of cache), loopback TCP between two processes, and all
# cores sending at once (one pair of processes per core): what n peers' sockets share.
cores=$(nproc)
memcpy_runs="" tcp_runs="" tcp_all_runs=""
measure_limits() {
  memcpy_runs+="$(build/bench-mpi/memcpy_bw | awk 'NR == 2 {print $5}') "
  tcp_runs+="$(build/bench-mpi/tcp_bw | awk '{print $5}') "
  tcp_all_runs+="$(for _ in $(seq "$cores"); do build/bench-mpi/tcp_bw & done | awk '{s += $5} END {printf "%.2f", s}'; wait) "
}
# "median (min–max)" of a list of rates
rate_spread() { echo "$(printf '%s\n' $1 | median | awk '{printf "%.2f", $1}') ($(printf '%s\n' $1 | sort -g | head -1)–$(printf '%s\n' $1 | sort -g | tail -1))"; }
bars=$(mktemp)
shm_bars=$(mktemp)
floors=$(mktemp)
same_bytes=$(mktemp)
# name[@ipc][@bf16][@1copy]: @ipc runs over ipc://, @bf16 sends the gossip values as bfloat16
# (algorithm.wire), @1copy lends the chunks: the receiver copies them out of the sender's memory
# (algorithm.single_copy; ZeroMQ over tcp://127.0.0.1 carries only the references), @crc
# checksums every payload (algorithm.checksum: always; by default chunks over loopback go without).
ALGOS=(ring one_peer_exponential ring@crc one_peer_exponential@crc push_sum allreduce ring@ipc one_peer_exponential@ipc ring@bf16 one_peer_exponential@bf16
  ring@1copy one_peer_exponential@1copy push_sum@1copy allreduce@1copy)
echo "gossip rows use tcp://127.0.0.1 unless marked ipc://, and f32 values unless marked bf16; crc rows checksum"
echo "every payload (algorithm.checksum: always; the others send vector chunks over loopback without); MPI uses --mca btl"
echo "tcp,self (ratios are to it) and, in the last columns, its shared-memory transport (--mca btl vader,self),"
echo "beside our same-host transports (ipc://, and single copy: 1-copy); our vectors travel in chunks of 4 MiB"
echo "(algorithm.chunk_bytes' default);"
echo "medians of $REPEATS runs of 10 rounds"
echo
echo "| floats (MB) | n | MPI_Allreduce ms | gloo all_reduce ms | gloo / MPI | ring ms | ring / MPI | one-peer exp ms | one-peer / MPI | ring crc ms | ring crc / MPI | one-peer crc ms | one-peer crc / MPI | push-sum ms | push-sum / MPI | our all-reduce ms | ours / MPI | ring ipc ms | ring ipc / MPI | one-peer ipc ms | one-peer ipc / MPI | ring bf16 ms | ring bf16 / MPI | one-peer bf16 ms | one-peer bf16 / MPI | ring 1-copy ms | ring 1-copy / MPI | one-peer 1-copy ms | one-peer 1-copy / MPI | push-sum 1-copy ms | push-sum 1-copy / MPI | our all-reduce 1-copy ms | ours 1-copy / MPI | MPI shm ms | ring ipc / MPI shm | one-peer ipc / MPI shm | ring 1-copy / MPI shm | one-peer 1-copy / MPI shm | our all-reduce 1-copy / MPI shm |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for floats in $SIZES; do
  for n in 4 8; do
    declare -A res=()
    for _ in $(seq "$REPEATS"); do
      measure_limits
      res[mpi]+="$("${MPIRUN[@]}" -np "$n" build/bench-mpi/mpi_allreduce "$floats" 10 | awk '{print $NF}') "
      res[mpird]+="$("${MPIRUN[@]}" "${MPIRD[@]}" -np "$n" build/bench-mpi/mpi_allreduce "$floats" 10 | awk '{print $NF}') "
      res[mpishm]+="$("${MPISHM[@]}" -np "$n" build/bench-mpi/mpi_allreduce "$floats" 10 | awk '{print $NF}') "
      res[gloo]+="$(/usr/bin/python3 bench/gloo_allreduce.py "$n" "$floats" 10 | awk '{print $NF}') "
      for a in "${ALGOS[@]}"; do
        transport=tcp; [[ $a == *@ipc* ]] && transport=ipc
        wire=f32; [[ $a == *@bf16* ]] && wire=bf16
        copy=(); [[ $a == *@1copy* ]] && copy=(--single_copy)
        checksum=auto; [[ $a == *@crc* ]] && checksum=always
        res[$a]+="$(build/bin/exchange_bench --n "$n" --floats "$floats" --algo "${a%%@*}" --transport $transport --wire $wire \
          "${copy[@]}" --checksum $checksum --rounds 10 | awk '{print $NF}') "
      done
    done
    m() { printf '%s\n' ${res[$1]} | median; }
    mpi=$(m mpi)
    gloo=$(m gloo)
    row="| $floats ($(awk -v f="$floats" 'BEGIN{printf "%.1f", f*4/1e6}')) | $n | $(awk -v s="$mpi" 'BEGIN{printf "%.1f", s*1e3}') |"
    row+=" $(awk -v s="$gloo" 'BEGIN{printf "%.1f", s*1e3}') | $(awk -v s="$gloo" -v b="$mpi" 'BEGIN{printf "%.2f", s/b}') |"
    for a in "${ALGOS[@]}"; do
      v=$(m "$a")
      row+=" $(awk -v s="$v" 'BEGIN{printf "%.1f", s*1e3}') | $(awk -v s="$v" -v b="$mpi" 'BEGIN{printf "%.2f", s/b}') |"
    done
    mb=$(awk -v f="$floats" 'BEGIN{printf "%.1f", f*4/1e6}')
    for a in gloo "${ALGOS[@]}"; do
      read -r lo hi <<< "$(ratio_spread "${res[$a]}" "${res[mpi]}")"
      echo "${a/one_peer_exponential/one-peer}_n=${n}_${mb}_MB $(awk -v s="$(m "$a")" -v b="$mpi" 'BEGIN{printf "%.3f", s/b}') $lo $hi" >> "$bars"
    done
    shm=$(m mpishm)
    row+=" $(awk -v s="$shm" 'BEGIN{printf "%.1f", s*1e3}') |"
    for a in ring@ipc one_peer_exponential@ipc ring@1copy one_peer_exponential@1copy allreduce@1copy; do
      row+=" $(awk -v s="$(m "$a")" -v b="$shm" 'BEGIN{printf "%.2f", s/b}') |"
      read -r lo hi <<< "$(ratio_spread "${res[$a]}" "${res[mpishm]}")"
      echo "${a/one_peer_exponential/one-peer}_n=${n}_${mb}_MB $(awk -v s="$(m "$a")" -v b="$shm" 'BEGIN{printf "%.3f", s/b}') $lo $hi" >> "$shm_bars"
    done
    echo "$row"
    read -r lo hi <<< "$(ratio_spread "${res[ring]}" "${res[mpird]}")"
    echo "$n $(awk -v s="$(m ring)" -v b="$(m mpird)" 'BEGIN{printf "%.2f", s/b}') $lo $hi" >> "$same_bytes"
    for a in mpi mpird ring one_peer_exponential mpishm ring@ipc one_peer_exponential@ipc ring@1copy one_peer_exponential@1copy; do
      echo "$floats $n $a $(m "$a") $mpi $shm" >> "$floors"
    done
  done
done
echo
echo "Ratios to MPI_Allreduce (tcp) with the spread of the per-repeat ratios (repeat i of both measured side by side):"
echo
echo "| row (algorithm, n, MB) | median ratio | per-repeat min..max |"
echo "|---|---|---|"
awk '{printf "| %s | %s | %s..%s |\n", $1, $2, $3, $4}' "$bars" | tr _ ' '
echo
echo "Same-host rows to MPI_Allreduce over shared memory (vader), with the spread of the per-repeat ratios:"
echo
echo "| row (algorithm, n, MB) | median ratio to MPI shm | per-repeat min..max |"
echo "|---|---|---|"
awk '{printf "| %s | %s | %s..%s |\n", $1, $2, $3, $4}' "$shm_bars" | tr _ ' '
echo
echo
echo "How far each round is from what the bytes it must move cost on this machine (the medians of this"
echo "run's memcpy and all-pairs TCP bandwidth, measured before every repeat). A peer's fold reads its"
echo "own values and each neighbour's once and writes the mix once, (degree + 2)·B bytes moved, at"
echo "2 × memcpy GB/s per core (a copied byte is read and written); over TCP every byte a peer sends"
echo "also crosses a socket at the all-pairs rate."
echo "MPI's all-reduce (ring, or reduce-scatter then all-gather: the same bytes) sends 2(n − 1)/n·B per peer"
echo "and folds (n − 1)/n·B (3 bytes moved each); over shared memory the gathered (n − 1)/n·B is also read"
echo "once and written once. Its recursive doubling sends and folds log2(n)·B per peer."
echo "'floors ours / MPI' is the ratio each would have at MPI's own distance from its floor."
echo
memcpy_gbs=$(printf '%s\n' $memcpy_runs | median)
tcp_all_gbs=$(printf '%s\n' $tcp_all_runs | median)
limits="memcpy $(rate_spread "$memcpy_runs") GB/s (16.8 MB, one thread), loopback TCP $(rate_spread "$tcp_runs") GB/s (one pair),"
limits+=" $(rate_spread "$tcp_all_runs") GB/s ($cores pairs at once): medians (min–max) over the repeats, $(mpirun --version | head -1)"
echo "| MB | n | row | ms | floor ms | × floor | ÷ MPI (tcp rows) or MPI shm (same-host rows) | floors ours / MPI |"
echo "|---|---|---|---|---|---|---|---|"
awk -v mc="$memcpy_gbs" -v tcp="$tcp_all_gbs" -v cores="$cores" '
  function moved(bytes, n) { return bytes / (2 * mc * 1e9 * (n < cores ? n : cores)) }  # read + write, on n peers
  function sent(bytes) { return bytes / (tcp * 1e9) }
  function fold(n, deg, b) { return moved(n * (deg + 2) * b, n) }
  function mpi_floor(n, b, shm) { return shm ? moved(5 * (n - 1) * b, n) : sent(2 * (n - 1) * b) + moved(3 * (n - 1) * b, n) }
  function doubling_floor(n, b) { k = log(n) / log(2); return sent(n * k * b) + moved(3 * n * k * b, n) }
  {
    b = $1 * 4; n = $2; a = $3; t = $4; mpi = $5; shm = $6
    deg = a ~ /^ring/ ? 2 : 1
    same = a ~ /@/ || a == "mpishm"
    if (a == "mpi") f = mpi_floor(n, b, 0)
    else if (a == "mpird") f = doubling_floor(n, b)
    else if (a == "mpishm") f = mpi_floor(n, b, 1)
    else f = fold(n, deg, b) + (same ? 0 : sent(n * deg * b))
    base = same ? shm : mpi
    fbase = mpi_floor(n, b, same)
    name = a; sub("one_peer_exponential", "one-peer", name); sub("mpishm", "MPI shm", name); sub("^mpi$", "MPI tcp", name); sub("^mpird$", "MPI tcp rec. doubling", name)
    printf "| %.1f | %d | %s | %.1f | %.1f | %.2f | %.2f | %.2f |\n", b / 1e6, n, name, t * 1e3, f * 1e3, t / f, t / base, f / fbase
  }' "$floors"
echo
echo "The gossip ring sends two whole vectors per peer, Open MPI's default all-reduce 2(n − 1)/n of one"
echo "(1.5 at n = 4), and a byte costs both the same kernel copies: hence 'floors ours / MPI' above the ring's rows."
echo "MPI's recursive doubling (forced; MPI tcp rec. doubling above) sends log2(n) whole vectors per"
echo "peer — the ring's two at n = 4, three at n = 8. The ring's time to it, median (per-repeat min..max):"
echo
echo "| n | ring / MPI recursive doubling | per-repeat min..max |"
echo "|---|---|---|"
awk '{printf "| %s | %s | %s..%s |\n", $1, $2, $3, $4}' "$same_bytes"
echo
echo "$(machine_line); $limits"
python3 bench/plot.py bars "$bars" "time of one round ÷ MPI_Allreduce's (tcp), median; whiskers: per-repeat min..max" \
  "One exchange round against Open MPI ($REPEATS repeats of 10 rounds)" 1 > "$BENCH_OUT/exchange_round.svg"
rm -f "$bars" "$shm_bars" "$floors" "$same_bytes"
