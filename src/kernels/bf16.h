// bfloat16: the top 16 bits of a float32 (same exponent range, 8 bits of mantissa). Gossip and
// push-sum can send their values in it (algorithm.wire: bf16) to halve the bytes on the wire. The
// values are rounded on the host, where they are sent from; the gossip mix widens them in either
// backend (Backend::mix_span; the CUDA kernels round with the same bf16_bits, bit for bit).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "kernels/bf16_bits.h"

namespace gossip::kernels {

// Round to nearest, ties to even (bf16_bits.h).
inline uint16_t to_bf16(float f) { return bf16_bits(std::bit_cast<uint32_t>(f)); }

// Exact.
inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// out[i] = to_bf16(x[i]) (vectorised).
void to_bf16(const float* x, uint16_t* out, size_t n);

}  // namespace gossip::kernels
