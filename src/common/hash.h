// FNV-1a (64-bit) over bytes: a cheap fingerprint where collisions only cost a clear error or a
// cache miss (the data cache's entry names, the run's shared-settings digest), not a security check.
#pragma once

#include <cstdint>
#include <string_view>

namespace gossip {

inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace gossip
