// The fuzzed entry points, shared by the libFuzzer binary (run.sh) and the corpus replay test.
// Byte 0 picks the target: even = the wire-message decoder (64-byte header frame, then payload),
// 1 mod 4 = the control-request parser (byte 1 = operation, the rest = request text), 3 mod 4 =
// the membership texts (byte 1 even: a view-change proposal, odd: a welcome).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gossip::fuzz {

void fuzz_one(const uint8_t* data, size_t size);

}  // namespace gossip::fuzz
