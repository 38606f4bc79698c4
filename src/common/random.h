// SplitMix64 (Steele et al. 2014): a portable, well-mixed 64-bit stream from one state, and the
// same mix as a hash. Everything the peers must draw identically (random matchings, random-k's
// indices, sketches) draws from it, so no two standard libraries can disagree.
#pragma once

#include <cstdint>

namespace gossip {

// The next value of the stream whose state is `state` (advanced).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A hash of `z` (the stream's first value from state z).
inline uint64_t splitmix64_hash(uint64_t z) { return splitmix64(z); }

// A uniform float in [0, 1) from the top 24 bits of a draw.
inline float unit_float(uint64_t draw) { return static_cast<float>(draw >> 40) * (1.0f / 16777216.0f); }

}  // namespace gossip
