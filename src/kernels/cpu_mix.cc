// The CPU reference of Backend::mix_span: the gossip fold, vectorised (AVX2 where the CPU has it)
// with one fused loop for each common degree. Every neighbour's value is read once per pass and
// feeds both the scan and the mix, the single read single copy's shared regions rely on.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/cpu_features.h"
#include "kernels/bf16.h"
#include "kernels/cpu_backend.h"

namespace gossip::kernels {
namespace {

template <typename Value>
inline float widen(Value v) {
  if constexpr (std::is_same_v<Value, uint16_t>) return from_bf16(v);
  else return v;
}

// What stays of our own value: self·x, or (bf16) x − rest·Q(x), Q(x) taken again here (the same
// rounding as what we sent) rather than read back.
template <bool kBf16>
inline float own_share(float self, float rest, float x) {
  if constexpr (kBf16) return x - rest * from_bf16(to_bf16(x));
  else return self * x;
}

// Bit 31 of the result is set exactly when v is NaN or ±Inf (its exponent bits plus one exponent
// unit carry out of them only when they were all ones); OR-ed over a block, as in the wire scan.
inline uint32_t nonfinite_bit(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return (bits & 0x7F800000u) + 0x00800000u;
}

// One neighbour's block sums, added to its scan.
inline void add_block(ValueScan& scan, float sq, uint32_t bad) {
  scan.sum_squares += sq;
  if (bad & 0x80000000u) scan.finite = false;
}

// Blocks of 4096 floats: float partial sums of squares per block, added up in double.
template <bool kNorm, bool kCheck, bool kBf16>
__attribute__((always_inline)) inline double mix_body(const MixSpan& m) {
  using Value = std::conditional_t<kBf16, uint16_t, float>;
  const float self = m.self, rest = m.rest;
  const size_t deg = m.degree;
  const float* w = m.weights;
  auto values = [&](size_t k, size_t begin) -> const Value* {
    if constexpr (kBf16) return (m.values[k] ? static_cast<const uint16_t*>(m.values[k]) : m.own) + begin;
    else return (m.values[k] ? static_cast<const float*>(m.values[k]) : m.src) + begin;
  };
  double total = 0;
  for (size_t begin = 0; begin < m.n; begin += 4096) {
    const size_t n = std::min(m.n - begin, size_t(4096));
    const float* __restrict x = m.src + begin;
    float* __restrict y = m.dst + begin;
    float sq = 0, sq0 = 0, sq1 = 0;
    uint32_t bad0 = 0, bad1 = 0;
    if (deg == 1) {
      const Value* __restrict a = values(0, begin);
      const float w0 = w[0];
#pragma omp simd reduction(+ : sq, sq0) reduction(| : bad0)
      for (size_t j = 0; j < n; ++j) {
        const float a0 = widen(a[j]);
        y[j] = own_share<kBf16>(self, rest, x[j]) + w0 * a0;
        if constexpr (kNorm) sq += x[j] * x[j];
        if constexpr (kCheck) sq0 += a0 * a0, bad0 |= nonfinite_bit(a0);
      }
      if constexpr (kCheck) add_block(m.scans[0], sq0, bad0);
    } else if (deg == 2) {
      const Value* __restrict a = values(0, begin);
      const Value* __restrict b = values(1, begin);
      const float w0 = w[0], w1 = w[1];
#pragma omp simd reduction(+ : sq, sq0, sq1) reduction(| : bad0, bad1)
      for (size_t j = 0; j < n; ++j) {
        const float a0 = widen(a[j]), b0 = widen(b[j]);
        y[j] = own_share<kBf16>(self, rest, x[j]) + w0 * a0 + w1 * b0;
        if constexpr (kNorm) sq += x[j] * x[j];
        if constexpr (kCheck) sq0 += a0 * a0, sq1 += b0 * b0, bad0 |= nonfinite_bit(a0), bad1 |= nonfinite_bit(b0);
      }
      if constexpr (kCheck) add_block(m.scans[0], sq0, bad0), add_block(m.scans[1], sq1, bad1);
    } else {
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = own_share<kBf16>(self, rest, x[j]);
        if constexpr (kNorm) sq += x[j] * x[j];
      }
      for (size_t k = 0; k < deg; ++k) {
        const Value* __restrict a = values(k, begin);
        const float wk = w[k];
        sq0 = 0, bad0 = 0;
#pragma omp simd reduction(+ : sq0) reduction(| : bad0)
        for (size_t j = 0; j < n; ++j) {
          const float a0 = widen(a[j]);
          y[j] += wk * a0;
          if constexpr (kCheck) sq0 += a0 * a0, bad0 |= nonfinite_bit(a0);
        }
        if constexpr (kCheck) add_block(m.scans[k], sq0, bad0);
      }
    }
    total += sq;
  }
  return total;
}

// AVX2 where the CPU has it (common/cpu_features.h): about 8 % off a bf16 round. Without FMA in
// the target, every value comes out as in the baseline build (and as on a device).
#if defined(__x86_64__)
template <bool kNorm, bool kCheck, bool kBf16>
GOSSIP_TARGET_AVX2 double mix_avx2(const MixSpan& m) {
  return mix_body<kNorm, kCheck, kBf16>(m);
}
#endif

template <bool kNorm, bool kCheck, bool kBf16>
double mix(const MixSpan& m) {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return mix_avx2<kNorm, kCheck, kBf16>(m);
#endif
  return mix_body<kNorm, kCheck, kBf16>(m);
}

}  // namespace

// A scan is taken with the norm (the caller that scans also screens outliers).
double CpuBackend::mix_span(const MixSpan& m) {
  if (m.scans) {
    const double ours = m.bf16 ? mix<true, true, true>(m) : mix<true, true, false>(m);
    return m.norm ? ours : 0;
  }
  if (m.bf16) return m.norm ? mix<true, false, true>(m) : mix<false, false, true>(m);
  return m.norm ? mix<true, false, false>(m) : mix<false, false, false>(m);
}

}  // namespace gossip::kernels
