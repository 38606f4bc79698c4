#include "kernels/bf16.h"

namespace gossip::kernels {
namespace {

__attribute__((always_inline)) inline void to_bf16_body(const float* __restrict x, uint16_t* __restrict out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}

// Dispatched by hand, not with target_clones: an ifunc resolver runs before ThreadSanitizer's
// runtime and crashes it (see wire_format.cc).
#if defined(__x86_64__)
__attribute__((target("avx2"))) void to_bf16_avx2(const float* x, uint16_t* out, size_t n) { to_bf16_body(x, out, n); }
const bool have_avx2 = __builtin_cpu_supports("avx2");
#endif

}  // namespace

void to_bf16(const float* x, uint16_t* out, size_t n) {
#if defined(__x86_64__)
  if (have_avx2) return to_bf16_avx2(x, out, n);
#endif
  to_bf16_body(x, out, n);
}

}  // namespace gossip::kernels
