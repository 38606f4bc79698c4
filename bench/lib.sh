# Shared by the bench/ scripts.
# Median of numbers on stdin, one per line.
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# "min max" of the per-pair ratios a_i / b_i of two space-separated lists of one run's repeats
# (repeat i of both measured side by side).
ratio_spread() {
  paste <(printf '%s\n' $1) <(printf '%s\n' $2) |
    awk '{r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r} END {printf "%.3f %.3f", lo, hi}'
}
# Where a script writes its table (NAME.md) and plot (NAME.svg): docs/bench, which
# docs/benchmarks.md shows, unless BENCH_OUT names another folder. `bench_tee NAME` sends the
# script's stdout to the terminal and to NAME.md.
BENCH_OUT=${BENCH_OUT:-docs/bench}
bench_tee() { mkdir -p "$BENCH_OUT"; exec > >(tee "$BENCH_OUT/$1.md"); }
# The machine line every table ends with. It names the OpenBLAS kernels too: some machines pin
# them with OPENBLAS_CORETYPE (this project's VMs: Haswell, AVX2, on a CPU with AVX-512), which
# changes gossip's CPU figures while PyTorch's oneDNN convolutions still use AVX-512.
machine_line() {
  local avx512=""
  grep -qw avx512f /proc/cpuinfo && avx512=", AVX-512"
  echo "$(nproc)-core $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)$avx512, $(date -u +%F), CPU backend," \
       "OpenBLAS kernels ${OPENBLAS_CORETYPE:-auto-detected}"
}
