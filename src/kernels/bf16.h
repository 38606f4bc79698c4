// bfloat16: the top 16 bits of a float32 (same exponent range, 8 bits of mantissa). Gossip and
// push-sum can send their values in it (algorithm.wire: bf16) to halve the bytes on the wire. The
// values are rounded on the host, where they are sent from; the gossip mix widens them in either
// backend (Backend::mix_span; the CUDA kernel rounds as to_bf16 does, bit for bit).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace gossip::kernels {

// Round to nearest, ties to even; NaN stays a (quiet) NaN, a finite value beyond bf16's largest
// rounds to ±Inf as IEEE rounding does.
inline uint16_t to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((nan ? u | 0x00400000u : rounded) >> 16);
}

// Exact.
inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// out[i] = to_bf16(x[i]) (vectorised).
void to_bf16(const float* x, uint16_t* out, size_t n);

}  // namespace gossip::kernels
