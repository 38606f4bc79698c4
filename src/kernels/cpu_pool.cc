// CpuLayers' pooling kernels: max pooling (with a four-outputs-at-a-time path for the 2×2,
// stride-2 windows of the CNNs) and global average pooling.
#include <cmath>

#include "kernels/cpu_layers.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gossip::kernels {

namespace {
// The pooling rule everywhere: a candidate replaces the best so far when it is larger or NaN, so a
// diverging input shows in the output instead of being dropped and the first of equals stays.
inline bool takes_over(float candidate, float best) { return candidate > best || std::isnan(candidate); }

// maxpool2d_forward's common case, k = stride = 2, without the general loop nest. The same
// candidates in the same order and the same test (NaN wins, the first of equals stays), so the
// same argmax as the general loop.
void maxpool2x2_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.c; ++p) {
    const float* in = x + p * s.h * s.w;
    for (int oh = 0; oh < oh_n; ++oh) {
      const int top = 2 * oh * s.w;
      float* out = y + (p * oh_n + oh) * ow_n;
      int32_t* arg = argmax + (p * oh_n + oh) * ow_n;
      const float* row0 = in + top;
      const float* row1 = row0 + s.w;
      int ow = 0;
#if defined(__SSE2__)
      // Four outputs at a time: the even and odd columns of both rows, then the scalar steps below
      // as masks (takes_over: greater or unordered, the NaN test).
      const __m128i step = _mm_set_epi32(6, 4, 2, 0);
      for (; ow + 4 <= ow_n; ow += 4) {
        const __m128 r0lo = _mm_loadu_ps(row0 + 2 * ow), r0hi = _mm_loadu_ps(row0 + 2 * ow + 4);
        const __m128 r1lo = _mm_loadu_ps(row1 + 2 * ow), r1hi = _mm_loadu_ps(row1 + 2 * ow + 4);
        const __m128 a = _mm_shuffle_ps(r0lo, r0hi, _MM_SHUFFLE(2, 0, 2, 0));
        const __m128 b = _mm_shuffle_ps(r0lo, r0hi, _MM_SHUFFLE(3, 1, 3, 1));
        const __m128 c = _mm_shuffle_ps(r1lo, r1hi, _MM_SHUFFLE(2, 0, 2, 0));
        const __m128 d = _mm_shuffle_ps(r1lo, r1hi, _MM_SHUFFLE(3, 1, 3, 1));
        const __m128i ia = _mm_add_epi32(_mm_set1_epi32(top + 2 * ow), step);
        __m128 v = a;
        __m128i best = ia;
        const auto take = [&](__m128 x, __m128i ix) {
          const __m128 m = _mm_or_ps(_mm_cmpgt_ps(x, v), _mm_cmpunord_ps(x, x));
          v = _mm_or_ps(_mm_and_ps(m, x), _mm_andnot_ps(m, v));
          const __m128i mi = _mm_castps_si128(m);
          best = _mm_or_si128(_mm_and_si128(mi, ix), _mm_andnot_si128(mi, best));
        };
        take(b, _mm_add_epi32(ia, _mm_set1_epi32(1)));
        take(c, _mm_add_epi32(ia, _mm_set1_epi32(s.w)));
        take(d, _mm_add_epi32(ia, _mm_set1_epi32(s.w + 1)));
        _mm_storeu_ps(out + ow, v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(arg + ow), best);
      }
#endif
      for (; ow < ow_n; ++ow) {
        const float cand[4] = {row0[2 * ow], row0[2 * ow + 1], row1[2 * ow], row1[2 * ow + 1]};
        const int at[4] = {top + 2 * ow, top + 2 * ow + 1, top + s.w + 2 * ow, top + s.w + 2 * ow + 1};
        float v = cand[0];
        int best = at[0];
        for (int j = 1; j < 4; ++j)
          if (takes_over(cand[j], v)) v = cand[j], best = at[j];
        out[ow] = v;
        arg[ow] = best;
      }
    }
  }
}
}  // namespace

void CpuLayers::maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  // 2×2 windows that lie inside the input (out = ⌊(h − 2)/2⌋ + 1 never reads past it).
  if (s.k == 2 && s.stride == 2) return maxpool2x2_forward(s, x, y, argmax);
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.c; ++p) {
    const float* in = x + p * s.h * s.w;
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        int best = (oh * s.stride) * s.w + ow * s.stride;
        for (int ki = 0; ki < s.k; ++ki)
          for (int kj = 0; kj < s.k; ++kj) {
            const int i = (oh * s.stride + ki) * s.w + ow * s.stride + kj;
            if (takes_over(in[i], in[best])) best = i;
          }
        const size_t o = (p * oh_n + oh) * ow_n + ow;
        y[o] = in[best];
        argmax[o] = best;
      }
  }
}

void CpuLayers::maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) {
  const size_t out_plane = size_t(s.out_h()) * s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.c; ++p)
    for (size_t o = 0; o < out_plane; ++o) dx[p * s.h * s.w + argmax[p * out_plane + o]] += dy[p * out_plane + o];
}

void CpuLayers::global_avgpool_forward(const float* x, float* y, int batch, int c, int plane) {
  for (size_t p = 0; p < size_t(batch) * c; ++p) {
    double sum = 0;
    for (int i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = float(sum / plane);
  }
}

void CpuLayers::global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane) {
  for (size_t p = 0; p < size_t(batch) * c; ++p) {
    const float g = dy[p] / float(plane);
    for (int i = 0; i < plane; ++i) dx[p * plane + i] += g;
  }
}

}  // namespace gossip::kernels
