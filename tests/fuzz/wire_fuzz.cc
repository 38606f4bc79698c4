// libFuzzer entry point; built and run by tests/fuzz/run.sh with clang.
#include <cstddef>
#include <cstdint>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gossip::fuzz::fuzz_one(data, size);
  return 0;
}
