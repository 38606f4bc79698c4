#include "kernels/cpu_layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/cpu_features.h"

namespace gossip::kernels {

namespace {
constexpr float kNormEps = 1e-5f;  // LayerNorm's and GroupNorm's ε (PyTorch's default)

// The output columns [lo, hi) of kernel column kj whose input column ow·stride − pad + kj lies
// inside [0, w): the others read the zero padding.
void valid_columns(const ConvShape& s, int kj, int* lo, int* hi) {
  const int first = s.pad - kj, end = s.w + s.pad - kj;  // first ≤ ow·stride < end
  *lo = first <= 0 ? 0 : (first + s.stride - 1) / s.stride;
  *hi = end <= 0 ? 0 : std::min(s.out_w(), (end + s.stride - 1) / s.stride);
  *hi = std::max(*hi, *lo);
}

// The rows of im2col and col2im are short (a LeNet row is 14 or 28 floats): plain loops, not
// memset/memcpy calls, which cost more than the copy at these lengths (perf: 7 % of a LeNet step).
// GCC would turn the loops back into those calls; the attribute keeps them loops.
#if defined(__GNUC__) && !defined(__clang__)
#define GOSSIP_INLINE_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define GOSSIP_INLINE_LOOPS
#endif

// col[(c·k + ki)·k + kj][oh·out_w + ow] = x[c][oh·stride − pad + ki][ow·stride − pad + kj] (0 outside).
GOSSIP_INLINE_LOOPS void im2col(const ConvShape& s, const float* x, float* col) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (int c = 0; c < s.in_c; ++c)
    for (int ki = 0; ki < s.k; ++ki)
      for (int kj = 0; kj < s.k; ++kj) {
        float* row = col + size_t((c * s.k + ki) * s.k + kj) * oh_n * ow_n;
        int lo, hi;
        valid_columns(s, kj, &lo, &hi);
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * s.stride - s.pad + ki;
          float* out = row + size_t(oh) * ow_n;
          if (ih < 0 || ih >= s.h || lo == hi) {
            for (int ow = 0; ow < ow_n; ++ow) out[ow] = 0.0f;
            continue;
          }
          const float* in = x + (size_t(c) * s.h + ih) * s.w + (lo * s.stride - s.pad + kj);
          for (int ow = 0; ow < lo; ++ow) out[ow] = 0.0f;
          if (s.stride == 1) {
            for (int ow = lo; ow < hi; ++ow) out[ow] = in[ow - lo];
          } else {
            for (int ow = lo; ow < hi; ++ow) out[ow] = in[(ow - lo) * s.stride];
          }
          for (int ow = hi; ow < ow_n; ++ow) out[ow] = 0.0f;
        }
      }
}

// The adjoint of im2col: dx[c][ih][iw] += every col entry that im2col read from there.
GOSSIP_INLINE_LOOPS void col2im_add(const ConvShape& s, const float* col, float* dx) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (int c = 0; c < s.in_c; ++c)
    for (int ki = 0; ki < s.k; ++ki)
      for (int kj = 0; kj < s.k; ++kj) {
        const float* row = col + size_t((c * s.k + ki) * s.k + kj) * oh_n * ow_n;
        int lo, hi;
        valid_columns(s, kj, &lo, &hi);
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h || lo == hi) continue;
          float* out = dx + (size_t(c) * s.h + ih) * s.w + (lo * s.stride - s.pad + kj);
          const float* in = row + size_t(oh) * ow_n;
          if (s.stride == 1) {  // contiguous: vectorises
            for (int ow = lo; ow < hi; ++ow) out[ow - lo] += in[ow];
          } else {
            for (int ow = lo; ow < hi; ++ow) out[(ow - lo) * s.stride] += in[ow];
          }
        }
      }
}

// Mean and 1/√(var + ε) of n values.
void moments(const float* x, size_t n, float* mean, float* rstd) {
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  const double m = sum / double(n);
  for (size_t i = 0; i < n; ++i) sq += (x[i] - m) * (x[i] - m);
  *mean = float(m);
  *rstd = float(1.0 / std::sqrt(sq / double(n) + kNormEps));
}

constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)

// tanh as Eigen's rational approximation for float (odd degree-13 over even degree-6 polynomial,
// inputs clamped to ±7.9988 where tanh rounds to ±1; within 4e-7 of tanh, NaN stays NaN).
// Branch-free, so the GELU loops vectorise: libm's tanhf was a quarter of a GPT step.
[[gnu::always_inline]] inline float fast_tanh(float x) {
  const float c = 7.99881172180175781f;
  x = x < -c ? -c : x;  // (NaN compares false and stays NaN)
  x = x > c ? c : x;
  const float x2 = x * x;
  float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = x2 * p + -8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  return x * p / q;
}

// GELU's loops, compiled twice (plain and AVX2, dispatched by hand as in common/cpu_features.h).
// Without FMA: both variants round exactly alike, so results do not depend on the machine's ISA.
[[gnu::always_inline]] inline void gelu_forward_body(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + fast_tanh(kGeluScale * (v + 0.044715f * v * v * v)));
  }
}

[[gnu::always_inline]] inline void gelu_backward_add_body(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = fast_tanh(kGeluScale * (v + 0.044715f * v * v * v));
    const float sech2 = 1.0f - t * t;
    const float local = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] += local * dy[i];
  }
}

#ifdef GOSSIP_TARGET_AVX2
GOSSIP_TARGET_AVX2 void gelu_forward_avx2(const float* x, float* y, size_t n) { gelu_forward_body(x, y, n); }
GOSSIP_TARGET_AVX2 void gelu_backward_add_avx2(const float* x, const float* dy, float* dx, size_t n) {
  gelu_backward_add_body(x, dy, dx, n);
}
#endif
}  // namespace

size_t CpuLayers::conv2d_workspace(const ConvShape& s) const {
  return s.im2col_floats();
}

void CpuLayers::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                               float* workspace) {
  const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
  for (int n = 0; n < s.batch; ++n) {
    const float* xn = x + size_t(n) * s.in_c * s.h * s.w;
    float* yn = y + size_t(n) * s.out_c * plane;
    const float* col = xn;
    if (!s.pointwise()) {
      im2col(s, xn, workspace);
      col = workspace;
    }
    // y_n[out_c][plane] = W[out_c][patch] · col[patch][plane]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.out_c, plane, patch, 1.0f, w, patch, col, plane, 0.0f,
                yn, plane);
    if (b)
      for (int c = 0; c < s.out_c; ++c) {
        float* row = yn + size_t(c) * plane;
        for (int i = 0; i < plane; ++i) row[i] += b[c];
      }
  }
}

void CpuLayers::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                float* dw, float* db, float* workspace) {
  const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
  for (int n = 0; n < s.batch; ++n) {
    const float* xn = x + size_t(n) * s.in_c * s.h * s.w;
    const float* dyn = dy + size_t(n) * s.out_c * plane;
    if (db)
      for (int c = 0; c < s.out_c; ++c) {
        const float* row = dyn + size_t(c) * plane;
        float sum = 0;
        for (int i = 0; i < plane; ++i) sum += row[i];
        db[c] += sum;
      }
    const bool pointwise = s.pointwise();
    const float* col = xn;
    if (!pointwise) {
      im2col(s, xn, workspace);
      col = workspace;
    }
    // dW[out_c][patch] += dy_n[out_c][plane] · col[patch][plane]ᵀ
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.out_c, patch, plane, 1.0f, dyn, plane, col, plane, 1.0f,
                dw, patch);
    if (!dx) continue;
    float* dxn = dx + size_t(n) * s.in_c * s.h * s.w;
    // dcol[patch][plane] = Wᵀ · dy_n, folded back onto the input (pointwise: straight into dx).
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, plane, s.out_c, 1.0f, w, patch, dyn, plane,
                pointwise ? 1.0f : 0.0f, pointwise ? dxn : workspace, plane);
    if (!pointwise) col2im_add(s, workspace, dxn);
  }
}

void CpuLayers::relu_forward(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v <= 0.0f ? 0.0f : v;  // NaN compares false: it stays NaN
  }
}

void CpuLayers::relu_backward_add(const float* y, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = dy[i];  // loaded unconditionally, so the loop vectorises (a select, no branch)
    dx[i] += y[i] > 0.0f ? g : 0.0f;
  }
}

void CpuLayers::gelu_forward(const float* x, float* y, size_t n) {
#ifdef GOSSIP_TARGET_AVX2
  if (cpu_has_avx2()) return gelu_forward_avx2(x, y, n);
#endif
  gelu_forward_body(x, y, n);
}

void CpuLayers::gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) {
#ifdef GOSSIP_TARGET_AVX2
  if (cpu_has_avx2()) return gelu_backward_add_avx2(x, dy, dx, n);
#endif
  gelu_backward_add_body(x, dy, dx, n);
}

void CpuLayers::add_forward(const float* a, const float* b, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void CpuLayers::column_sum_add(const float* dy, float* db, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + size_t(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

void CpuLayers::layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                  float* rstd, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* in = x + size_t(r) * cols;
    float* out = y + size_t(r) * cols;
    moments(in, cols, &mean[r], &rstd[r]);
    const float m = mean[r], s = rstd[r];
    for (int c = 0; c < cols; ++c) out[c] = (in[c] - m) * s * gamma[c] + beta[c];
  }
}

void CpuLayers::layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                   const float* dy, float* dx, float* dgamma, float* dbeta, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* in = x + size_t(r) * cols;
    const float* g = dy + size_t(r) * cols;
    const float m = mean[r], s = rstd[r];
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < cols; ++c) {
      const float norm = (in[c] - m) * s, dnorm = g[c] * gamma[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += double(dnorm) * norm;
      dgamma[c] += norm * g[c];
      dbeta[c] += g[c];
    }
    dnorm_mean /= cols;
    dnorm_norm_mean /= cols;
    if (!dx) continue;
    float* out = dx + size_t(r) * cols;
    for (int c = 0; c < cols; ++c) {
      const float norm = (in[c] - m) * s;
      out[c] += float((g[c] * gamma[c] - dnorm_mean - norm * dnorm_norm_mean) * s);
    }
  }
}

void CpuLayers::groupnorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                  float* rstd, int batch, int c, int plane, int groups) {
  const int per_group = c / groups;
  const size_t group_size = size_t(per_group) * plane;
  for (int n = 0; n < batch; ++n)
    for (int g = 0; g < groups; ++g) {
      const size_t at = (size_t(n) * c + size_t(g) * per_group) * plane;
      const size_t mg = size_t(n) * groups + g;
      moments(x + at, group_size, &mean[mg], &rstd[mg]);
      for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
        const float* in = x + (size_t(n) * c + ch) * plane;
        float* out = y + (size_t(n) * c + ch) * plane;
        const float a = rstd[mg] * gamma[ch], b = beta[ch] - mean[mg] * a;
        for (int i = 0; i < plane; ++i) out[i] = in[i] * a + b;
      }
    }
}

void CpuLayers::groupnorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                   const float* dy, float* dx, float* dgamma, float* dbeta, int batch, int c,
                                   int plane, int groups) {
  const int per_group = c / groups;
  const double group_size = double(per_group) * plane;
  for (int n = 0; n < batch; ++n)
    for (int g = 0; g < groups; ++g) {
      const size_t mg = size_t(n) * groups + g;
      const float m = mean[mg], s = rstd[mg];
      double dnorm_mean = 0, dnorm_norm_mean = 0;
      for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
        const float* in = x + (size_t(n) * c + ch) * plane;
        const float* d = dy + (size_t(n) * c + ch) * plane;
        double dg = 0, db = 0;
        for (int i = 0; i < plane; ++i) {
          const float norm = (in[i] - m) * s;
          dnorm_mean += double(d[i]) * gamma[ch];
          dnorm_norm_mean += double(d[i]) * gamma[ch] * norm;
          dg += double(d[i]) * norm;
          db += d[i];
        }
        dgamma[ch] += float(dg);
        dbeta[ch] += float(db);
      }
      if (!dx) continue;
      dnorm_mean /= group_size;
      dnorm_norm_mean /= group_size;
      for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
        const float* in = x + (size_t(n) * c + ch) * plane;
        const float* d = dy + (size_t(n) * c + ch) * plane;
        float* out = dx + (size_t(n) * c + ch) * plane;
        for (int i = 0; i < plane; ++i) {
          const float norm = (in[i] - m) * s;
          out[i] += float((d[i] * gamma[ch] - dnorm_mean - norm * dnorm_norm_mean) * s);
        }
      }
    }
}

void CpuLayers::embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch,
                                  int t, int dim) {
  for (int n = 0; n < batch; ++n)
    for (int p = 0; p < t; ++p) {
      const float* e = wte + size_t(tokens[size_t(n) * t + p]) * dim;
      const float* pe = wpe + size_t(p) * dim;
      float* out = y + (size_t(n) * t + p) * dim;
      for (int i = 0; i < dim; ++i) out[i] = e[i] + pe[i];
    }
}

void CpuLayers::embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch,
                                   int t, int dim) {
  for (int n = 0; n < batch; ++n)
    for (int p = 0; p < t; ++p) {
      const float* g = dy + (size_t(n) * t + p) * dim;
      float* de = dwte + size_t(tokens[size_t(n) * t + p]) * dim;
      float* dpe = dwpe + size_t(p) * dim;
      for (int i = 0; i < dim; ++i) {
        de[i] += g[i];
        dpe[i] += g[i];
      }
    }
}

// Per (sample, head), with the rows of q, k and v read in place from qkv (row stride 3·dim):
// S = q·kᵀ/√hs by sgemm, a causal softmax row by row (entries t2 > t are 0), out = P·v by sgemm.
void CpuLayers::attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att) {
  const int hs = s.dim / s.heads, row = 3 * s.dim;
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h) {
      const float* q = qkv + size_t(n) * s.t * row + h * hs;
      float* a = att + (size_t(n) * s.heads + h) * s.t * s.t;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.t, s.t, hs, scale, q, row, q + s.dim, row, 0.0f, a,
                  s.t);
      for (int t = 0; t < s.t; ++t) {
        float* r = a + size_t(t) * s.t;
        const float top = *std::max_element(r, r + t + 1);
        double sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += (r[t2] = std::exp(r[t2] - top));
        const float inv = float(1.0 / sum);
        for (int t2 = 0; t2 <= t; ++t2) r[t2] *= inv;
        std::fill(r + t + 1, r + s.t, 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.t, hs, s.t, 1.0f, a, s.t, q + 2 * s.dim, row, 0.0f,
                  out + size_t(n) * s.t * s.dim + h * hs, s.dim);
    }
}

// dP = dout·vᵀ; dv += Pᵀ·dout; dS = P ⊙ (dP − rowsum(P ⊙ dP))·scale (0 where P is masked);
// dq += dS·k; dk += dSᵀ·q — five sgemms per (sample, head) and one pass over the T×T scores.
void CpuLayers::attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout,
                                   float* dqkv) {
  const int hs = s.dim / s.heads, row = 3 * s.dim;
  const float scale = 1.0f / std::sqrt(float(hs));
  scores_.resize(size_t(s.t) * s.t);
  float* ds = scores_.data();
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h) {
      const size_t at = size_t(n) * s.t * row + h * hs;  // q of (n, h) at qkv + at, k at + dim, v at + 2·dim
      const float* a = att + (size_t(n) * s.heads + h) * s.t * s.t;
      const float* go = dout + size_t(n) * s.t * s.dim + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.t, s.t, hs, 1.0f, go, s.dim, qkv + at + 2 * s.dim, row,
                  0.0f, ds, s.t);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.t, hs, s.t, 1.0f, a, s.t, go, s.dim, 1.0f,
                  dqkv + at + 2 * s.dim, row);
      for (int t = 0; t < s.t; ++t) {
        const float* p = a + size_t(t) * s.t;
        float* d = ds + size_t(t) * s.t;
        double weighted = 0;
        for (int t2 = 0; t2 <= t; ++t2) weighted += double(p[t2]) * d[t2];
        for (int t2 = 0; t2 <= t; ++t2) d[t2] = p[t2] * (d[t2] - float(weighted)) * scale;
        std::fill(d + t + 1, d + s.t, 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.t, hs, s.t, 1.0f, ds, s.t, qkv + at + s.dim, row, 1.0f,
                  dqkv + at, row);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.t, hs, s.t, 1.0f, ds, s.t, qkv + at, row, 1.0f,
                  dqkv + at + s.dim, row);
    }
}

}  // namespace gossip::kernels
