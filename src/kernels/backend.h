// One interface for the numerical work of a peer. The CPU backend (OpenBLAS + loops) is the
// reference and is always built; the CUDA backend (cuBLAS + .cu kernels) sits beside it and is
// chosen at run time. All float pointers passed to a backend are its own memory (device memory for
// CUDA), obtained through DeviceArray; host pointers are named `host_*`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/layer_kernels.h"

namespace gossip::kernels {

struct LossResult {
  float loss_sum = 0;  // summed over the batch (not averaged)
  int correct = 0;     // arg-max hits
};
// The sum of many batches' LossResults (Backend::tally_softmax_xent, take_tally).
struct LossTally {
  double loss_sum = 0;
  int64_t correct = 0;
};

// One AdamW step's scalars (see model::AdamW): bias1 = 1 − β1^t, bias2 = 1 − β2^t.
// Bytes moved between the host and a device backend's memory by upload() and download() (zero
// for the CPU backend, whose memory is the host's).
struct TransferStats {
  uint64_t host_to_device = 0, device_to_host = 0;
};

struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0, bias1 = 1, bias2 = 1;
};

// One span of a gossip mix (D-PSGD's x_i <- W_ii·x_i + Σ_j W_ij·x_j; algorithms::GossipStep),
// in a backend's memory unless marked host:
//   f32 values:  dst = self·src + Σ_k w_k·v_k
//   bf16 values: dst = src − rest·Q(src) + Σ_k w_k·v_k,  rest = Σ_k w_k, Q = rounding to bf16
// each product and sum rounded on its own, in the order written (no fused multiply-add), so that
// every backend gives the same bits. v_k = values[k]; a null values[k] is a neighbour left out
// (NaN, an outlier, a bad checksum): src (bf16: Q(src)) stands in, so its weight stays with us.
struct ValueScan {
  double sum_squares = 0;
  bool finite = true;  // false once a value was NaN or ±Inf
};
struct MixSpan {
  size_t n = 0;
  float self = 1, rest = 0;
  bool bf16 = false;               // values[k] hold bf16 (uint16_t) values, else floats
  const float* src = nullptr;      // our values
  float* dst = nullptr;            // the mix (not src)
  const uint16_t* own = nullptr;   // bf16, host backends: Q(src), what was sent (device backends round src)
  size_t degree = 0;
  const void* const* values = nullptr;  // host array [degree] of pointers into backend memory
  const float* weights = nullptr;       // host array [degree]
  // Host array [degree] or null: Σ v_k² and finiteness of each values[k], added to in the same
  // pass as the mix (the one read of values another process may rewrite: single copy's regions).
  ValueScan* scans = nullptr;
  bool norm = false;  // return Σ src² (the outlier screen's reference), else 0
  // With scans: the values may change while they are read (another process's shared region).
  // The CPU backend then loads each value once, in a way the compiler cannot turn into a second
  // read (x86-64 with AVX2), and the scan and the mix both use that load: what is mixed is
  // exactly what was scanned.
  bool snapshot = false;
};

// One push-sum round's local update and split (algorithms::PushSumStep) over n values, in a
// backend's memory:
//   y   = x + gain·(z − x·inv)        the local step applied to the numerator (z: the model after it)
//   s_k = p_k·y                        (bf16 shares: Q(p_k·y), and d_k = p_k·y − Q(p_k·y))
//   x   = self·y                       (bf16: self·y + r, r = d_0 + d_1 + … summed in order)
// each product and sum rounded on its own, in the order written, so every backend gives the same
// bits; what rounding takes off a bf16 share stays in x, so Σx is conserved.
struct PushSumSplit {
  size_t n = 0;
  const float* z = nullptr;
  float* x = nullptr;  // updated in place
  float inv = 1, gain = 1, self = 1;
  bool bf16 = false;               // shares[k] take bf16 (uint16_t) values, else floats
  size_t degree = 0;
  void* const* shares = nullptr;   // host array [degree] of pointers into backend memory
  const float* weights = nullptr;  // host array [degree]: p_k
};

// A batch gathered from a data set held in a backend's memory (all pointers that memory's):
//   x[i][c] = table[bytes[rows[i]][c]] (stored bytes and the float each value stands for), or
//   x[i][c] = floats[rows[i]][c];  y[i] = labels[rows[i]];  for i < count, c < cols.
struct RowGather {
  const uint8_t* bytes = nullptr;  // [data rows][cols], or null: floats
  const float* table = nullptr;    // [256]
  const float* floats = nullptr;   // [data rows][cols]
  const int32_t* labels = nullptr;
  int cols = 0;
  const int32_t* rows = nullptr;  // [count]
  int count = 0;
  float* x = nullptr;  // [count][cols]
  int32_t* y = nullptr;
};

// Windows of a text in a backend's memory gathered into a language model's batch:
//   tokens[i][t] = text[starts[i] + t],  targets[i][t] = text[starts[i] + t + 1],  t < context.
struct WindowGather {
  const uint8_t* text = nullptr;
  const int64_t* starts = nullptr;  // [count]
  int count = 0, context = 0;
  int32_t* tokens = nullptr;   // [count][context]
  int32_t* targets = nullptr;  // [count][context]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool is_host() const = 0;  // true when backend memory is plain host memory

  // Memory.
  virtual void* alloc_bytes(size_t bytes) = 0;
  virtual void free_bytes(void* p) noexcept = 0;
  // Memory other processes on this host may map read-only (host backends: a memfd, which single
  // copy's readers fold from in place; common/shared_memory.h); plain alloc_bytes elsewhere.
  // Freed with free_bytes like any other.
  virtual void* alloc_shared_bytes(size_t bytes) { return alloc_bytes(bytes); }
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void fill(float* p, float value, size_t n) = 0;
  // Within this backend's memory (nothing crosses to the host).
  virtual void copy_bytes(void* dst, const void* src, size_t bytes) = 0;
  virtual void gather_rows(const RowGather& g) = 0;
  virtual void gather_windows(const WindowGather& g) = 0;
  virtual void synchronize() = 0;
  virtual TransferStats transfers() const { return {}; }

  // C[m×n] = alpha·op(A)·op(B) + beta·C, all row-major; op(A) is m×k and op(B) is k×n.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    const float* b, float beta, float* c) = 0;
  // y[r][c] += bias[c], then ReLU when `relu`.
  virtual void bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu) = 0;
  // dy[i] = 0 where y[i] <= 0 (y is the ReLU output).
  virtual void relu_backward(float* dy, const float* y, size_t n) = 0;
  // db[c] = Σ_r dy[r][c].
  virtual void column_sum(const float* dy, float* db, int rows, int cols) = 0;
  // Softmax cross-entropy over rows against the target q = (1 − smoothing)·onehot + smoothing/cols
  // (label smoothing; 0: the one-hot label); writes dlogits = (softmax − q)·grad_scale when dlogits
  // is not null. Labels outside [0, cols) are a programming error (checked by the data loader).
  virtual LossResult softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                                  float* dlogits, float grad_scale, float smoothing) = 0;
  // softmax_xent whose loss sum and hits are added to this backend's tally instead of returned:
  // on a device the tally stays in device memory, so a training step need not wait for its loss.
  virtual void tally_softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                                  float grad_scale, float smoothing) = 0;
  // The tally since the last call (then zero again): on a device one small download.
  virtual LossTally take_tally() = 0;
  // PyTorch-convention SGD: g += wd·w; v = μ·v + g; step = nesterov ? g + μ·v : v; w -= lr·step.
  virtual void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                          float weight_decay, bool nesterov) = 0;
  // PyTorch-convention AdamW: w ← w·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
  // w ← w − (lr/bias1)·m / (√v/√bias2 + ε).
  virtual void adamw_update(float* w, const float* g, float* m, float* v, size_t n, const AdamWStep& s) = 0;
  virtual double norm2(const float* x, size_t n) = 0;                  // √(Σ x²)
  virtual void axpy(size_t n, float a, const float* x, float* y) = 0;  // y += a·x
  virtual void scale(size_t n, float a, float* x) = 0;                 // x *= a
  // The gossip mix of one span (MixSpan); returns Σ src² when m.norm, else 0.
  virtual double mix_span(const MixSpan& m) = 0;
  // Push-sum's update and split (PushSumSplit).
  virtual void push_sum_split(const PushSumSplit& s) = 0;
  // x[i] += v[i] (v floats, or bf16 values widened): a push-sum message's chunk folded in.
  virtual void accumulate(float* x, const void* values, size_t n, bool bf16) = 0;
  // y[i] = a·x[i] (push-sum's de-biased model x/w; a = 1: a copy within this backend's memory).
  virtual void scale_copy(size_t n, float a, const float* x, float* y) = 0;
  // out[i] = to_bf16(x[i]) (kernels/bf16.h, bit for bit), both in this backend's memory: a
  // device's values rounded where they lie, so only half the bytes come down to be sent.
  virtual void pack_bf16(const float* x, uint16_t* out, size_t n) = 0;

  // The layer graph's kernels (convolution, norms, attention, ...), or null when this backend has
  // none yet: then only the MLP trains on it (model::Network says so when it is built).
  virtual LayerKernels* layers() { return nullptr; }
};

enum class Device { kAuto, kCpu, kCuda };
// "auto", "cpu", "cuda" (the YAML's and the flags' names); nullopt for any other.
std::optional<Device> parse_device(const std::string& name);
// kAuto: CUDA when a device answers, else CPU with a log line (naming why CUDA did not answer).
// `device_index`: the CUDA device (cudaSetDevice on the creating thread, which is the one that
// uses the backend); -1: local_rank() modulo the number of visible devices, so that the peers of
// one host spread over its GPUs.
std::unique_ptr<Backend> make_backend(Device device, int device_index = -1);
// By name; throws gossip::Error for an unknown one.
std::unique_ptr<Backend> make_backend(const std::string& device);
std::unique_ptr<Backend> make_cpu_backend();
// Threads OpenBLAS may use in this process (0 leaves the library's default).
void set_cpu_threads(int threads);
// True when the CUDA backend was built and a device answers; else *why (when given) says which
// (no CUDA in this build, or the runtime's own error, e.g. a driver older than the runtime).
bool cuda_device_available(std::string* why = nullptr);
// True when this build has the CUDA backend module and it loads (every symbol it needs resolves),
// with or without a device; else *why (when given) says why not. Loading it maps cuBLAS.
bool cuda_backend_module_loads(std::string* why = nullptr);
// This process's rank among the peers of its host: LOCAL_RANK (gossip-launch, torchrun),
// SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, else 0.
int local_rank();

// Move-only owner of backend memory (RAII): freed through the backend that allocated it.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  // `backend` must outlive the array (the Model owns both and destroys arrays first).
  DeviceArray(Backend& backend, size_t n)
      : backend_(&backend), n_(n), p_(static_cast<T*>(n ? backend.alloc_bytes(n * sizeof(T)) : nullptr)) {}
  // n values in memory other processes on this host may map (Backend::alloc_shared_bytes).
  static DeviceArray shared(Backend& backend, size_t n) {
    DeviceArray a;
    a.backend_ = &backend;
    a.n_ = n;
    a.p_ = static_cast<T*>(n ? backend.alloc_shared_bytes(n * sizeof(T)) : nullptr);
    return a;
  }
  ~DeviceArray() { reset(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : backend_(o.backend_), n_(o.n_), p_(o.p_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = o.backend_; n_ = o.n_; p_ = o.p_;
      o.p_ = nullptr; o.n_ = 0;
    }
    return *this;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  // Grow-only scratch: holding fewer than n values, the array is replaced by n new ones in
  // `backend`'s memory (what it held is lost). Returns the values.
  T* at_least(Backend& backend, size_t n) {
    if (n_ < n) *this = DeviceArray(backend, n);
    return p_;
  }

 private:
  void reset() noexcept {
    if (p_) backend_->free_bytes(p_);
    p_ = nullptr;
  }
  Backend* backend_ = nullptr;
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace gossip::kernels
