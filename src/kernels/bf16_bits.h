// bfloat16 rounding on a float's bits, in C++17 for both compilers: the host's to_bf16
// (kernels/bf16.h) and the CUDA kernels' Q(x) (cuda_kernels.cu) are this one function, so the two
// backends round alike, bit for bit.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GOSSIP_HOST_DEVICE __host__ __device__
#else
#define GOSSIP_HOST_DEVICE
#endif

namespace gossip::kernels {

// The bf16 bits of the float whose bits are u: round to nearest, ties to even; NaN stays a
// (quiet) NaN, a finite value beyond bf16's largest rounds to ±Inf as IEEE rounding does.
GOSSIP_HOST_DEVICE inline uint16_t bf16_bits(uint32_t u) {
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((nan ? u | 0x00400000u : rounded) >> 16);
}

}  // namespace gossip::kernels
