// The __global__ kernels of cuda_layer_kernels.cu, kept apart from their launchers so that a
// test can also compile them as plain C++ and run them serially on the CPU
// (tests/cuda_emulation.h), checking their index arithmetic on machines without a GPU. They use no
// shared memory, no synchronisation and no atomics: every thread's work is independent.
#pragma once

#include "kernels/cuda_norm_layout.h"
#include "kernels/layer_kernels.h"

namespace gossip::kernels::cuda::kernel {

constexpr float kNormEps = 1e-5f;                   // as cpu_layers.cc (PyTorch's default)
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

// ---- convolution ----------------------------------------------------------------------------

// col[(c·k + ki)·k + kj][oh·out_w + ow] = x[c][oh·stride − pad + ki][ow·stride − pad + kj], 0 outside.
__global__ void im2col_kernel(ConvShape s, const float* x, float* col) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  const size_t n = size_t(s.in_c) * s.k * s.k * oh_n * ow_n;
  GRID_STRIDE(i, n) {
    const int ow = int(i % ow_n), oh = int(i / ow_n % oh_n);
    const int r = int(i / (size_t(ow_n) * oh_n));
    const int kj = r % s.k, ki = r / s.k % s.k, c = r / (s.k * s.k);
    const int ih = oh * s.stride - s.pad + ki, iw = ow * s.stride - s.pad + kj;
    col[i] = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w ? x[(size_t(c) * s.h + ih) * s.w + iw] : 0.0f;
  }
}

// The adjoint of im2col, one thread per input value gathering every column entry read from it.
__global__ void col2im_add_kernel(ConvShape s, const float* col, float* dx) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  const size_t n = size_t(s.in_c) * s.h * s.w;
  GRID_STRIDE(i, n) {
    const int iw = int(i % s.w), ih = int(i / s.w % s.h), c = int(i / (size_t(s.w) * s.h));
    float sum = 0;
    for (int ki = 0; ki < s.k; ++ki) {
      const int oh_s = ih + s.pad - ki;
      if (oh_s < 0 || oh_s % s.stride || oh_s / s.stride >= oh_n) continue;
      for (int kj = 0; kj < s.k; ++kj) {
        const int ow_s = iw + s.pad - kj;
        if (ow_s < 0 || ow_s % s.stride || ow_s / s.stride >= ow_n) continue;
        sum += col[(size_t((c * s.k + ki) * s.k + kj) * oh_n + oh_s / s.stride) * ow_n + ow_s / s.stride];
      }
    }
    dx[i] += sum;
  }
}

__global__ void channel_bias_add_kernel(float* y, const float* b, int c, int plane, size_t n) {
  GRID_STRIDE(i, n) y[i] += b[i / plane % c];
}

// One thread per channel.
__global__ void channel_sum_add_kernel(const float* dy, float* db, int batch, int c, int plane) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  float sum = 0;
  for (int n = 0; n < batch; ++n) {
    const float* row = dy + (size_t(n) * c + ch) * plane;
    for (int i = 0; i < plane; ++i) sum += row[i];
  }
  db[ch] += sum;
}

// ---- pooling ----------------------------------------------------------------------------------

__global__ void maxpool_forward_kernel(PoolShape s, const float* x, float* y, int32_t* argmax) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  const size_t n = size_t(s.batch) * s.c * oh_n * ow_n;
  GRID_STRIDE(o, n) {
    const int ow = int(o % ow_n), oh = int(o / ow_n % oh_n);
    const float* in = x + o / (size_t(ow_n) * oh_n) * s.h * s.w;
    int best = oh * s.stride * s.w + ow * s.stride;
    for (int ki = 0; ki < s.k; ++ki)
      for (int kj = 0; kj < s.k; ++kj) {
        const int i = (oh * s.stride + ki) * s.w + ow * s.stride + kj;
        if (in[i] > in[best] || isnan(in[i])) best = i;  // NaN wins, as on the CPU
      }
    y[o] = in[best];
    argmax[o] = best;
  }
}

// One thread per input value: adds dy of every window whose maximum it was (overlapping windows too).
__global__ void maxpool_backward_kernel(PoolShape s, const float* dy, const int32_t* argmax, float* dx) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  const size_t n = size_t(s.batch) * s.c * s.h * s.w;
  GRID_STRIDE(i, n) {
    const int iw = int(i % s.w), ih = int(i / s.w % s.h);
    const size_t p = i / (size_t(s.w) * s.h);
    const int at = ih * s.w + iw;
    float sum = 0;
    for (int oh = max(0, (ih - s.k + s.stride) / s.stride); oh < oh_n && oh * s.stride <= ih; ++oh)
      for (int ow = max(0, (iw - s.k + s.stride) / s.stride); ow < ow_n && ow * s.stride <= iw; ++ow) {
        const size_t o = (p * oh_n + oh) * ow_n + ow;
        if (argmax[o] == at) sum += dy[o];
      }
    dx[i] += sum;
  }
}

__global__ void avgpool_forward_kernel(const float* x, float* y, size_t planes, int plane) {
  GRID_STRIDE(p, planes) {
    double sum = 0;
    for (int i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = float(sum / plane);
  }
}

__global__ void avgpool_backward_kernel(const float* dy, float* dx, int plane, size_t n) {
  GRID_STRIDE(i, n) dx[i] += dy[i / plane] / float(plane);
}

// ---- pointwise ----------------------------------------------------------------------------------

__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = x[i] > 0.0f || isnan(x[i]) ? x[i] : 0.0f;
}

__global__ void relu_backward_add_kernel(const float* y, const float* dy, float* dx, size_t n) {
  GRID_STRIDE(i, n) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void gelu_forward_kernel(const float* x, float* y, size_t n) {
  GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kGeluScale * (v + 0.044715f * v * v * v)));
  }
}

__global__ void gelu_backward_add_kernel(const float* x, const float* dy, float* dx, size_t n) {
  GRID_STRIDE(i, n) {
    const float v = x[i];
    const float t = tanhf(kGeluScale * (v + 0.044715f * v * v * v));
    const float local = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] += local * dy[i];
  }
}

__global__ void add_kernel(const float* a, const float* b, float* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void column_sum_add_kernel(const float* dy, float* db, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float sum = 0;
  for (int r = 0; r < rows; ++r) sum += dy[size_t(r) * cols + c];
  db[c] += sum;
}

// ---- norms ----------------------------------------------------------------------------------------

__device__ int param_of(const NormLayout& l, size_t i) { return int(i / l.param_stride % l.params); }

// One thread per segment, two passes in double as on the CPU.
__global__ void norm_moments_kernel(NormLayout l, const float* x, float* mean, float* rstd) {
  const int seg = blockIdx.x * blockDim.x + threadIdx.x;
  if (seg >= l.segments) return;
  const float* in = x + size_t(seg) * l.length;
  double sum = 0, sq = 0;
  for (int i = 0; i < l.length; ++i) sum += in[i];
  const double m = sum / l.length;
  for (int i = 0; i < l.length; ++i) sq += (in[i] - m) * (in[i] - m);
  mean[seg] = float(m);
  rstd[seg] = float(1.0 / sqrt(sq / l.length + kNormEps));
}

__global__ void norm_apply_kernel(NormLayout l, const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* rstd, float* y) {
  GRID_STRIDE(i, size_t(l.segments) * l.length) {
    const size_t seg = i / l.length;
    const int p = param_of(l, i);
    y[i] = (x[i] - mean[seg]) * rstd[seg] * gamma[p] + beta[p];
  }
}

// Per segment: the means of dnorm = dy·γ and of dnorm·norm, into sums[2·seg], sums[2·seg + 1].
__global__ void norm_backward_sums_kernel(NormLayout l, const float* x, const float* gamma, const float* mean,
                                          const float* rstd, const float* dy, float* sums) {
  const int seg = blockIdx.x * blockDim.x + threadIdx.x;
  if (seg >= l.segments) return;
  const size_t at = size_t(seg) * l.length;
  double a = 0, b = 0;
  for (int j = 0; j < l.length; ++j) {
    const size_t i = at + j;
    const double dnorm = double(dy[i]) * gamma[param_of(l, i)];
    a += dnorm;
    b += dnorm * ((x[i] - mean[seg]) * rstd[seg]);
  }
  sums[2 * seg] = float(a / l.length);
  sums[2 * seg + 1] = float(b / l.length);
}

__global__ void norm_backward_dx_kernel(NormLayout l, const float* x, const float* gamma, const float* mean,
                                        const float* rstd, const float* dy, const float* sums, float* dx) {
  GRID_STRIDE(i, size_t(l.segments) * l.length) {
    const size_t seg = i / l.length;
    const float norm = (x[i] - mean[seg]) * rstd[seg];
    dx[i] += (dy[i] * gamma[param_of(l, i)] - sums[2 * seg] - norm * sums[2 * seg + 1]) * rstd[seg];
  }
}

// One thread per parameter index, visiting its elements in order.
__global__ void norm_param_grads_kernel(NormLayout l, const float* x, const float* mean, const float* rstd,
                                        const float* dy, float* dgamma, float* dbeta) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= l.params) return;
  const size_t total = size_t(l.segments) * l.length, block = size_t(l.param_stride) * l.params;
  double dg = 0, db = 0;
  for (size_t outer = 0; outer < total / block; ++outer)
    for (int j = 0; j < l.param_stride; ++j) {
      const size_t i = (outer * l.params + p) * l.param_stride + j;
      const size_t seg = i / l.length;
      dg += double(dy[i]) * ((x[i] - mean[seg]) * rstd[seg]);
      db += dy[i];
    }
  dgamma[p] += float(dg);
  dbeta[p] += float(db);
}

// ---- embeddings -----------------------------------------------------------------------------------

__global__ void embedding_forward_kernel(const int32_t* tokens, const float* wte, const float* wpe, float* y, int t,
                                         int dim, size_t n) {
  GRID_STRIDE(i, n) {
    const size_t pos = i / dim;
    const int d = int(i % dim);
    y[i] = wte[size_t(tokens[pos]) * dim + d] + wpe[size_t(pos % t) * dim + d];
  }
}

// dwpe: one thread per (position, d), summing over the batch.
__global__ void embedding_wpe_grad_kernel(const float* dy, float* dwpe, int batch, int t, int dim) {
  const size_t n = size_t(t) * dim;
  GRID_STRIDE(i, n) {
    float sum = 0;
    for (int b = 0; b < batch; ++b) sum += dy[size_t(b) * n + i];
    dwpe[i] += sum;
  }
}

// dwte: one thread per coordinate d walks every position in order (tokens repeat, so no per-position threads).
__global__ void embedding_wte_grad_kernel(const int32_t* tokens, const float* dy, float* dwte, int positions,
                                          int dim) {
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  for (int r = 0; r < positions; ++r) dwte[size_t(tokens[r]) * dim + d] += dy[size_t(r) * dim + d];
}

// ---- causal attention -------------------------------------------------------------------------------

// qkv row of (sample n, position t) and the offset of head h's slice of q (part 0), k (1) or v (2).
__device__ size_t qkv_at(const AttentionShape& s, int n, int t, int part, int h) {
  return (size_t(n) * s.t + t) * 3 * s.dim + size_t(part) * s.dim + size_t(h) * (s.dim / s.heads);
}

// One thread per (n, h, t): its row of probabilities.
__global__ void attention_probs_kernel(AttentionShape s, const float* qkv, float* att) {
  const size_t rows = size_t(s.batch) * s.heads * s.t;
  const int hs = s.dim / s.heads;
  const float scale = rsqrtf(float(hs));
  GRID_STRIDE(r, rows) {
    const int t = int(r % s.t), h = int(r / s.t % s.heads), n = int(r / (size_t(s.t) * s.heads));
    const float* q = qkv + qkv_at(s, n, t, 0, h);
    float* a = att + r * s.t;
    float top = -INFINITY;
    for (int t2 = 0; t2 <= t; ++t2) {
      const float* k = qkv + qkv_at(s, n, t2, 1, h);
      float dot = 0;
      for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
      a[t2] = dot * scale;
      top = fmaxf(top, a[t2]);
    }
    double sum = 0;
    for (int t2 = 0; t2 <= t; ++t2) sum += (a[t2] = expf(a[t2] - top));
    const float inv = float(1.0 / sum);
    for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
    for (int t2 = t + 1; t2 < s.t; ++t2) a[t2] = 0.0f;
  }
}

// One thread per output value out[n][t][h·hs + i] = Σ_{t2 ≤ t} att·v.
__global__ void attention_values_kernel(AttentionShape s, const float* qkv, const float* att, float* out) {
  const int hs = s.dim / s.heads;
  GRID_STRIDE(o, size_t(s.batch) * s.t * s.dim) {
    const int c = int(o % s.dim), t = int(o / s.dim % s.t), n = int(o / (size_t(s.dim) * s.t));
    const int h = c / hs, i = c % hs;
    const float* a = att + ((size_t(n) * s.heads + h) * s.t + t) * s.t;
    float sum = 0;
    for (int t2 = 0; t2 <= t; ++t2) sum += a[t2] * qkv[qkv_at(s, n, t2, 2, h) + i];
    out[o] = sum;
  }
}

// One thread per (n, h, t): dscore[t2] = att·(datt − Σ att·datt)·scale with datt[t2] = dout[t]·v[t2].
__global__ void attention_dscore_kernel(AttentionShape s, const float* qkv, const float* att, const float* dout,
                                        float* dscore) {
  const int hs = s.dim / s.heads;
  const float scale = rsqrtf(float(hs));
  GRID_STRIDE(r, size_t(s.batch) * s.heads * s.t) {
    const int t = int(r % s.t), h = int(r / s.t % s.heads), n = int(r / (size_t(s.t) * s.heads));
    const float* a = att + r * s.t;
    const float* go = dout + (size_t(n) * s.t + t) * s.dim + size_t(h) * hs;
    float* ds = dscore + r * s.t;
    double weighted = 0;
    for (int t2 = 0; t2 <= t; ++t2) {
      const float* v = qkv + qkv_at(s, n, t2, 2, h);
      float d = 0;
      for (int i = 0; i < hs; ++i) d += v[i] * go[i];
      ds[t2] = d;
      weighted += double(a[t2]) * d;
    }
    for (int t2 = 0; t2 <= t; ++t2) ds[t2] = a[t2] * (ds[t2] - float(weighted)) * scale;
    for (int t2 = t + 1; t2 < s.t; ++t2) ds[t2] = 0.0f;
  }
}

// One thread per (n, t, c): dq[t] += Σ_{t2 ≤ t} dscore[t][t2]·k[t2]; dk[t] += Σ_{t' ≥ t} dscore[t'][t]·q[t'];
// dv[t] += Σ_{t' ≥ t} att[t'][t]·dout[t'].
__global__ void attention_dqkv_kernel(AttentionShape s, const float* qkv, const float* att, const float* dout,
                                      const float* dscore, float* dqkv) {
  const int hs = s.dim / s.heads;
  GRID_STRIDE(o, size_t(s.batch) * s.t * s.dim) {
    const int c = int(o % s.dim), t = int(o / s.dim % s.t), n = int(o / (size_t(s.dim) * s.t));
    const int h = c / hs, i = c % hs;
    const size_t base = (size_t(n) * s.heads + h) * s.t;  // row index of (n, h, 0)
    float dq = 0, dk = 0, dv = 0;
    for (int t2 = 0; t2 <= t; ++t2) dq += dscore[(base + t) * s.t + t2] * qkv[qkv_at(s, n, t2, 1, h) + i];
    for (int t1 = t; t1 < s.t; ++t1) {
      dk += dscore[(base + t1) * s.t + t] * qkv[qkv_at(s, n, t1, 0, h) + i];
      dv += att[(base + t1) * s.t + t] * dout[(size_t(n) * s.t + t1) * s.dim + c];
    }
    dqkv[qkv_at(s, n, t, 0, h) + i] += dq;
    dqkv[qkv_at(s, n, t, 1, h) + i] += dk;
    dqkv[qkv_at(s, n, t, 2, h) + i] += dv;
  }
}

#undef GRID_STRIDE

}  // namespace gossip::kernels::cuda::kernel
