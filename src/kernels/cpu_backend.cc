#include "kernels/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "common/error.h"
#include "common/shared_memory.h"
#include "kernels/bf16.h"

namespace gossip::kernels {

CpuBackend::CpuBackend() = default;

void* CpuBackend::alloc_bytes(size_t bytes) {
  // 64-byte alignment keeps sgemm and the vectorised loops on aligned loads.
  return ::operator new(bytes, std::align_val_t{64});
}

void* CpuBackend::alloc_shared_bytes(size_t bytes) {
  if (void* p = shm::allocate_shared(bytes)) return p;  // page-aligned
  return alloc_bytes(bytes);
}

void CpuBackend::free_bytes(void* p) noexcept {
  if (shm::free_shared(p)) return;
  ::operator delete(p, std::align_val_t{64});
}

void CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::fill(float* p, float value, size_t n) { std::fill(p, p + n, value); }
void CpuBackend::copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::gather_rows(const RowGather& g) {
  const size_t cols = static_cast<size_t>(g.cols);
  for (int i = 0; i < g.count; ++i) {
    const size_t r = static_cast<size_t>(g.rows[i]);
    float* out = g.x + size_t(i) * cols;
    if (g.bytes) {
      const uint8_t* in = g.bytes + r * cols;
      for (size_t c = 0; c < cols; ++c) out[c] = g.table[in[c]];
    } else {
      std::memcpy(out, g.floats + r * cols, cols * sizeof(float));
    }
    g.y[i] = g.labels[r];
  }
}
void CpuBackend::pack_bf16(const float* x, uint16_t* out, size_t n) { to_bf16(x, out, n); }

void CpuBackend::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

void CpuBackend::bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<size_t>(r) * cols;
    if (relu) {
      for (int c = 0; c < cols; ++c) row[c] = std::max(row[c] + bias[c], 0.0f);
    } else {
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }
}

void CpuBackend::relu_backward(float* dy, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void CpuBackend::column_sum(const float* dy, float* db, int rows, int cols) {
  std::fill(db, db + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

LossResult CpuBackend::softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                                    float* dlogits, float grad_scale, float smoothing) {
  LossResult result;
  double loss = 0;
  const double spread = double(smoothing) / cols;  // every class's share of the smoothing
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * cols;
    int arg = 0;
    float zmax = z[0];
    for (int c = 1; c < cols; ++c)
      if (z[c] > zmax) zmax = z[c], arg = c;
    double sum = 0;
    for (int c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    const int y = labels[r];
    // −Σ_c q_c·log p_c = log Σ e^(z−zmax) − Σ_c q_c·(z_c − zmax)
    double target = (1.0 - smoothing) * (z[y] - zmax);
    if (smoothing != 0)
      for (int c = 0; c < cols; ++c) target += spread * (z[c] - zmax);
    loss += std::log(sum) - target;
    result.correct += arg == y;
    if (dlogits) {
      float* d = dlogits + static_cast<size_t>(r) * cols;
      const double inv = 1.0 / sum;
      for (int c = 0; c < cols; ++c)
        d[c] = static_cast<float>(
            (std::exp(static_cast<double>(z[c] - zmax)) * inv - (c == y) * (1.0 - smoothing) - spread) * grad_scale);
    }
  }
  result.loss_sum = static_cast<float>(loss);
  return result;
}

void CpuBackend::tally_softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                                    float grad_scale, float smoothing) {
  const LossResult r = softmax_xent(logits, labels, rows, cols, dlogits, grad_scale, smoothing);
  tally_.loss_sum += r.loss_sum;
  tally_.correct += r.correct;
}

void CpuBackend::gather_windows(const WindowGather& g) {
  for (int i = 0; i < g.count; ++i) {
    const uint8_t* in = g.text + g.starts[i];
    int32_t* tokens = g.tokens + size_t(i) * g.context;
    int32_t* targets = g.targets + size_t(i) * g.context;
    for (int t = 0; t < g.context; ++t) {
      tokens[t] = in[t];
      targets[t] = in[t + 1];
    }
  }
}

LossTally CpuBackend::take_tally() { return std::exchange(tally_, LossTally{}); }

void CpuBackend::sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                            float weight_decay, bool nesterov) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] + weight_decay * w[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  }
}

void CpuBackend::adamw_update(float* w, const float* g, float* m, float* v, size_t n, const AdamWStep& s) {
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float step_size = s.lr / s.bias1;
  const float bias2_root = std::sqrt(s.bias2);
  for (size_t i = 0; i < n; ++i) {
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g[i];
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay - step_size * mi / (std::sqrt(vi) / bias2_root + s.eps);
  }
}

double CpuBackend::norm2(const float* x, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  return std::sqrt(sum);
}

void CpuBackend::axpy(size_t n, float a, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void CpuBackend::scale(size_t n, float a, float* x) {
  for (size_t i = 0; i < n; ++i) x[i] *= a;
}

void set_cpu_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace gossip::kernels
