// Test values for kernels that promise bit-exact arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gossip::testing {

// Values of both signs spread over 2^-12..2^12, so products and sums round at every exponent.
inline std::vector<float> spread_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

}  // namespace gossip::testing
