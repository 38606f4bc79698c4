// The CUDA layer kernels (src/kernels/cuda_layer_kernels.cuh) compiled as plain C++ and run one
// thread after another on the CPU, behind the LayerKernels interface: cuda_layers_test runs its
// CPU-vs-CUDA comparisons against this too, so the kernels' index arithmetic is checked on
// machines without a GPU. What it cannot check: the launch configurations, the stream order and
// the conv glue of src/kernels/cuda_layers.cu (mirrored below), which the real-device run covers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/layer_kernels.h"

namespace gossip::emulated {
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline Dim3 blockIdx, blockDim, threadIdx, gridDim;  // one emulated thread at a time
}  // namespace gossip::emulated

using gossip::emulated::blockDim;
using gossip::emulated::blockIdx;
using gossip::emulated::gridDim;
using gossip::emulated::threadIdx;
using std::isnan;
using std::max;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
#define __global__ static  // internal linkage: the real kernels may be linked in too
#define __device__ static

#include "kernels/cuda_layer_kernels.cuh"

#undef __global__
#undef __device__

namespace gossip::emulated {

namespace K = kernels::cuda::kernel;

// Runs `kernel` as a grid of 256-thread blocks covering `items` threads, serially.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), size_t items, Args... args) {
  blockDim.x = 256;
  gridDim.x = static_cast<unsigned>(items ? (items + 255) / 256 : 1);
  for (blockIdx.x = 0; blockIdx.x < gridDim.x; ++blockIdx.x)
    for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x) kernel(Params(args)...);
}

class EmulatedCudaLayers final : public kernels::LayerKernels {
 public:
  explicit EmulatedCudaLayers(kernels::Backend& host_blas) : blas_(host_blas) {}
  size_t conv2d_workspace(const kernels::ConvShape& s) const override {
    return s.im2col_floats();
  }
  void conv2d_forward(const kernels::ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      float* ws) override {
    const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
    for (int n = 0; n < s.batch; ++n) {
      const float* col = x + size_t(n) * s.in_c * s.h * s.w;
      if (!s.pointwise()) launch(K::im2col_kernel, size_t(patch) * plane, s, col, ws), col = ws;
      blas_.gemm(false, false, s.out_c, plane, patch, 1.0f, w, col, 0.0f, y + size_t(n) * s.out_c * plane);
    }
    const size_t n = size_t(s.batch) * s.out_c * plane;
    if (b) launch(K::channel_bias_add_kernel, n, y, b, s.out_c, plane, n);
  }
  void conv2d_backward(const kernels::ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                       float* dw, float* db, float* ws) override {
    const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
    if (db) launch(K::channel_sum_add_kernel, s.out_c, dy, db, s.batch, s.out_c, plane);
    for (int n = 0; n < s.batch; ++n) {
      const float* dyn = dy + size_t(n) * s.out_c * plane;
      const float* col = x + size_t(n) * s.in_c * s.h * s.w;
      if (!s.pointwise()) launch(K::im2col_kernel, size_t(patch) * plane, s, col, ws), col = ws;
      blas_.gemm(false, true, s.out_c, patch, plane, 1.0f, dyn, col, 1.0f, dw);
      if (!dx) continue;
      float* dxn = dx + size_t(n) * s.in_c * s.h * s.w;
      blas_.gemm(true, false, patch, plane, s.out_c, 1.0f, w, dyn, s.pointwise() ? 1.0f : 0.0f,
                 s.pointwise() ? dxn : ws);
      if (!s.pointwise()) launch(K::col2im_add_kernel, size_t(s.in_c) * s.h * s.w, s, ws, dxn);
    }
  }
  void maxpool2d_forward(const kernels::PoolShape& s, const float* x, float* y, int32_t* argmax) override {
    launch(K::maxpool_forward_kernel, size_t(s.batch) * s.c * s.out_h() * s.out_w(), s, x, y, argmax);
  }
  void maxpool2d_backward(const kernels::PoolShape& s, const float* dy, const int32_t* argmax, float* dx) override {
    launch(K::maxpool_backward_kernel, size_t(s.batch) * s.c * s.h * s.w, s, dy, argmax, dx);
  }
  void global_avgpool_forward(const float* x, float* y, int batch, int c, int plane) override {
    launch(K::avgpool_forward_kernel, size_t(batch) * c, x, y, size_t(batch) * c, plane);
  }
  void global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane) override {
    launch(K::avgpool_backward_kernel, size_t(batch) * c * plane, dy, dx, plane, size_t(batch) * c * plane);
  }
  void relu_forward(const float* x, float* y, size_t n) override { launch(K::relu_forward_kernel, n, x, y, n); }
  void relu_backward_add(const float* y, const float* dy, float* dx, size_t n) override {
    launch(K::relu_backward_add_kernel, n, y, dy, dx, n);
  }
  void gelu_forward(const float* x, float* y, size_t n) override { launch(K::gelu_forward_kernel, n, x, y, n); }
  void gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) override {
    launch(K::gelu_backward_add_kernel, n, x, dy, dx, n);
  }
  void add_forward(const float* a, const float* b, float* y, size_t n) override { launch(K::add_kernel, n, a, b, y, n); }
  void column_sum_add(const float* dy, float* db, int rows, int cols) override {
    launch(K::column_sum_add_kernel, cols, dy, db, rows, cols);
  }
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         int rows, int cols) override {
    norm_forward({rows, cols, 1, cols}, x, gamma, beta, y, mean, rstd);
  }
  void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                          float* dx, float* dgamma, float* dbeta, int rows, int cols) override {
    norm_backward({rows, cols, 1, cols}, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
  }
  void groupnorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         int batch, int c, int plane, int groups) override {
    norm_forward({batch * groups, c / groups * plane, plane, c}, x, gamma, beta, y, mean, rstd);
  }
  void groupnorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                          float* dx, float* dgamma, float* dbeta, int batch, int c, int plane, int groups) override {
    norm_backward({batch * groups, c / groups * plane, plane, c}, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
  }
  void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch, int t,
                         int dim) override {
    const size_t n = size_t(batch) * t * dim;
    launch(K::embedding_forward_kernel, n, tokens, wte, wpe, y, t, dim, n);
  }
  void embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch, int t,
                          int dim) override {
    launch(K::embedding_wpe_grad_kernel, size_t(t) * dim, dy, dwpe, batch, t, dim);
    launch(K::embedding_wte_grad_kernel, dim, tokens, dy, dwte, batch * t, dim);
  }
  void attention_forward(const kernels::AttentionShape& s, const float* qkv, float* out, float* att) override {
    launch(K::attention_probs_kernel, size_t(s.batch) * s.heads * s.t, s, qkv, att);
    launch(K::attention_values_kernel, size_t(s.batch) * s.t * s.dim, s, qkv, att, out);
  }
  void attention_backward(const kernels::AttentionShape& s, const float* qkv, const float* att, const float* dout,
                          float* dqkv) override {
    kernels::DeviceArray<float> dscore(blas_, size_t(s.batch) * s.heads * s.t * s.t);
    launch(K::attention_dscore_kernel, size_t(s.batch) * s.heads * s.t, s, qkv, att, dout, dscore.get());
    launch(K::attention_dqkv_kernel, size_t(s.batch) * s.t * s.dim, s, qkv, att, dout,
           static_cast<const float*>(dscore.get()), dqkv);
  }

 private:
  using Layout = kernels::cuda::NormLayout;
  void norm_forward(const Layout& l, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                    float* rstd) {
    launch(K::norm_moments_kernel, l.segments, l, x, mean, rstd);
    launch(K::norm_apply_kernel, size_t(l.segments) * l.length, l, x, gamma, beta, mean, rstd, y);
  }
  void norm_backward(const Layout& l, const float* x, const float* gamma, const float* mean, const float* rstd,
                     const float* dy, float* dx, float* dgamma, float* dbeta) {
    launch(K::norm_param_grads_kernel, l.params, l, x, mean, rstd, dy, dgamma, dbeta);
    if (!dx) return;
    kernels::DeviceArray<float> sums(blas_, 2 * size_t(l.segments));
    launch(K::norm_backward_sums_kernel, l.segments, l, x, gamma, mean, rstd, dy, sums.get());
    launch(K::norm_backward_dx_kernel, size_t(l.segments) * l.length, l, x, gamma, mean, rstd, dy,
           static_cast<const float*>(sums.get()), dx);
  }
  kernels::Backend& blas_;
};

}  // namespace gossip::emulated
