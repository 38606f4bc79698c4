// The kernels of the layer graph (model/network.h): convolution, pooling, activations, norms,
// embeddings and causal attention. A backend offers them through Backend::layers(); the CPU
// backend's are the reference (cpu_layers.cc). Conventions, shared by every backend:
//   - tensors are batch-major and row-major (images NCHW, sequences [batch][T][D]);
//   - forward kernels overwrite their outputs;
//   - backward kernels ADD into the input gradient (dx) and into parameter gradients, so a tensor
//     read by two layers (a residual branch, tied embeddings) collects both contributions; the
//     network zeroes all gradients before a backward pass. A null dx skips the input gradient.
#pragma once

#include <cstddef>
#include <cstdint>

// The shapes' helpers are called from CUDA kernels too.
#ifdef __CUDACC__
#define GOSSIP_HOST_DEVICE __host__ __device__
#else
#define GOSSIP_HOST_DEVICE
#endif

namespace gossip::kernels {

struct ConvShape {
  int batch = 0, in_c = 0, h = 0, w = 0;  // input [batch][in_c][h][w]
  int out_c = 0, k = 0, stride = 1, pad = 0;  // weight [out_c][in_c][k][k], bias [out_c]
  GOSSIP_HOST_DEVICE int out_h() const { return (h + 2 * pad - k) / stride + 1; }
  GOSSIP_HOST_DEVICE int out_w() const { return (w + 2 * pad - k) / stride + 1; }
  // A 1×1 convolution without stride or padding is a plain GEMM on the input (no im2col).
  bool pointwise() const { return k == 1 && stride == 1 && pad == 0; }
  // Floats of one sample's im2col matrix (0 when pointwise): the conv kernels' workspace.
  size_t im2col_floats() const { return pointwise() ? 0 : size_t(in_c) * k * k * out_h() * out_w(); }
};

struct PoolShape {
  int batch = 0, c = 0, h = 0, w = 0;  // input [batch][c][h][w]
  int k = 2, stride = 2;               // window k×k, no padding
  GOSSIP_HOST_DEVICE int out_h() const { return (h - k) / stride + 1; }
  GOSSIP_HOST_DEVICE int out_w() const { return (w - k) / stride + 1; }
};

struct AttentionShape {
  int batch = 0, t = 0, dim = 0, heads = 1;  // qkv [batch][t][3·dim] (q, k, v), out [batch][t][dim]
};

class LayerKernels {
 public:
  virtual ~LayerKernels() = default;

  // Scratch floats conv2d_forward/backward need for one call of `s`.
  virtual size_t conv2d_workspace(const ConvShape& s) const = 0;
  virtual void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                              float* workspace) = 0;
  virtual void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, float* db, float* workspace) = 0;

  // argmax[i] is the flat index inside its input plane of output i's maximum.
  virtual void maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) = 0;
  virtual void maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) = 0;
  // y[n][c] = mean over the plane of x[n][c][plane].
  virtual void global_avgpool_forward(const float* x, float* y, int batch, int c, int plane) = 0;
  virtual void global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane) = 0;

  virtual void relu_forward(const float* x, float* y, size_t n) = 0;
  virtual void relu_backward_add(const float* y, const float* dy, float* dx, size_t n) = 0;
  // GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
  virtual void gelu_forward(const float* x, float* y, size_t n) = 0;
  virtual void gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) = 0;
  virtual void add_forward(const float* a, const float* b, float* y, size_t n) = 0;  // y = a + b
  // db[c] += Σ_r dy[r][c]
  virtual void column_sum_add(const float* dy, float* db, int rows, int cols) = 0;

  // Over the last axis of x[rows][cols]; mean/rstd [rows] are saved for the backward pass.
  virtual void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                 float* rstd, int rows, int cols) = 0;
  virtual void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                  const float* dy, float* dx, float* dgamma, float* dbeta, int rows, int cols) = 0;
  // x [batch][c][plane], `groups` dividing c; gamma/beta per channel; mean/rstd [batch][groups].
  virtual void groupnorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                 float* rstd, int batch, int c, int plane, int groups) = 0;
  virtual void groupnorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                  const float* dy, float* dx, float* dgamma, float* dbeta, int batch, int c,
                                  int plane, int groups) = 0;

  // y[n][t] = wte[tokens[n][t]] + wpe[t]; tokens [batch][t] in [0, vocab).
  virtual void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch,
                                 int t, int dim) = 0;
  virtual void embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch,
                                  int t, int dim) = 0;

  // Causal multi-head self-attention: out = softmax(q·kᵀ/√(dim/heads), masked to t' ≤ t)·v per
  // head; att [batch][heads][t][t] keeps the probabilities for the backward pass.
  virtual void attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att) = 0;
  virtual void attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout,
                                  float* dqkv) = 0;
};

}  // namespace gossip::kernels
