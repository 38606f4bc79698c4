#!/usr/bin/env bash
# GPU readiness in one short run (a few minutes): builds gossip with CUDA (-DGOSSIP_CUDA=ON) into
# build-cuda, runs the GPU tests (they skip on a machine without a device, so here they must run),
# trains 2 and 8 MLP peers on the GPU and on the CPU from one YAML (averaged accuracy within 0.5
# points, PCIe MB per step printed), trains a CNN and a GPT with 2 peers each
# on the GPU and on the CPU from the same YAML and fails when their results differ by more than
# float rounding can explain, and prints markdown tables of training throughput on the GPU (MLP
# 784-1024-1024-10 at batch 256 and 1024 beside PyTorch on the same GPU when its python3 has
# CUDA; LeNet, the residual net and the GPT) beside this machine's CPU backend.
#
#   bench/gpu.sh          build, test and measure (needs nvcc and the build dependencies)
#   bench/gpu.sh pack     (on a Debian machine with the dependencies, i.e. after scripts/setup.sh)
#                         writes .gpu-deps/sysroot.tar.xz: the headers, libraries and CMake/pkg-config
#                         files of the dependencies, for a GPU machine that cannot install packages.
#                         bench/gpu.sh unpacks it when the dependencies are missing there, e.g. with
#                         the device tool: run(command="bench/gpu.sh", carry=[".gpu-deps"]).
#   bench/gpu.sh bundle   (after a build with CUDA in build/) packs the GPU binaries and the
#                         libraries they load, but for glibc, libstdc++ and CUDA's, into
#                         .gpu-deps/bundle.tar.xz; on the GPU machine, GPU_BUNDLE=1 bench/gpu.sh runs
#                         them instead of building. GOSSIP_BIN=dir runs the binaries in dir.
#
# A failing check does not stop the run: every check runs, each failure is named, and the exit
# status is 1 when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
multiarch=x86_64-linux-gnu
lib=/usr/lib/$multiarch

if [[ ${1:-} == pack ]]; then
  [[ -x build/bin/gossip-peer ]] || bash scripts/setup.sh >/dev/null
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  copy() { for f in "$@"; do mkdir -p "$stage$(dirname "$f")"; cp -a "$f" "$stage$f"; done; }
  copy /usr/include/zmq.h /usr/include/zmq_utils.h /usr/include/zmq.hpp /usr/include/zmq_addon.hpp \
       /usr/include/zlib.h /usr/include/zconf.h /usr/include/yaml-cpp /usr/include/gtest /usr/include/gmock \
       /usr/include/$multiarch/openblas-pthread $lib/cmake/yaml-cpp $lib/cmake/GTest \
       $lib/libgtest.a $lib/libgtest_main.a $lib/libgmock.a $lib/libgmock_main.a \
       /usr/bin/pkgconf "$(readlink -f $lib/libpkgconf.so.3)" $lib/libpkgconf.so.3
  # The Boost headers that gossip's sources include, not all 160 MB of them.
  for src in src/control/metrics_server.cc tests/metrics_server_test.cc; do
    g++ -std=c++20 -Isrc -Itests -M "$src" | tr ' \\' '\n\n' | grep '^/usr/include/boost/' || true
  done | sort -u | while read -r h; do copy "$h"; done
  # The libraries to link (unversioned names) and everything they load that is not glibc, libstdc++ or CUDA.
  for l in libzmq.so libyaml-cpp.so libz.so openblas-pthread/libopenblas.so; do
    copy "$lib/$l" "$(readlink -f "$lib/$l")"
  done
  ldd build/bin/gossip-peer | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/cuda' |
    while read -r so; do
      real=$(readlink -f "$so")
      dest=$lib/${so##*/}
      [[ $so == */openblas-pthread/* ]] && dest=$lib/openblas-pthread/${so##*/}
      mkdir -p "$stage$(dirname "$dest")"
      cp "$real" "$stage$dest"
    done
  mkdir -p .gpu-deps
  tar -C "$stage" -cJf .gpu-deps/sysroot.tar.xz .
  echo "bench/gpu.sh pack: .gpu-deps/sysroot.tar.xz ($(du -h .gpu-deps/sysroot.tar.xz | cut -f1))"
  exit 0
fi

if [[ ${1:-} == bundle ]]; then
  out=.gpu-deps/bundle
  rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
  trap 'rm -rf "$out"' EXIT
  targets=(cuda_backend_test cuda_exchange_test cuda_layers_test network_test mlp_test train_bench gossip-peer gossip-launch)
  for t in "${targets[@]}"; do cp build/bin/$t "$out/bin/"; done
  ldd build/bin/gossip-peer build/bin/cuda_layers_test | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/cuda' |
    while read -r so; do cp "$(readlink -f "$so")" "$out/lib/${so##*/}"; done
  tar -C .gpu-deps -cJf .gpu-deps/bundle.tar.xz bundle
  echo "bench/gpu.sh bundle: .gpu-deps/bundle.tar.xz ($(du -h .gpu-deps/bundle.tar.xz | cut -f1))"
  exit 0
fi

failed=()
fail() { echo "bench/gpu.sh: FAILED: $*" >&2; failed+=("$*"); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
jobs=$(nproc)
if [[ ${GPU_BUNDLE:-} == 1 ]]; then
  rm -rf .gpu-deps/bundle && tar -C .gpu-deps -xJf .gpu-deps/bundle.tar.xz
  export LD_LIBRARY_PATH=$PWD/.gpu-deps/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  GOSSIP_BIN=.gpu-deps/bundle/bin
  ldd "$GOSSIP_BIN/gossip-peer" "$GOSSIP_BIN/cuda_layers_test" | grep "not found" && fail "libraries missing"
fi
if [[ -n ${GOSSIP_BIN:-} ]]; then
  bin=$GOSSIP_BIN
else
  nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [[ -x $nvcc ]] || { echo "bench/gpu.sh: no nvcc (set CUDACXX or install the CUDA toolkit)" >&2; exit 2; }

  cmake_args=()
  if [[ ${GPU_SYSROOT:-} == 1 || ( ! -e /usr/include/zmq.hpp && -e .gpu-deps/sysroot.tar.xz ) ]]; then
    # No packages here: build against the carried sysroot.
    root=$PWD/.gpu-deps/root
    [[ -d $root ]] || { mkdir -p "$root"; tar -C "$root" -xJf .gpu-deps/sysroot.tar.xz; }
    mkdir -p "$root/pc"
    printf 'Name: libzmq\nDescription: ZeroMQ\nVersion: 4.3.4\nLibs: -L%s -lzmq\nCflags: -I%s\n' \
      "$root$lib" "$root/usr/include" > "$root/pc/libzmq.pc"
    printf 'Name: openblas\nDescription: OpenBLAS\nVersion: 0.3.21\nLibs: -L%s -lopenblas\nCflags: -I%s\n' \
      "$root$lib/openblas-pthread" "$root/usr/include/$multiarch/openblas-pthread" > "$root/pc/openblas.pc"
    export PKG_CONFIG_PATH=$root/pc CPATH=$root/usr/include
    export LIBRARY_PATH=$root$lib LD_LIBRARY_PATH=$root$lib:$root$lib/openblas-pthread:${LD_LIBRARY_PATH:-}
    cmake_args+=(-DCMAKE_PREFIX_PATH="$root/usr")
    command -v pkg-config >/dev/null || cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf")
  fi
  cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGOSSIP_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    "${cmake_args[@]}" >/dev/null
  cmake --build build-cuda -j "$jobs" --target cuda_backend_test cuda_exchange_test cuda_layers_test network_test mlp_test train_bench gossip-peer gossip-launch \
    >/dev/null
  bin=build-cuda/bin
fi

echo "== GPU tests"
for t in cuda_backend_test cuda_exchange_test cuda_layers_test mlp_test network_test; do
  filter='*'
  [[ $t == *_backend_test || $t == *_exchange_test || $t == *_layers_test ]] || filter='*Cuda*'
  out=$("$bin/$t" --gtest_filter="$filter" 2>&1) || { echo "$out" | grep -E "Failure|FAILED|rror" | head -n 40 || true; fail "$t"; }
  echo "$t: $(echo "$out" | grep -E "^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?" | tr '\n' ' ')"
  grep -q "no CUDA device answers" <<< "$out" && fail "$t skipped: no CUDA device answers on this machine"
done

echo "== 2 and 8 peers on the GPU against the same YAML on the CPU (averaged accuracy within 0.5 points)"
# The same seed, data and steps on both backends: only float rounding separates the runs. The
# final lines' params_crc would be equal by construction (every peer ends with the average), so
# the check is the accuracy against the CPU run, and each GPU run prints its PCIe bytes per step.
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
field() { grep -o "$2 [0-9.]*" "$1" | head -1 | awk '{print $2}'; }
echo "| peers | averaged test accuracy, GPU | on the CPU | host->device MB/step | device->host MB/step |"
echo "|---|---|---|---|---|"
for n in 2 8; do
  for d in cuda cpu; do
    cat > "$run/mlp$n-$d.yaml" <<YAML
seed: 1
device: $d
log_every: 50
peers: {count: $n, host: 127.0.0.1, base_port: 0}
topology: ring
algorithm: {kind: gossip, global_average_every: 10}
model: {hidden: [256, 256]}
data: {dataset: synthetic, synthetic: {train: 16000, test: 4000, dims: 32, classes: 4, noise: 6}}
optimizer: {lr: 0.05, momentum: 0.9, batch: 64, epochs: 2}
YAML
    "$bin/gossip-launch" "$run/mlp$n-$d.yaml" > "$run/mlp$n-$d.log" 2>&1 || { tail -n 20 "$run/mlp$n-$d.log"; fail "$n MLP peers on $d"; }
  done
  g=$(field "$run/mlp$n-cuda.log" averaged_model_test_acc) c=$(field "$run/mlp$n-cpu.log" averaged_model_test_acc)
  echo "| $n | $g | $c | $(field "$run/mlp$n-cuda.log" h2d_MB_per_step) | $(field "$run/mlp$n-cuda.log" d2h_MB_per_step) |"
  awk -v a="$g" -v b="$c" 'BEGIN { exit !(a != "" && b != "" && a - b <= 0.005 && b - a <= 0.005) }' ||
    fail "$n peers on the GPU: averaged accuracy $g against $c on the CPU"
done

source bench/lib.sh
echo "== a CNN and a GPT, 2 ring peers each, trained on the GPU and on the CPU from one YAML"
# Synthetic 16x16 images for the CNN; for the GPT this repository's README as the text (the
# device machine has neither Fashion-MNIST nor the fortunes package). The same seed, data and
# steps on both backends: only float rounding (cuBLAS's summation order) separates the runs, so
# the averaged models' test loss must agree to 2 % and the CNN's accuracy to 2 points.
cat > "$run/cnn.yaml" <<YAML
seed: 1
log_every: 100
peers: {count: 2, host: 127.0.0.1, base_port: 0}
topology: ring
algorithm: {kind: gossip, global_average_every: 10}
model: {kind: cnn, net: resnet, width: 16, groups: 4}
data: {dataset: synthetic, synthetic: {train: 4000, test: 2000, dims: 256, classes: 10, noise: 6}}
optimizer: {lr: 0.05, momentum: 0.9, batch: 64, epochs: 2}
YAML
cat > "$run/gpt.yaml" <<YAML
seed: 1
log_every: 50
peers: {count: 2, host: 127.0.0.1, base_port: 0}
topology: ring
algorithm: {kind: gossip}
model: {kind: gpt, layers: 2, heads: 4, dim: 64, context: 64}
data: {dataset: text, files: [$PWD/README.md]}
optimizer: {kind: adamw, lr: 0.002, weight_decay: 0.1, clip_norm: 1.0, batch: 16, steps: 150}
YAML
echo "| model | device | averaged test loss | averaged test accuracy | wall s |"
echo "|---|---|---|---|---|"
for m in cnn gpt; do
  for d in cuda cpu; do
    sed "1a device: $d" "$run/$m.yaml" > "$run/$m-$d.yaml"
    t0=$SECONDS
    "$bin/gossip-launch" "$run/$m-$d.yaml" > "$run/$m-$d.log" 2>&1 || { tail -n 20 "$run/$m-$d.log"; fail "$m on $d"; }
    echo "| $m | $d | $(field "$run/$m-$d.log" averaged_model_test_loss) | $(field "$run/$m-$d.log" averaged_model_test_acc) | $((SECONDS - t0)) |"
  done
  awk -v a="$(field "$run/$m-cuda.log" averaged_model_test_loss)" -v b="$(field "$run/$m-cpu.log" averaged_model_test_loss)" \
      -v c="$(field "$run/$m-cuda.log" averaged_model_test_acc)" -v d="$(field "$run/$m-cpu.log" averaged_model_test_acc)" \
      'BEGIN { bad = a == "" || b == "" || (a - b > 0.02 * b || b - a > 0.02 * b) || (c - d > 0.02 || d - c > 0.02); exit bad }' ||
    fail "$m trained on the GPU does not match the CPU run of the same YAML"
done

torch_cuda=0
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_cuda=1
value() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }  # the figure after its name
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

echo "== throughput of the layer models on the GPU beside PyTorch on the same GPU and this machine's CPU backend (medians of 3)"
echo "| model | batch | unit | gossip CUDA | PyTorch CUDA | gossip / PyTorch | gossip CPU ($jobs threads) | CUDA / CPU |"
echo "|---|---|---|---|---|---|---|---|"
for cfg in "lenet 256 samples/s" "resnet 256 samples/s" "gpt 32 tokens/s"; do
  set -- $cfg
  g=$(for _ in 1 2 3; do "$bin/train_bench" --device cuda --model "$1" --batch "$2" --steps 50 | value "$3"; done | median) ||
    { fail "train_bench --device cuda --model $1"; g=0; }
  t=n/a
  [[ $torch_cuda == 0 ]] ||
    t=$(for _ in 1 2 3; do python3 bench/model_torch.py --device cuda --model "$1" --batch "$2" --steps 50 | awk '{print $NF}'; done | median) || t=n/a
  c=$("$bin/train_bench" --device cpu --threads "$jobs" --model "$1" --batch "$2" --steps 5 | value "$3") || c=0
  echo "| $1 | $2 | $3 | $g | $t | $(ratio "$g" "$t") | $c | $(ratio "$g" "$c") |"
done

echo "== samples/s, 784-1024-1024-10 (medians of 3)"
sps() { value samples/s; }
echo "| batch | gossip CUDA | PyTorch CUDA | gossip / PyTorch | gossip CPU ($jobs threads) | CUDA / CPU | host->device MB/step |"
echo "|---|---|---|---|---|---|---|"
for b in 256 1024; do
  g=$(for _ in 1 2 3; do "$bin/train_bench" --device cuda --dims 784,1024,1024,10 --batch $b --steps 2000 | tee -a "$run/mlp-bench" | sps; done | median) ||
    { fail "train_bench --device cuda --dims 784,1024,1024,10"; g=0; }
  h=$(tail -n 1 "$run/mlp-bench" 2>/dev/null | value h2d_MB_per_step)
  t=n/a
  [[ $torch_cuda == 0 ]] ||
    t=$(for _ in 1 2 3; do python3 bench/train_torch.py --device cuda --dims 784,1024,1024,10 --batch $b --steps 2000 | sps; done | median) || t=n/a
  c=$("$bin/train_bench" --device cpu --threads "$jobs" --dims 784,1024,1024,10 --batch $b --steps 50 | sps) || c=0
  echo "| $b | $g | $t | $(ratio "$g" "$t") | $c | $(ratio "$g" "$c") | ${h:-n/a} |"
done

if (( ${#failed[@]} )); then
  printf 'bench/gpu.sh: %d check(s) failed:\n' "${#failed[@]}" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "bench/gpu.sh: every check passed"
