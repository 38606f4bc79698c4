// The CUDA implementation of LayerKernels: convolutions as im2col + cuBLAS GEMM (through the
// owning backend's gemm), everything else as the kernels of cuda_layer_kernels.cu, all on the
// backend's stream. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/layer_kernels.h"

namespace gossip::kernels {

class CudaLayers final : public LayerKernels {
 public:
  // `blas` (the owning CUDA backend) must outlive this object; its gemm runs on `stream`.
  CudaLayers(Backend& blas, cudaStream_t stream) : blas_(blas), stream_(stream) {}

  size_t conv2d_workspace(const ConvShape& s) const override;
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      float* workspace) override;
  void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                       float* db, float* workspace) override;
  void maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) override;
  void maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) override;
  void global_avgpool_forward(const float* x, float* y, int batch, int c, int plane) override;
  void global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane) override;
  void relu_forward(const float* x, float* y, size_t n) override;
  void relu_backward_add(const float* y, const float* dy, float* dx, size_t n) override;
  void gelu_forward(const float* x, float* y, size_t n) override;
  void gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) override;
  void add_forward(const float* a, const float* b, float* y, size_t n) override;
  void column_sum_add(const float* dy, float* db, int rows, int cols) override;
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         int rows, int cols) override;
  void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                          float* dx, float* dgamma, float* dbeta, int rows, int cols) override;
  void groupnorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         int batch, int c, int plane, int groups) override;
  void groupnorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                          float* dx, float* dgamma, float* dbeta, int batch, int c, int plane, int groups) override;
  void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch, int t,
                         int dim) override;
  void embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch, int t,
                          int dim) override;
  void attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att) override;
  void attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout,
                          float* dqkv) override;

 private:
  // Device scratch of at least n floats (grown on demand, kept between calls).
  float* scratch(size_t n);

  Backend& blas_;
  cudaStream_t stream_;
  DeviceArray<float> scratch_;
};

}  // namespace gossip::kernels
