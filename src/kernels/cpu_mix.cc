// The CPU reference of Backend::mix_span: the gossip fold, vectorised (AVX2 where the CPU has it)
// with one fused loop for each common degree. A neighbour's value feeds both the scan and the mix
// from one read; for values that may change meanwhile (MixSpan::snapshot) that one read is made
// explicit (mix_snapshot_avx2), so it does not rest on how the compiler schedules its loads.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
constexpr size_t kBlock = 4096;

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
  for (size_t begin = 0; begin < m.n; begin += kBlock) {
    const size_t n = std::min(m.n - begin, kBlock);
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

// 8 of a neighbour's values, loaded once: the empty asm tells the compiler the register may hold
// anything after it, so the scan and the mix both use this one load (or a spill of it) and no
// second read of the region can take its place.
template <bool kBf16>
GOSSIP_TARGET_AVX2 inline __m256 load_once(const void* p, size_t j) {
  if constexpr (kBf16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + j));
    asm volatile("" : "+x"(h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    __m256 v = _mm256_loadu_ps(static_cast<const float*>(p) + j);
    asm volatile("" : "+x"(v));
    return v;
  }
}
template <bool kBf16>
GOSSIP_TARGET_AVX2 inline float load_one(const void* p, size_t j) {
  if constexpr (kBf16) {
    uint32_t h = static_cast<const uint16_t*>(p)[j];
    asm volatile("" : "+r"(h));
    return std::bit_cast<float>(h << 16);
  } else {
    float v = static_cast<const float*>(p)[j];
    asm volatile("" : "+x"(v));
    return v;
  }
}
GOSSIP_TARGET_AVX2 inline float sum8(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float s = 0;
  for (float f : lanes) s += f;
  return s;
}

// One neighbour's scan over a block, in vectors and a scalar tail.
struct LaneScan {
  __m256 sq;
  __m256i bad;
  float sq_tail;
  uint32_t bad_tail;
};

// One pass of a snapshot fold over the block [begin, begin + n): y = (kFirst ? our share : y) +
// Σ w_k·v_k over neighbours k, k + kCount (kCount ≤ 2), each value loaded once (load_once) and
// feeding both its scan and the mix. Returns Σ x² over the block when kFirst.
template <bool kBf16, bool kFirst, int kCount>
GOSSIP_TARGET_AVX2 inline float snapshot_pass(const MixSpan& m, size_t begin, size_t n, size_t k) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000), unit = _mm256_set1_epi32(0x00800000);
  const float* x = m.src + begin;
  float* y = m.dst + begin;
  const uint16_t* own = kBf16 ? m.own + begin : nullptr;
  const void* a[2] = {};
  float w[2] = {};
  LaneScan lane[2] = {};
  for (int i = 0; i < kCount; ++i) {  // a neighbour left out: Q(x) (bf16) or x stands in
    const void* v = m.values[k + i];
    a[i] = v ? static_cast<const char*>(v) + begin * (kBf16 ? 2 : 4)
             : kBf16 ? static_cast<const void*>(own) : static_cast<const void*>(x);
    w[i] = m.weights[k + i];
  }
  __m256 sq = _mm256_setzero_ps();
  float sq_tail = 0;
  const size_t vec = n & ~size_t(7);
  for (size_t j = 0; j < vec; j += 8) {
    __m256 yv;
    if constexpr (kFirst) {  // our share (bf16: x − rest·Q(x), Q(x) = own), Σ x²
      const __m256 xv = _mm256_loadu_ps(x + j);
      yv = kBf16 ? _mm256_sub_ps(xv, _mm256_mul_ps(_mm256_set1_ps(m.rest), load_once<true>(own, j)))
                 : _mm256_mul_ps(_mm256_set1_ps(m.self), xv);
      sq = _mm256_add_ps(sq, _mm256_mul_ps(xv, xv));
    } else {
      yv = _mm256_loadu_ps(y + j);
    }
    for (int i = 0; i < kCount; ++i) {
      const __m256 v = load_once<kBf16>(a[i], j);
      yv = _mm256_add_ps(yv, _mm256_mul_ps(_mm256_set1_ps(w[i]), v));
      lane[i].sq = _mm256_add_ps(lane[i].sq, _mm256_mul_ps(v, v));
      lane[i].bad = _mm256_or_si256(lane[i].bad, _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(v), exponent), unit));
    }
    _mm256_storeu_ps(y + j, yv);
  }
  for (size_t j = vec; j < n; ++j) {
    float yj;
    if constexpr (kFirst) {
      yj = kBf16 ? x[j] - m.rest * load_one<true>(own, j) : m.self * x[j];
      sq_tail += x[j] * x[j];
    } else {
      yj = y[j];
    }
    for (int i = 0; i < kCount; ++i) {
      const float v = load_one<kBf16>(a[i], j);
      yj = yj + w[i] * v;
      lane[i].sq_tail += v * v;
      lane[i].bad_tail |= nonfinite_bit(v);
    }
    y[j] = yj;
  }
  for (int i = 0; i < kCount; ++i) {
    const bool bad = _mm256_movemask_ps(_mm256_castsi256_ps(lane[i].bad)) != 0;
    add_block(m.scans[k + i], sum8(lane[i].sq) + lane[i].sq_tail, lane[i].bad_tail | (bad ? 0x80000000u : 0));
  }
  return sum8(sq) + sq_tail;
}

// The fold with its scan for values that may change while read (MixSpan::snapshot): the same
// products and sums in the same order as mix_body (so the same bits), two neighbours per pass.
template <bool kBf16>
GOSSIP_TARGET_AVX2 double mix_snapshot_avx2(const MixSpan& m) {
  double total = 0;
  for (size_t begin = 0; begin < m.n; begin += kBlock) {
    const size_t n = std::min(m.n - begin, kBlock), first = std::min<size_t>(m.degree, 2);
    total += first == 0   ? snapshot_pass<kBf16, true, 0>(m, begin, n, 0)
             : first == 1 ? snapshot_pass<kBf16, true, 1>(m, begin, n, 0)
                          : snapshot_pass<kBf16, true, 2>(m, begin, n, 0);
    for (size_t k = first; k < m.degree; k += 2) {
      if (m.degree - k >= 2) snapshot_pass<kBf16, false, 2>(m, begin, n, k);
      else snapshot_pass<kBf16, false, 1>(m, begin, n, k);
    }
  }
  return total;
}
#endif

template <bool kNorm, bool kCheck, bool kBf16>
double mix(const MixSpan& m) {
#if defined(__x86_64__)
  if constexpr (kCheck)
    if (m.snapshot && cpu_has_avx2()) return mix_snapshot_avx2<kBf16>(m);
  if (cpu_has_avx2()) return mix_avx2<kNorm, kCheck, kBf16>(m);
#endif
  return mix_body<kNorm, kCheck, kBf16>(m);  // (a snapshot here rests on the compiler's single load)
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
