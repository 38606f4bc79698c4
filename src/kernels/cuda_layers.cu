#include "kernels/cuda_layers.h"

#include "kernels/cuda_check.h"
#include "kernels/cuda_layer_kernels.h"

namespace gossip::kernels {
namespace {

void check_launch() { GOSSIP_CUDA_CHECK(cudaGetLastError()); }

cuda::NormLayout layernorm_layout(int rows, int cols) { return {rows, cols, 1, cols}; }
cuda::NormLayout groupnorm_layout(int batch, int c, int plane, int groups) {
  return {batch * groups, c / groups * plane, plane, c};
}

}  // namespace

float* CudaLayers::scratch(size_t n) {
  return scratch_.at_least(blas_, n);
}

size_t CudaLayers::conv2d_workspace(const ConvShape& s) const {
  return s.im2col_floats();
}

// Per sample, as on the CPU: y_n[out_c][plane] = W[out_c][patch] · col[patch][plane], then the bias.
void CudaLayers::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                                float* workspace) {
  const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
  for (int n = 0; n < s.batch; ++n) {
    const float* col = x + size_t(n) * s.in_c * s.h * s.w;
    if (!s.pointwise()) {
      cuda::im2col(s, col, workspace, stream_);
      check_launch();
      col = workspace;
    }
    blas_.gemm(false, false, s.out_c, plane, patch, 1.0f, w, col, 0.0f, y + size_t(n) * s.out_c * plane);
  }
  if (b) {
    cuda::channel_bias_add(y, b, s.batch, s.out_c, plane, stream_);
    check_launch();
  }
}

void CudaLayers::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                 float* dw, float* db, float* workspace) {
  const int plane = s.out_h() * s.out_w(), patch = s.in_c * s.k * s.k;
  const bool pointwise = s.pointwise();
  if (db) {
    cuda::channel_sum_add(dy, db, s.batch, s.out_c, plane, stream_);
    check_launch();
  }
  for (int n = 0; n < s.batch; ++n) {
    const float* dyn = dy + size_t(n) * s.out_c * plane;
    const float* col = x + size_t(n) * s.in_c * s.h * s.w;
    if (!pointwise) {
      cuda::im2col(s, col, workspace, stream_);
      check_launch();
      col = workspace;
    }
    blas_.gemm(false, true, s.out_c, patch, plane, 1.0f, dyn, col, 1.0f, dw);  // dW += dy_n · colᵀ
    if (!dx) continue;
    float* dxn = dx + size_t(n) * s.in_c * s.h * s.w;
    // dcol = Wᵀ · dy_n, folded back onto the input (pointwise: straight into dx).
    blas_.gemm(true, false, patch, plane, s.out_c, 1.0f, w, dyn, pointwise ? 1.0f : 0.0f,
               pointwise ? dxn : workspace);
    if (!pointwise) {
      cuda::col2im_add(s, workspace, dxn, stream_);
      check_launch();
    }
  }
}

void CudaLayers::maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  cuda::maxpool2d_forward(s, x, y, argmax, stream_);
  check_launch();
}
void CudaLayers::maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) {
  cuda::maxpool2d_backward(s, dy, argmax, dx, stream_);
  check_launch();
}
void CudaLayers::global_avgpool_forward(const float* x, float* y, int batch, int c, int plane) {
  cuda::global_avgpool_forward(x, y, batch, c, plane, stream_);
  check_launch();
}
void CudaLayers::global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane) {
  cuda::global_avgpool_backward(dy, dx, batch, c, plane, stream_);
  check_launch();
}
void CudaLayers::relu_forward(const float* x, float* y, size_t n) {
  cuda::relu_forward(x, y, n, stream_);
  check_launch();
}
void CudaLayers::relu_backward_add(const float* y, const float* dy, float* dx, size_t n) {
  cuda::relu_backward_add(y, dy, dx, n, stream_);
  check_launch();
}
void CudaLayers::gelu_forward(const float* x, float* y, size_t n) {
  cuda::gelu_forward(x, y, n, stream_);
  check_launch();
}
void CudaLayers::gelu_backward_add(const float* x, const float* dy, float* dx, size_t n) {
  cuda::gelu_backward_add(x, dy, dx, n, stream_);
  check_launch();
}
void CudaLayers::add_forward(const float* a, const float* b, float* y, size_t n) {
  cuda::add_forward(a, b, y, n, stream_);
  check_launch();
}
void CudaLayers::column_sum_add(const float* dy, float* db, int rows, int cols) {
  cuda::column_sum_add(dy, db, rows, cols, stream_);
  check_launch();
}

void CudaLayers::layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                   float* rstd, int rows, int cols) {
  cuda::norm_forward(layernorm_layout(rows, cols), x, gamma, beta, y, mean, rstd, stream_);
  check_launch();
}
void CudaLayers::layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                    const float* dy, float* dx, float* dgamma, float* dbeta, int rows, int cols) {
  cuda::norm_backward(layernorm_layout(rows, cols), x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                      scratch(2 * size_t(rows)), stream_);
  check_launch();
}
void CudaLayers::groupnorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                   float* rstd, int batch, int c, int plane, int groups) {
  cuda::norm_forward(groupnorm_layout(batch, c, plane, groups), x, gamma, beta, y, mean, rstd, stream_);
  check_launch();
}
void CudaLayers::groupnorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                                    const float* dy, float* dx, float* dgamma, float* dbeta, int batch, int c,
                                    int plane, int groups) {
  cuda::norm_backward(groupnorm_layout(batch, c, plane, groups), x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                      scratch(2 * size_t(batch) * groups), stream_);
  check_launch();
}

void CudaLayers::embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch,
                                   int t, int dim) {
  cuda::embedding_forward(tokens, wte, wpe, y, batch, t, dim, stream_);
  check_launch();
}
void CudaLayers::embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch,
                                    int t, int dim) {
  cuda::embedding_backward(tokens, dy, dwte, dwpe, batch, t, dim, stream_);
  check_launch();
}

void CudaLayers::attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att) {
  cuda::attention_forward(s, qkv, out, att, stream_);
  check_launch();
}
void CudaLayers::attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout,
                                    float* dqkv) {
  cuda::attention_backward(s, qkv, att, dout, dqkv, scratch(size_t(s.batch) * s.heads * s.t * s.t), stream_);
  check_launch();
}

}  // namespace gossip::kernels
