#include "kernels/bf16.h"

#include "common/cpu_features.h"

namespace gossip::kernels {
namespace {

__attribute__((always_inline)) inline void to_bf16_body(const float* __restrict x, uint16_t* __restrict out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}

#if defined(__x86_64__)  // see common/cpu_features.h
GOSSIP_TARGET_AVX2 void to_bf16_avx2(const float* x, uint16_t* out, size_t n) { to_bf16_body(x, out, n); }
#endif

}  // namespace

void to_bf16(const float* x, uint16_t* out, size_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return to_bf16_avx2(x, out, n);
#endif
  to_bf16_body(x, out, n);
}

}  // namespace gossip::kernels
