// CUDA backend: cuBLAS for gemm, .cu kernels for the rest, one stream, and a pinned host staging
// buffer for uploads and downloads (so copies are DMA transfers, not pageable bounces).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/log.h"
#include "kernels/backend.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_layers.h"

namespace gossip::kernels {
namespace {

// RAII owners of the CUDA handles (move-only through unique_ptr).
struct StreamDeleter {
  void operator()(CUstream_st* s) const noexcept { cudaStreamDestroy(s); }
};
struct CublasDeleter {
  void operator()(cublasContext* h) const noexcept { cublasDestroy(h); }
};
struct PinnedDeleter {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};

constexpr size_t kStagingBytes = 8 << 20;  // pinned staging buffer; larger copies go in pieces

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index) {
    // The current device is per thread: the thread that creates the backend is the one that uses it.
    GOSSIP_CUDA_CHECK(cudaSetDevice(device_index));
    cudaStream_t s;
    GOSSIP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_.reset(s);
    cublasHandle_t h;
    GOSSIP_CUBLAS_CHECK(cublasCreate(&h));
    cublas_.reset(h);
    GOSSIP_CUBLAS_CHECK(cublasSetStream(h, s));
    void* pinned;
    GOSSIP_CUDA_CHECK(cudaMallocHost(&pinned, kStagingBytes));
    staging_.reset(pinned);
    int* scratch;
    GOSSIP_CUDA_CHECK(cudaMalloc(&scratch, sizeof(int)));  // probe that allocation works
    GOSSIP_CUDA_CHECK(cudaFree(scratch));
    layers_ = std::make_unique<CudaLayers>(*this, s);
  }

  std::string name() const override { return "cuda"; }
  TransferStats transfers() const override { return transfers_; }
  bool is_host() const override { return false; }

  void* alloc_bytes(size_t bytes) override {
    void* p = nullptr;
    GOSSIP_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  // noexcept (DeviceArray's destructor): a failure is kept and thrown by the next checked call,
  // naming cudaFree, instead of surfacing at an unrelated launch.
  void free_bytes(void* p) noexcept override { note_free(cudaFree(p)); }

  void upload(void* dst, const void* host_src, size_t bytes) override {
    transfers_.host_to_device += bytes;
    for (size_t off = 0; off < bytes; off += kStagingBytes) {
      size_t len = std::min(kStagingBytes, bytes - off);
      GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));  // staging buffer free again
      std::memcpy(staging_.get(), static_cast<const char*>(host_src) + off, len);
      GOSSIP_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + off, staging_.get(), len,
                                        cudaMemcpyHostToDevice, stream()));
    }
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    transfers_.device_to_host += bytes;
    for (size_t off = 0; off < bytes; off += kStagingBytes) {
      size_t len = std::min(kStagingBytes, bytes - off);
      GOSSIP_CUDA_CHECK(cudaMemcpyAsync(staging_.get(), static_cast<const char*>(src) + off, len,
                                        cudaMemcpyDeviceToHost, stream()));
      GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      std::memcpy(static_cast<char*>(host_dst) + off, staging_.get(), len);
    }
  }
  void fill(float* p, float value, size_t n) override { cuda::fill(p, value, n, stream()); check_launch(); }
  void copy_bytes(void* dst, const void* src, size_t bytes) override {
    if (bytes) GOSSIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  void gather_windows(const WindowGather& g) override {
    cuda::gather_windows(g.text, g.starts, g.count, g.context, g.tokens, g.targets, stream());
    check_launch();
  }
  void gather_rows(const RowGather& g) override {
    cuda::gather_rows(g.bytes, g.table, g.floats, g.labels, g.cols, g.rows, g.count, g.x, g.y, stream());
    check_launch();
  }
  void synchronize() override { GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream())); }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    if (m == 0 || n == 0) return;
    // Row-major C = op(A)op(B) is column-major Cᵀ = op(B)ᵀop(A)ᵀ: swap the operands.
    const int lda = trans_a ? m : k;
    const int ldb = trans_b ? k : n;
    GOSSIP_CUBLAS_CHECK(cublasSgemm(cublas_.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                    lda, &beta, c, n));
  }
  void bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu) override {
    cuda::bias_act_forward(y, bias, rows, cols, relu, stream());
    check_launch();
  }
  void relu_backward(float* dy, const float* y, size_t n) override {
    cuda::relu_backward(dy, y, n, stream());
    check_launch();
  }
  void column_sum(const float* dy, float* db, int rows, int cols) override {
    cuda::column_sum(dy, db, rows, cols, stream());
    check_launch();
  }
  LossResult softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                          float* dlogits, float grad_scale, float smoothing) override {
    float* row_loss = row_loss_.at_least(*this, size_t(rows));
    int* row_hit = row_hit_.at_least(*this, size_t(rows));
    cuda::softmax_xent(logits, labels, rows, cols, dlogits, grad_scale, smoothing, row_loss, row_hit, stream());
    check_launch();
    std::vector<float> loss(rows);
    std::vector<int> hit(rows);
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(loss.data(), row_loss, rows * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(hit.data(), row_hit, rows * sizeof(int), cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    LossResult r;
    double sum = 0;
    for (int i = 0; i < rows; ++i) sum += loss[i], r.correct += hit[i];
    r.loss_sum = static_cast<float>(sum);
    return r;
  }
  // The rows' losses and hits are summed on the device into the tally: nothing waits here.
  void tally_softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                          float grad_scale, float smoothing) override {
    float* row_loss = row_loss_.at_least(*this, size_t(rows));
    int* row_hit = row_hit_.at_least(*this, size_t(rows));
    if (!tally_loss_.get()) {
      GOSSIP_CUDA_CHECK(cudaMemsetAsync(tally_loss_.at_least(*this, 1), 0, sizeof(double), stream()));
      GOSSIP_CUDA_CHECK(cudaMemsetAsync(tally_hits_.at_least(*this, 1), 0, sizeof(unsigned long long), stream()));
    }
    cuda::softmax_xent(logits, labels, rows, cols, dlogits, grad_scale, smoothing, row_loss, row_hit, stream());
    check_launch();
    cuda::tally_rows(row_loss, row_hit, rows, tally_loss_.get(), tally_hits_.get(), stream());
    check_launch();
  }
  LossTally take_tally() override {
    if (!tally_loss_.get()) return {};
    double loss = 0;
    unsigned long long hits = 0;
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(&loss, tally_loss_.get(), sizeof loss, cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(&hits, tally_hits_.get(), sizeof hits, cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaMemsetAsync(tally_loss_.get(), 0, sizeof(double), stream()));
    GOSSIP_CUDA_CHECK(cudaMemsetAsync(tally_hits_.get(), 0, sizeof(unsigned long long), stream()));
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    transfers_.device_to_host += sizeof loss + sizeof hits;
    return {loss, static_cast<int64_t>(hits)};
  }
  void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) override {
    cuda::sgd_update(w, g, v, n, lr, momentum, weight_decay, nesterov, stream());
    check_launch();
  }
  void adamw_update(float* w, const float* g, float* m, float* v, size_t n, const AdamWStep& s) override {
    cuda::adamw_update(w, g, m, v, n, s.beta1, s.beta2, s.eps, 1.0f - s.lr * s.weight_decay, s.lr / s.bias1,
                       std::sqrt(s.bias2), stream());
    check_launch();
  }
  double norm2(const float* x, size_t n) override {
    float result = 0;  // cuBLAS writes it to the host and waits for the stream (host pointer mode)
    if (n) GOSSIP_CUBLAS_CHECK(cublasSnrm2(cublas_.get(), static_cast<int>(n), x, 1, &result));
    return result;
  }
  void axpy(size_t n, float a, const float* x, float* y) override {
    cuda::axpy(n, a, x, y, stream());
    check_launch();
  }
  void scale(size_t n, float a, float* x) override {
    cuda::scale(n, a, x, stream());
    check_launch();
  }

  // One launch per kMixBatch neighbours, in order (the later ones add to dst). Scans and the norm
  // come back as per-block partial sums (a small download, counted), added up in double here.
  double mix_span(const MixSpan& m) override {
    const bool reduce = (m.scans || m.norm) && m.n > 0;
    const unsigned blocks = cuda::mix_blocks(m.n);
    float* partials = reduce ? mix_partials_.at_least(*this, cuda::kMixBlocks * (cuda::kMixBatch + 1)) : nullptr;
    unsigned* bad = reduce ? mix_bad_.at_least(*this, cuda::kMixBlocks * cuda::kMixBatch) : nullptr;
    double norm = 0;
    size_t done = 0;
    do {
      cuda::MixBatch batch{};
      batch.count = static_cast<int>(std::min<size_t>(cuda::kMixBatch, m.degree - done));
      for (int k = 0; k < batch.count; ++k) {
        batch.values[k] = m.values[done + k];
        batch.weights[k] = m.weights[done + k];
      }
      cuda::mix_span(m.src, m.dst, m.n, m.self, m.rest, m.bf16, done > 0, batch, partials, bad, stream());
      check_launch();
      if (reduce) norm += add_mix_partials(m, done, batch.count, blocks);
      done += batch.count;
    } while (done < m.degree);
    return m.norm ? norm : 0;
  }

  void pack_bf16(const float* x, uint16_t* out, size_t n) override {
    cuda::pack_bf16(x, out, n, stream());
    check_launch();
  }

  // One launch per kPushBatch shares; with several, y and the bf16 residual sum wait in x and a
  // device scratch between them.
  void push_sum_split(const PushSumSplit& s) override {
    const bool several = s.degree > static_cast<size_t>(cuda::kPushBatch);
    float* residual = several && s.bf16 ? push_residual_.at_least(*this, s.n) : push_residual_.get();
    size_t done = 0;
    do {
      cuda::PushBatch batch{};
      batch.count = static_cast<int>(std::min<size_t>(cuda::kPushBatch, s.degree - done));
      for (int k = 0; k < batch.count; ++k) {
        batch.shares[k] = s.shares[done + k];
        batch.weights[k] = s.weights[done + k];
      }
      const bool finish = done + batch.count >= s.degree;
      cuda::push_sum_split(s.z, s.x, s.n, s.inv, s.gain, s.self, s.bf16, done == 0, finish, batch, residual, stream());
      check_launch();
      done += batch.count;
    } while (done < s.degree);
  }
  void accumulate(float* x, const void* values, size_t n, bool bf16) override {
    cuda::accumulate(x, values, n, bf16, stream());
    check_launch();
  }
  void scale_copy(size_t n, float a, const float* x, float* y) override {
    cuda::scale_copy(n, a, x, y, stream());
    check_launch();
  }

  LayerKernels* layers() override { return layers_.get(); }

  ~CudaBackend() override {
    // The scratch freed here, so a failure is logged below.
    row_loss_ = {};
    row_hit_ = {};
    mix_partials_ = {};
    mix_bad_ = {};
    push_residual_ = {};
    tally_loss_ = {};
    tally_hits_ = {};
    if (!free_error_.empty()) log("cuda backend: ", free_error_);
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }
  void check_launch() {
    if (!free_error_.empty()) throw Error("cuda backend", "an earlier " + free_error_);
    GOSSIP_CUDA_CHECK(cudaGetLastError());
  }
  void note_free(cudaError_t status) noexcept {
    if (status != cudaSuccess && free_error_.empty()) free_error_ = std::string("cudaFree failed: ") + cudaGetErrorString(status);
  }
  // Adds a launch's per-block sums to m.scans[first..first + count) and returns its Σ src² (the
  // first launch's; 0 for the later ones, which do not read src for the mix).
  double add_mix_partials(const MixSpan& m, size_t first, int count, unsigned blocks) {
    constexpr int kStride = cuda::kMixBatch + 1;
    std::vector<float> sums(size_t(blocks) * kStride);
    std::vector<unsigned> bad(size_t(blocks) * cuda::kMixBatch);
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(sums.data(), mix_partials_.get(), sums.size() * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaMemcpyAsync(bad.data(), mix_bad_.get(), bad.size() * sizeof(unsigned), cudaMemcpyDeviceToHost, stream()));
    GOSSIP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    transfers_.device_to_host += sums.size() * sizeof(float) + bad.size() * sizeof(unsigned);
    double norm = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      norm += sums[size_t(b) * kStride + cuda::kMixBatch];
      for (int k = 0; m.scans && k < count; ++k) {
        m.scans[first + k].sum_squares += sums[size_t(b) * kStride + k];
        if (bad[size_t(b) * cuda::kMixBatch + k]) m.scans[first + k].finite = false;
      }
    }
    return first == 0 ? norm : 0;
  }

  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
  std::unique_ptr<void, PinnedDeleter> staging_;
  TransferStats transfers_;
  std::string free_error_;  // the first failed cudaFree of a noexcept path, thrown by check_launch()
  // Grow-only scratch in this backend's memory (after free_error_, which their frees may set).
  DeviceArray<float> row_loss_;  // per-row losses and hits of softmax_xent
  DeviceArray<int> row_hit_;
  DeviceArray<float> mix_partials_;  // mix_span's per-block sums (cuda::kMixBlocks of them)
  DeviceArray<unsigned> mix_bad_;
  DeviceArray<float> push_residual_;  // push_sum_split's residual sums between launches
  DeviceArray<double> tally_loss_;    // tally_softmax_xent's sums until take_tally
  DeviceArray<unsigned long long> tally_hits_;
  std::unique_ptr<CudaLayers> layers_;  // last: its scratch is freed while the backend still works
};

}  // namespace

}  // namespace gossip::kernels

// The module's one entry point (kernels/backend.cc loads it with dlopen): a new backend on
// `device_index`, owned by the caller; throws gossip::Error as the constructor does.
extern "C" gossip::kernels::Backend* gossip_make_cuda_backend(int device_index) {
  return new gossip::kernels::CudaBackend(device_index);
}
