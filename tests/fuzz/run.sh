#!/usr/bin/env bash
# Builds the libFuzzer target (clang, -fsanitize=fuzzer,address,undefined) over the wire-message
# decoder and the control-request parser, and fuzzes for SECONDS (default 120) starting from, and
# adding to, tests/fuzz/corpus. Usage: tests/fuzz/run.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-120}
command -v clang++ >/dev/null || { echo "installing clang"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }
mkdir -p build/fuzz
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc -Itests/fuzz \
  tests/fuzz/wire_fuzz.cc tests/fuzz/fuzz_targets.cc src/wire/wire_format.cc src/algorithms/compressor.cc src/control/control.cc \
  src/control/control_client.cc src/membership/view_text.cc src/control/sketch.cc src/topology/topology.cc src/common/error.cc src/common/log.cc \
  src/common/endpoint.cc src/transport/zmq/frames.cc \
  $(pkg-config --cflags --libs libzmq) -o build/fuzz/wire_fuzz
mkdir -p build/fuzz/new
build/fuzz/wire_fuzz -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 build/fuzz/new tests/fuzz/corpus
# Keep the corpus small: merge what was found into a minimal set covering the same edges.
build/fuzz/wire_fuzz -merge=1 tests/fuzz/corpus build/fuzz/new >/dev/null 2>&1
echo "corpus: $(ls tests/fuzz/corpus | wc -l) files"
