// Launchers of the layer graph's CUDA kernels (the CUDA side of layer_kernels.h); each enqueues
// on `stream` and returns at once. Every reduction is done by one thread in a fixed order, without
// atomics, so results are deterministic run to run, as on the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_norm_layout.h"
#include "kernels/layer_kernels.h"

namespace gossip::kernels::cuda {

// Convolution pieces, one sample at a time (the GEMMs go through cuBLAS).
void im2col(const ConvShape& s, const float* x, float* col, cudaStream_t stream);
void col2im_add(const ConvShape& s, const float* col, float* dx, cudaStream_t stream);
// y[n][c][i] += b[c] and db[c] += Σ_{n,i} dy[n][c][i].
void channel_bias_add(float* y, const float* b, int batch, int c, int plane, cudaStream_t stream);
void channel_sum_add(const float* dy, float* db, int batch, int c, int plane, cudaStream_t stream);

void maxpool2d_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax, cudaStream_t stream);
void maxpool2d_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx, cudaStream_t stream);
void global_avgpool_forward(const float* x, float* y, int batch, int c, int plane, cudaStream_t stream);
void global_avgpool_backward(const float* dy, float* dx, int batch, int c, int plane, cudaStream_t stream);

void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream);
void relu_backward_add(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream);
void gelu_forward(const float* x, float* y, size_t n, cudaStream_t stream);
void gelu_backward_add(const float* x, const float* dy, float* dx, size_t n, cudaStream_t stream);
void add_forward(const float* a, const float* b, float* y, size_t n, cudaStream_t stream);
void column_sum_add(const float* dy, float* db, int rows, int cols, cudaStream_t stream);

void norm_forward(const NormLayout& l, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* rstd, cudaStream_t stream);
// `scratch` holds 2·segments floats.
void norm_backward(const NormLayout& l, const float* x, const float* gamma, const float* mean, const float* rstd,
                   const float* dy, float* dx, float* dgamma, float* dbeta, float* scratch, cudaStream_t stream);

void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* y, int batch, int t, int dim,
                       cudaStream_t stream);
void embedding_backward(const int32_t* tokens, const float* dy, float* dwte, float* dwpe, int batch, int t, int dim,
                        cudaStream_t stream);

void attention_forward(const AttentionShape& s, const float* qkv, float* out, float* att, cudaStream_t stream);
// `scratch` holds batch·heads·t·t floats.
void attention_backward(const AttentionShape& s, const float* qkv, const float* att, const float* dout, float* dqkv,
                        float* scratch, cudaStream_t stream);

}  // namespace gossip::kernels::cuda
