#include "kernels/cpu_layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gossip::kernels {

namespace {
constexpr float kNormEps = 1e-5f;  // LayerNorm's and GroupNorm's ε (PyTorch's default)

// col[(c·k + ki)·k + kj][oh·out_w + ow] = x[c][oh·stride − pad + ki][ow·stride − pad + kj] (0 outside).
void im2col(const ConvShape& s, const float* x, float* col) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (int c = 0; c < s.in_c; ++c)
    for (int ki = 0; ki < s.k; ++ki)
      for (int kj = 0; kj < s.k; ++kj) {
        float* row = col + size_t((c * s.k + ki) * s.k + kj) * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * s.stride - s.pad + ki;
          float* out = row + size_t(oh) * ow_n;
          if (ih < 0 || ih >= s.h) {
            std::fill(out, out + ow_n, 0.0f);
            continue;
          }
          const float* in = x + (size_t(c) * s.h + ih) * s.w;
          for (int ow = 0; ow < ow_n; ++ow) {
            const int iw = ow * s.stride - s.pad + kj;
            out[ow] = iw >= 0 && iw < s.w ? in[iw] : 0.0f;
          }
        }
      }
}

// The adjoint of im2col: dx[c][ih][iw] += every col entry that im2col read from there.
void col2im_add(const ConvShape& s, const float* col, float* dx) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (int c = 0; c < s.in_c; ++c)
    for (int ki = 0; ki < s.k; ++ki)
      for (int kj = 0; kj < s.k; ++kj) {
        const float* row = col + size_t((c * s.k + ki) * s.k + kj) * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h) continue;
          float* out = dx + (size_t(c) * s.h + ih) * s.w;
          const float* in = row + size_t(oh) * ow_n;
          for (int ow = 0; ow < ow_n; ++ow) {
            const int iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w) out[iw] += in[ow];
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

void CpuLayers::maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.c; ++p) {
    const float* in = x + p * s.h * s.w;
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        int best = (oh * s.stride) * s.w + ow * s.stride;
        for (int ki = 0; ki < s.k; ++ki)
          for (int kj = 0; kj < s.k; ++kj) {
            const int i = (oh * s.stride + ki) * s.w + ow * s.stride + kj;
            // NaN wins, so a diverging input shows in the output instead of being dropped.
            if (in[i] > in[best] || std::isnan(in[i])) best = i;
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

void CpuLayers::relu_forward(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f || std::isnan(x[i]) ? x[i] : 0.0f;  // NaN stays NaN
}

void CpuLayers::relu_backward_add(const float* y, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}

void CpuLayers::gelu_forward(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kGeluScale * (v + 0.044715f * v * v * v)));
  }
}

void CpuLayers::gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kGeluScale * (v + 0.044715f * v * v * v));
    const float sech2 = 1.0f - t * t;
    const float local = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] += local * dy[i];
  }
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

void CpuLayers::attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att) {
  const int hs = s.dim / s.heads, row = 3 * s.dim;
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h)
      for (int t = 0; t < s.t; ++t) {
        const float* q = qkv + (size_t(n) * s.t + t) * row + h * hs;
        float* a = att + ((size_t(n) * s.heads + h) * s.t + t) * s.t;
        float top = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (size_t(n) * s.t + t2) * row + s.dim + h * hs;
          float dot = 0;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          a[t2] = dot * scale;
          top = std::max(top, a[t2]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += (a[t2] = std::exp(a[t2] - top));
        const float inv = float(1.0 / sum);
        for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
        std::fill(a + t + 1, a + s.t, 0.0f);
        float* o = out + (size_t(n) * s.t + t) * s.dim + h * hs;
        std::fill(o, o + hs, 0.0f);
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (size_t(n) * s.t + t2) * row + 2 * s.dim + h * hs;
          for (int i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
        }
      }
}

void CpuLayers::attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout,
                                   float* dqkv) {
  const int hs = s.dim / s.heads, row = 3 * s.dim;
  const float scale = 1.0f / std::sqrt(float(hs));
  std::vector<float> datt(s.t);
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h)
      for (int t = 0; t < s.t; ++t) {
        const size_t qrow = (size_t(n) * s.t + t) * row + h * hs;
        const float* a = att + ((size_t(n) * s.heads + h) * s.t + t) * s.t;
        const float* go = dout + (size_t(n) * s.t + t) * s.dim + h * hs;
        double weighted = 0;  // Σ a·datt, for the softmax's backward pass
        for (int t2 = 0; t2 <= t; ++t2) {
          const size_t vrow = (size_t(n) * s.t + t2) * row + 2 * s.dim + h * hs;
          float d = 0;
          for (int i = 0; i < hs; ++i) {
            d += qkv[vrow + i] * go[i];
            dqkv[vrow + i] += a[t2] * go[i];
          }
          datt[t2] = d;
          weighted += double(a[t2]) * d;
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const float dpre = a[t2] * (datt[t2] - float(weighted)) * scale;
          const size_t krow = (size_t(n) * s.t + t2) * row + s.dim + h * hs;
          for (int i = 0; i < hs; ++i) {
            dqkv[qrow + i] += qkv[krow + i] * dpre;
            dqkv[krow + i] += qkv[qrow + i] * dpre;
          }
        }
      }
}

}  // namespace gossip::kernels
