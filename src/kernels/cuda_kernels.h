// Launchers of the element-wise CUDA kernels; each enqueues on `stream` and returns at once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gossip::kernels::cuda {

// Launch shape shared by the element-wise and the layer kernels: 256-thread blocks, enough of
// them to cover n values (grid-stride loops take the rest past the cap).
constexpr int kThreads = 256;
inline unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b == 0 ? 1 : (b < 65535 * 8 ? b : 65535 * 8));
}

void fill(float* p, float value, size_t n, cudaStream_t stream);
// Backend::gather_windows: tokens[i][t] = text[starts[i] + t], targets[i][t] = text[starts[i] + t + 1].
void gather_windows(const uint8_t* text, const int64_t* starts, int count, int context, int32_t* tokens,
                    int32_t* targets, cudaStream_t stream);
// Backend::gather_rows: x[i][c] = bytes ? table[bytes[rows[i]][c]] : floats[rows[i]][c]; y[i] = labels[rows[i]].
void gather_rows(const uint8_t* bytes, const float* table, const float* floats, const int32_t* labels, int cols,
                 const int32_t* rows, int count, float* x, int32_t* y, cudaStream_t stream);
void bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu, cudaStream_t stream);
void relu_backward(float* dy, const float* y, size_t n, cudaStream_t stream);
void column_sum(const float* dy, float* db, int rows, int cols, cudaStream_t stream);
// Per-row loss and hit written to row_loss[rows] and row_hit[rows] (device memory).
void softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                  float grad_scale, float smoothing, float* row_loss, int* row_hit, cudaStream_t stream);
// *loss += (double)(float)Σ row_loss, *hits += Σ row_hit (one block, a fixed tree: deterministic).
void tally_rows(const float* row_loss, const int* row_hit, int rows, double* loss, unsigned long long* hits,
                cudaStream_t stream);
void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                float weight_decay, bool nesterov, cudaStream_t stream);
// AdamW with the step's scalars folded: decay = 1 − lr·wd, step_size = lr/bias1, bias2_root = √bias2.
void adamw_update(float* w, const float* g, float* m, float* v, size_t n, float beta1, float beta2, float eps,
                  float decay, float step_size, float bias2_root, cudaStream_t stream);
void axpy(size_t n, float a, const float* x, float* y, cudaStream_t stream);
void scale(size_t n, float a, float* x, cudaStream_t stream);

// out[i] = bf16 of x[i], rounded as kernels/bf16.h's to_bf16 (bit for bit).
void pack_bf16(const float* x, uint16_t* out, size_t n, cudaStream_t stream);

// The gossip mix (Backend::mix_span) in launches of up to kMixBatch neighbours each.
constexpr int kMixBatch = 8;
struct MixBatch {
  const void* values[kMixBatch];  // device pointers; null: the neighbour is left out (src stands in)
  float weights[kMixBatch];
  int count;
};
// Blocks a mix launch uses for n values (at most kMixBlocks: the partials' size).
constexpr unsigned kMixBlocks = 1024;
unsigned mix_blocks(size_t n);
// dst = (accumulate ? dst : own share of src) + Σ_k w_k·v_k over the batch, every step rounded on
// its own in order (as the CPU reference). With `partials` (device, mix_blocks(n)·(kMixBatch + 1)
// floats) and `bad` (mix_blocks(n)·kMixBatch): per block, Σ v_k² at [b·(kMixBatch + 1) + k], Σ src²
// at [b·(kMixBatch + 1) + kMixBatch], and bad[b·kMixBatch + k] non-zero when a v_k was NaN or ±Inf.
void mix_span(const float* src, float* dst, size_t n, float self, float rest, bool bf16, bool accumulate,
              const MixBatch& batch, float* partials, unsigned* bad, cudaStream_t stream);

// Push-sum's update and split (Backend::push_sum_split) in launches of up to kPushBatch shares.
// The first launch (`update`) applies the local step to x; the last (`finish`) writes what stays.
// With more than one launch, y stays in x in between and, with bf16 shares, the residual sum in
// `residual` (device, n floats).
constexpr int kPushBatch = 8;
struct PushBatch {
  void* shares[kPushBatch];  // device pointers
  float weights[kPushBatch];
  int count;
};
void push_sum_split(const float* z, float* x, size_t n, float inv, float gain, float self, bool bf16, bool update,
                    bool finish, const PushBatch& batch, float* residual, cudaStream_t stream);
// x[i] += v[i] (floats, or bf16 widened).
void accumulate(float* x, const void* values, size_t n, bool bf16, cudaStream_t stream);
// y[i] = a·x[i].
void scale_copy(size_t n, float a, const float* x, float* y, cudaStream_t stream);

}  // namespace gossip::kernels::cuda
