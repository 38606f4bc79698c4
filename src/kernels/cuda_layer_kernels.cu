#include "kernels/cuda_layer_kernels.h"
#include "kernels/cuda_layer_kernels.cuh"
#include "kernels/cuda_kernels.h"

namespace gossip::kernels::cuda {
using namespace kernel;  // the __global__ functions of cuda_layer_kernels.cuh

void im2col(const ConvShape& s, const float* x, float* col, cudaStream_t stream) {
  const size_t n = size_t(s.in_c) * s.k * s.k * s.out_h() * s.out_w();
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, x, col);
}
void col2im_add(const ConvShape& s, const float* col, float* dx, cudaStream_t stream) {
  col2im_add_kernel<<<blocks_for(size_t(s.in_c) * s.h * s.w), kThreads, 0, stream>>>(s, col, dx);
}
void channel_bias_add(float* y, const float* b, int batch, int c, int plane, cudaStream_t stream) {
  const size_t n = size_t(batch) * c * plane;
  channel_bias_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, b, c, plane, n);
}
void channel_sum_add(const float* dy, float* db, int batch, int c, int plane, cudaStream_t stream) {
  channel_sum_add_kernel<<<blocks_for(c), kThreads, 0, stream>>>(dy, db, batch, c, plane);
}
void maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax, cudaStream_t stream) {
  maxpool_forward_kernel<<<blocks_for(size_t(s.batch) * s.c * s.out_h() * s.out_w()), kThreads, 0, stream>>>(
      s, x, y, argmax);
}
void maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx, cudaStream_t stream) {
  maxpool_backward_kernel<<<blocks_for(size_t(s.batch) * s.c * s.h * s.w), kThreads, 0, stream>>>(s, dy, argmax,
                                                                                                     dx);
}
void global_avgpool_forward(const float* x, float* y, int batch, int c, int plane, cudaStream_t stream) {
  avgpool_forward_kernel<<<blocks_for(size_t(batch) * c), kThreads, 0, stream>>>(x, y, size_t(batch) * c, plane);
}
void global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane, cudaStream_t stream) {
  const size_t n = size_t(batch) * c * plane;
  avgpool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, dx, plane, n);
}
void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}
void relu_backward_add(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  relu_backward_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
}
void gelu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}
void gelu_backward_add(const float* x, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  gelu_backward_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n);
}
void add_forward(const float* a, const float* b, float* y, size_t n, cudaStream_t stream) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
}
void column_sum_add(const float* dy, float* db, int rows, int cols, cudaStream_t stream) {
  column_sum_add_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(dy, db, rows, cols);
}

void norm_forward(const NormLayout& l, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* rstd, cudaStream_t stream) {
  norm_moments_kernel<<<blocks_for(l.segments), kThreads, 0, stream>>>(l, x, mean, rstd);
  norm_apply_kernel<<<blocks_for(size_t(l.segments) * l.length), kThreads, 0, stream>>>(l, x, gamma, beta, mean,
                                                                                        rstd, y);
}
void norm_backward(const NormLayout& l, const float* x, const float* gamma, const float* mean, const float* rstd,
                   const float* dy, float* dx, float* dgamma, float* dbeta, float* scratch, cudaStream_t stream) {
  norm_param_grads_kernel<<<blocks_for(l.params), kThreads, 0, stream>>>(l, x, mean, rstd, dy, dgamma, dbeta);
  if (!dx) return;
  norm_backward_sums_kernel<<<blocks_for(l.segments), kThreads, 0, stream>>>(l, x, gamma, mean, rstd, dy,
                                                                                    scratch);
  norm_backward_dx_kernel<<<blocks_for(size_t(l.segments) * l.length), kThreads, 0, stream>>>(l, x, gamma, mean,
                                                                                              rstd, dy, scratch, dx);
}

void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch, int t, int dim,
                       cudaStream_t stream) {
  const size_t n = size_t(batch) * t * dim;
  embedding_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(tokens, wte, wpe, y, t, dim, n);
}
void embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch, int t, int dim,
                        cudaStream_t stream) {
  embedding_wpe_grad_kernel<<<blocks_for(size_t(t) * dim), kThreads, 0, stream>>>(dy, dwpe, batch, t, dim);
  embedding_wte_grad_kernel<<<blocks_for(dim), kThreads, 0, stream>>>(tokens, dy, dwte, batch * t, dim);
}

void attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att, cudaStream_t stream) {
  attention_probs_kernel<<<blocks_for(size_t(s.batch) * s.heads * s.t), kThreads, 0, stream>>>(s, qkv, att);
  attention_values_kernel<<<blocks_for(size_t(s.batch) * s.t * s.dim), kThreads, 0, stream>>>(s, qkv, att, out);
}
void attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout, float* dqkv,
                        float* scratch, cudaStream_t stream) {
  attention_dscore_kernel<<<blocks_for(size_t(s.batch) * s.heads * s.t), kThreads, 0, stream>>>(s, qkv, att, dout,
                                                                                                 scratch);
  attention_dqkv_kernel<<<blocks_for(size_t(s.batch) * s.t * s.dim), kThreads, 0, stream>>>(s, qkv, att, dout,
                                                                                             scratch, dqkv);
}

}  // namespace gossip::kernels::cuda
