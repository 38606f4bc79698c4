#include <cfloat>

#include "kernels/bf16_bits.h"
#include "kernels/cuda_kernels.h"

namespace gossip::kernels::cuda {
namespace {

__global__ void fill_kernel(float* p, float value, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void bias_act_kernel(float* y, const float* bias, int rows, int cols, bool relu) {
  const size_t n = size_t(rows) * cols;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = y[i] + bias[i % cols];
    y[i] = relu && v < 0.0f ? 0.0f : v;  // as std::max(v, 0.0f) on the CPU: NaN stays NaN (fmaxf would give 0)
  }
}

__global__ void relu_backward_kernel(float* dy, const float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (!(y[i] > 0.0f)) dy[i] = 0.0f;  // as the CPU: no gradient where y is 0 or NaN
}

// One thread per column: rows are summed in order, so results are deterministic.
__global__ void column_sum_kernel(const float* dy, float* db, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0;
  for (int r = 0; r < rows; ++r) s += dy[size_t(r) * cols + c];
  db[c] = s;
}

// One warp per row.
__global__ void softmax_xent_kernel(const float* logits, const int32_t* labels, int rows, int cols,
                                    float* dlogits, float grad_scale, float smoothing, float* row_loss,
                                    int* row_hit) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* z = logits + size_t(warp) * cols;
  float zmax = -FLT_MAX;
  int arg = 0;
  for (int c = lane; c < cols; c += 32)
    if (z[c] > zmax) zmax = z[c], arg = c;
  for (int off = 16; off > 0; off /= 2) {
    float om = __shfl_down_sync(0xffffffff, zmax, off);
    int oa = __shfl_down_sync(0xffffffff, arg, off);
    if (om > zmax || (om == zmax && oa < arg)) zmax = om, arg = oa;
  }
  zmax = __shfl_sync(0xffffffff, zmax, 0);
  arg = __shfl_sync(0xffffffff, arg, 0);
  float sum = 0, shifted = 0;  // Σ e^(z−zmax), Σ (z − zmax)
  for (int c = lane; c < cols; c += 32) {
    sum += expf(z[c] - zmax);
    shifted += z[c] - zmax;
  }
  for (int off = 16; off > 0; off /= 2) {
    sum += __shfl_down_sync(0xffffffff, sum, off);
    shifted += __shfl_down_sync(0xffffffff, shifted, off);
  }
  sum = __shfl_sync(0xffffffff, sum, 0);
  const int y = labels[warp];
  const float spread = smoothing / cols;  // label smoothing: q = (1 − smoothing)·onehot + spread
  if (dlogits) {
    float* d = dlogits + size_t(warp) * cols;
    for (int c = lane; c < cols; c += 32)
      d[c] = (expf(z[c] - zmax) / sum - (c == y ? 1.0f - smoothing : 0.0f) - spread) * grad_scale;
  }
  if (lane == 0) {
    row_loss[warp] = logf(sum) - (1.0f - smoothing) * (z[y] - zmax) - (smoothing != 0.0f ? spread * shifted : 0.0f);
    row_hit[warp] = arg == y;
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                           float wd, bool nesterov) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float gi = g[i] + wd * w[i];
    float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  }
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, size_t n, float beta1, float beta2,
                             float eps, float decay, float step_size, float bias2_root) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay - step_size * mi / (sqrtf(vi) / bias2_root + eps);
  }
}

__global__ void axpy_kernel(size_t n, float a, const float* x, float* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] += a * x[i];
}

__global__ void scale_kernel(size_t n, float a, float* x) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] *= a;
}

// One block: each thread sums a stride of rows in double, then a fixed tree in shared memory.
__global__ void tally_kernel(const float* row_loss, const int* row_hit, int rows, double* loss,
                             unsigned long long* hits) {
  __shared__ double sums[kThreads];
  __shared__ unsigned long long counts[kThreads];
  double s = 0;
  unsigned long long c = 0;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    s += row_loss[r];
    c += static_cast<unsigned long long>(row_hit[r]);
  }
  sums[threadIdx.x] = s;
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *loss += static_cast<double>(static_cast<float>(sums[0]));  // the batch's float sum, as LossResult holds it
    *hits += counts[0];
  }
}

__global__ void gather_rows_kernel(const uint8_t* bytes, const float* table, const float* floats,
                                   const int32_t* labels, int cols, const int32_t* rows, int count, float* x,
                                   int32_t* y) {
  const size_t n = size_t(count) * cols;
  for (size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x) {
    const size_t i = k / cols, c = k % cols;
    const size_t from = size_t(rows[i]) * cols + c;
    x[k] = bytes ? table[bytes[from]] : floats[from];
    if (c == 0) y[i] = labels[rows[i]];
  }
}

__global__ void gather_windows_kernel(const uint8_t* text, const int64_t* starts, int count, int context,
                                      int32_t* tokens, int32_t* targets) {
  const size_t n = size_t(count) * context;
  for (size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x) {
    const size_t from = size_t(starts[k / context]) + k % context;
    tokens[k] = text[from];
    targets[k] = text[from + 1];
  }
}

// Q(x): x rounded to bf16 as the host rounds it (bf16_bits) and widened back.
__device__ float round_bf16(float f) { return __uint_as_float(uint32_t(bf16_bits(__float_as_uint(f))) << 16); }

__global__ void pack_bf16_kernel(const float* x, uint16_t* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = bf16_bits(__float_as_uint(x[i]));
}

__device__ float load_value(const void* values, size_t i, bool bf16) {
  if (bf16) return __uint_as_float(unsigned(static_cast<const unsigned short*>(values)[i]) << 16);
  return static_cast<const float*>(values)[i];
}

// Grid-stride over the span; with partials, each thread's sums are reduced in the block (shared
// memory, a fixed tree: deterministic, no atomics).
__global__ void mix_kernel(const float* src, float* dst, size_t n, float self, float rest, bool bf16,
                           bool accumulate, MixBatch batch, float* partials, unsigned* bad) {
  float sq[kMixBatch + 1] = {};
  unsigned flags[kMixBatch] = {};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = src[i];
    const float q = bf16 ? round_bf16(x) : x;  // what stands in for a neighbour left out
    float y = accumulate ? dst[i] : (bf16 ? __fsub_rn(x, __fmul_rn(rest, q)) : __fmul_rn(self, x));
    for (int k = 0; k < batch.count; ++k) {
      const float a = batch.values[k] ? load_value(batch.values[k], i, bf16) : q;
      y = __fadd_rn(y, __fmul_rn(batch.weights[k], a));
      sq[k] += a * a;
      flags[k] |= (__float_as_uint(a) & 0x7F800000u) == 0x7F800000u;
    }
    sq[kMixBatch] += x * x;
    dst[i] = y;
  }
  if (!partials) return;
  __shared__ float sums[kThreads][kMixBatch + 1];
  __shared__ unsigned ors[kThreads][kMixBatch];
  for (int k = 0; k <= kMixBatch; ++k) sums[threadIdx.x][k] = sq[k];
  for (int k = 0; k < kMixBatch; ++k) ors[threadIdx.x][k] = flags[k];
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      for (int k = 0; k <= kMixBatch; ++k) sums[threadIdx.x][k] += sums[threadIdx.x + half][k];
      for (int k = 0; k < kMixBatch; ++k) ors[threadIdx.x][k] |= ors[threadIdx.x + half][k];
    }
    __syncthreads();
  }
  if (threadIdx.x <= kMixBatch) partials[blockIdx.x * (kMixBatch + 1) + threadIdx.x] = sums[0][threadIdx.x];
  if (threadIdx.x < kMixBatch) bad[blockIdx.x * kMixBatch + threadIdx.x] = ors[0][threadIdx.x];
}

__global__ void push_sum_kernel(const float* z, float* x, size_t n, float inv, float gain, float self, bool bf16,
                                bool update, bool finish, PushBatch batch, float* residual) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float y = x[i];
    if (update) y = __fadd_rn(y, __fmul_rn(gain, __fsub_rn(z[i], __fmul_rn(y, inv))));
    bool summed = !update;  // a later launch goes on with the residual sum the earlier ones left
    float r = summed && bf16 ? residual[i] : 0.0f;
    for (int k = 0; k < batch.count; ++k) {
      const float sent = __fmul_rn(batch.weights[k], y);
      if (!bf16) {
        static_cast<float*>(batch.shares[k])[i] = sent;
        continue;
      }
      const float q = round_bf16(sent);
      static_cast<unsigned short*>(batch.shares[k])[i] = static_cast<unsigned short>(__float_as_uint(q) >> 16);
      const float d = __fsub_rn(sent, q);
      r = summed ? __fadd_rn(r, d) : d;
      summed = true;
    }
    if (finish) {
      x[i] = bf16 && summed ? __fadd_rn(__fmul_rn(self, y), r) : __fmul_rn(self, y);
    } else {
      x[i] = y;
      if (bf16) residual[i] = r;
    }
  }
}

__global__ void accumulate_kernel(float* x, const void* values, size_t n, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = __fadd_rn(x[i], load_value(values, i, bf16));
}

__global__ void scale_copy_kernel(size_t n, float a, const float* x, float* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = __fmul_rn(a, x[i]);
}

}  // namespace

void push_sum_split(const float* z, float* x, size_t n, float inv, float gain, float self, bool bf16, bool update,
                    bool finish, const PushBatch& batch, float* residual, cudaStream_t s) {
  if (n)
    push_sum_kernel<<<blocks_for(n), kThreads, 0, s>>>(z, x, n, inv, gain, self, bf16, update, finish, batch,
                                                       residual);
}
void accumulate(float* x, const void* values, size_t n, bool bf16, cudaStream_t s) {
  if (n) accumulate_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, values, n, bf16);
}
void scale_copy(size_t n, float a, const float* x, float* y, cudaStream_t s) {
  if (n) scale_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, x, y);
}

void pack_bf16(const float* x, uint16_t* out, size_t n, cudaStream_t s) {
  if (n) pack_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, out, n);
}

unsigned mix_blocks(size_t n) { return blocks_for(n) < kMixBlocks ? blocks_for(n) : kMixBlocks; }

void mix_span(const float* src, float* dst, size_t n, float self, float rest, bool bf16, bool accumulate,
              const MixBatch& batch, float* partials, unsigned* bad, cudaStream_t s) {
  if (n) mix_kernel<<<mix_blocks(n), kThreads, 0, s>>>(src, dst, n, self, rest, bf16, accumulate, batch, partials, bad);
}

void gather_rows(const uint8_t* bytes, const float* table, const float* floats, const int32_t* labels, int cols,
                 const int32_t* rows, int count, float* x, int32_t* y, cudaStream_t s) {
  const size_t n = size_t(count) * cols;
  if (n) gather_rows_kernel<<<blocks_for(n), kThreads, 0, s>>>(bytes, table, floats, labels, cols, rows, count, x, y);
}
void gather_windows(const uint8_t* text, const int64_t* starts, int count, int context, int32_t* tokens,
                    int32_t* targets, cudaStream_t s) {
  const size_t n = size_t(count) * context;
  if (n) gather_windows_kernel<<<blocks_for(n), kThreads, 0, s>>>(text, starts, count, context, tokens, targets);
}
void fill(float* p, float value, size_t n, cudaStream_t s) {
  if (n) fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, value, n);
}
void bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu, cudaStream_t s) {
  size_t n = size_t(rows) * cols;
  if (n) bias_act_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, bias, rows, cols, relu);
}
void relu_backward(float* dy, const float* y, size_t n, cudaStream_t s) {
  if (n) relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, n);
}
void column_sum(const float* dy, float* db, int rows, int cols, cudaStream_t s) {
  if (cols) column_sum_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(dy, db, rows, cols);
}
void softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                  float grad_scale, float smoothing, float* row_loss, int* row_hit, cudaStream_t s) {
  if (!rows) return;
  const int warps_per_block = kThreads / 32;
  softmax_xent_kernel<<<(rows + warps_per_block - 1) / warps_per_block, kThreads, 0, s>>>(
      logits, labels, rows, cols, dlogits, grad_scale, smoothing, row_loss, row_hit);
}
void tally_rows(const float* row_loss, const int* row_hit, int rows, double* loss, unsigned long long* hits,
                cudaStream_t s) {
  if (rows > 0) tally_kernel<<<1, kThreads, 0, s>>>(row_loss, row_hit, rows, loss, hits);
}
void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum, float wd,
                bool nesterov, cudaStream_t s) {
  if (n) sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, g, v, n, lr, momentum, wd, nesterov);
}
void adamw_update(float* w, const float* g, float* m, float* v, size_t n, float beta1, float beta2, float eps,
                  float decay, float step_size, float bias2_root, cudaStream_t s) {
  if (n) adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, g, m, v, n, beta1, beta2, eps, decay, step_size, bias2_root);
}
void axpy(size_t n, float a, const float* x, float* y, cudaStream_t s) {
  if (n) axpy_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, x, y);
}
void scale(size_t n, float a, float* x, cudaStream_t s) {
  if (n) scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, x);
}

}  // namespace gossip::kernels::cuda
