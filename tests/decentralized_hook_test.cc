// DecentralizedHook on a model in a device backend's memory (here host memory behind a backend
// that says it is not the host's, and counts what crosses): one gossip round costs one download
// of the model (to send and fold on the host) and one upload of the mix, nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"
#include "peer/config.h"
#include "peer/decentralized_hook.h"
#include "peer_threads.h"

namespace gossip::peer {
namespace {

// The CPU backend's kernels behind is_host() == false, counting upload() and download().
class CountingDeviceBackend final : public kernels::Backend {
 public:
  std::string name() const override { return "counting-device"; }
  bool is_host() const override { return false; }
  void* alloc_bytes(size_t bytes) override { return cpu_->alloc_bytes(bytes); }
  void free_bytes(void* p) noexcept override { cpu_->free_bytes(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    stats_.host_to_device += bytes;
    cpu_->upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    stats_.device_to_host += bytes;
    cpu_->download(dst, src, bytes);
  }
  void fill(float* p, float v, size_t n) override { cpu_->fill(p, v, n); }
  void synchronize() override {}
  kernels::TransferStats transfers() const override { return stats_; }
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    cpu_->gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void bias_act_forward(float* y, const float* b, int r, int c, bool relu) override { cpu_->bias_act_forward(y, b, r, c, relu); }
  void relu_backward(float* dy, const float* y, size_t n) override { cpu_->relu_backward(dy, y, n); }
  void column_sum(const float* dy, float* db, int r, int c) override { cpu_->column_sum(dy, db, r, c); }
  kernels::LossResult softmax_xent(const float* z, const int32_t* l, int r, int c, float* dz, float s,
                                   float smoothing) override {
    return cpu_->softmax_xent(z, l, r, c, dz, s, smoothing);
  }
  void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov) override {
    cpu_->sgd_update(w, g, v, n, lr, mu, wd, nesterov);
  }
  void adamw_update(float* w, const float* g, float* m, float* v, size_t n, const kernels::AdamWStep& s) override {
    cpu_->adamw_update(w, g, m, v, n, s);
  }
  double norm2(const float* x, size_t n) override { return cpu_->norm2(x, n); }
  void axpy(size_t n, float a, const float* x, float* y) override { cpu_->axpy(n, a, x, y); }
  void scale(size_t n, float a, float* x) override { cpu_->scale(n, a, x); }

 private:
  std::unique_ptr<kernels::Backend> cpu_ = kernels::make_cpu_backend();
  kernels::TransferStats stats_;
};

// Only a parameter buffer in that backend's memory.
class DeviceBufferModel final : public model::Model {
 public:
  DeviceBufferModel(CountingDeviceBackend& backend, const std::vector<float>& host)
      : backend_(&backend), params_(backend, host.size()) {
    backend.upload(params_.get(), host.data(), host.size() * sizeof(float));
  }
  size_t num_params() const override { return params_.size(); }
  float* params() override { return params_.get(); }
  float* grads() override { return nullptr; }
  void init(uint64_t) override {}
  model::BatchStats train_batch(const model::Batch&) override { return {}; }
  model::BatchStats evaluate(const model::Batch&) override { return {}; }
  void swap_params(kernels::DeviceArray<float>& other) override { std::swap(params_, other); }
  std::vector<float> download_params() const override {
    std::vector<float> h(params_.size());
    backend_->download(h.data(), params_.get(), h.size() * sizeof(float));
    return h;
  }
  void upload_params(const std::vector<float>& h) override {
    backend_->upload(params_.get(), h.data(), h.size() * sizeof(float));
  }
  kernels::Backend& backend() override { return *backend_; }
  int max_rows() const override { return 0; }

 private:
  CountingDeviceBackend* backend_;
  kernels::DeviceArray<float> params_;
};

TEST(DecentralizedHook, DeviceModelCostsOneDownloadAndOneUploadPerGossipRound) {
  const int n = 4, rounds = 3;
  const size_t floats = 100000;
  const RunConfig cfg = parse_config("peers: {count: 4}\ntopology: ring\nalgorithm: {kind: gossip}\n", "hook.yaml");
  auto start = [&](int r) {
    std::vector<float> x(floats);
    for (size_t i = 0; i < floats; ++i) x[i] = static_cast<float>((r + 1) * (i % 7) + r);
    return x;
  };
  // The reference: every round x_r ← (x_{r−1} + x_r + x_{r+1}) / 3, in double.
  std::vector<std::vector<double>> expect(n);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> x = start(r);
    expect[r].assign(x.begin(), x.end());
  }
  for (int k = 0; k < rounds; ++k) {
    std::vector<std::vector<double>> next = expect;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < floats; ++i)
        next[r][i] = (expect[(r + n - 1) % n][i] + expect[r][i] + expect[(r + 1) % n][i]) / 3;
    expect = std::move(next);
  }
  testing::run_peers(n, [&](int r, Transport& t) {
    CountingDeviceBackend backend;
    DeviceBufferModel model(backend, start(r));
    DecentralizedHook hook(cfg, t, floats);
    const kernels::TransferStats before = backend.transfers();
    for (int step = 0; step < rounds; ++step) {
      hook.before_step(step, model);
      hook.after_step(step, model);
    }
    const kernels::TransferStats after = backend.transfers();
    const uint64_t bytes = floats * sizeof(float) * rounds;
    EXPECT_EQ(after.device_to_host - before.device_to_host, bytes) << "peer " << r << ": one download per round";
    EXPECT_EQ(after.host_to_device - before.host_to_device, bytes) << "peer " << r << ": one upload per round";
    const std::vector<float> got = model.download_params();
    for (size_t i = 0; i < floats; i += 101) ASSERT_NEAR(got[i], expect[r][i], 1e-4 * (1 + std::abs(expect[r][i]))) << r << " " << i;
  });
}

}  // namespace
}  // namespace gossip::peer
