// The CPU reference of the layer kernels (see layer_kernels.h): im2col + OpenBLAS sgemm for
// convolutions, sgemm per (sample, head) for attention, plain loops elsewhere.
#pragma once

#include <vector>

#include "kernels/layer_kernels.h"

namespace gossip::kernels {

class CpuLayers final : public LayerKernels {
 public:
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
  std::vector<float> scores_;  // attention_backward's T×T gradient of the scores, reused
};

}  // namespace gossip::kernels
