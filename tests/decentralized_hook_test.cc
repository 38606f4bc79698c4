// DecentralizedHook on a model in a device backend's memory (here host memory behind a backend
// that says it is not the host's, and counts what crosses): one gossip round costs one download
// of the model (to send it and screen the neighbours' chunks against it) and the upload of each
// received chunk, which the backend's mix folds where the model lies; nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"
#include "peer/config.h"
#include "peer/decentralized_hook.h"
#include "peer_threads.h"
#include "topology/topology.h"

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
  double mix_span(const kernels::MixSpan& m) override {
    ++mixes_;
    return cpu_->mix_span(m);
  }
  int mixes() const { return mixes_; }
  void pack_bf16(const float* x, uint16_t* out, size_t n) override { cpu_->pack_bf16(x, out, n); }

 private:
  std::unique_ptr<kernels::Backend> cpu_ = kernels::make_cpu_backend();
  kernels::TransferStats stats_;
  int mixes_ = 0;
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

// Runs `rounds` gossip rounds of 4 peers on `topology` with device models and checks the mix
// against the graph's weights (in double) and the bytes that crossed: one download of the model
// and `uploads` models' worth of chunks per round.
// `wire` bf16: every crossing is half the bytes (the values are rounded on the device).
void run_device_rounds(const std::string& topology, int uploads, const std::string& wire = "f32") {
  const int n = 4, rounds = 3;
  const size_t floats = 100000;
  const RunConfig cfg = parse_config(
      "peers: {count: 4}\ntopology: " + topology + "\nalgorithm: {kind: gossip, wire: " + wire + "}\n", "hook.yaml");
  const uint64_t value_bytes = wire == "bf16" ? 2 : 4;
  auto start = [&](int r) {
    std::vector<float> x(floats);
    for (size_t i = 0; i < floats; ++i) x[i] = static_cast<float>((r + 1) * (i % 7) + r);
    return x;
  };
  std::vector<std::vector<double>> expect(n);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> x = start(r);
    expect[r].assign(x.begin(), x.end());
  }
  for (int k = 0; k < rounds; ++k) {
    std::vector<std::vector<double>> next = expect;
    for (int r = 0; r < n; ++r) {
      const topology::Neighbours nb = topology::neighbours(cfg.topology, n, r, k);
      for (size_t i = 0; i < floats; ++i) {
        double v = nb.self_weight * expect[r][i];
        for (const topology::Link& l : nb.in) v += l.weight * expect[l.peer][i];
        next[r][i] = v;
      }
    }
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
    const uint64_t bytes = floats * value_bytes * rounds;
    EXPECT_EQ(after.device_to_host - before.device_to_host, bytes) << "peer " << r << ": one download per round";
    EXPECT_EQ(after.host_to_device - before.host_to_device, bytes * uploads)
        << "peer " << r << ": the received chunks, uploaded once each";
    EXPECT_GE(backend.mixes(), rounds) << "peer " << r << ": the mix runs in the device backend";
    const std::vector<float> got = model.download_params();
    for (size_t i = 0; i < floats; i += 101) ASSERT_NEAR(got[i], expect[r][i], 1e-4 * (1 + std::abs(expect[r][i]))) << r << " " << i;
  });
}

TEST(DecentralizedHook, DeviceModelWithOneNeighbourCostsOneDownloadAndOneUploadPerRound) {
  run_device_rounds("one_peer_exponential", 1);
}

TEST(DecentralizedHook, DeviceModelOnARingUploadsBothNeighboursChunksAndNothingElse) { run_device_rounds("ring", 2); }

// The start values and every mix of them (k/2^rounds below 32) are exact in bf16, so the bf16
// wire's mix must land on the same values.
TEST(DecentralizedHook, DeviceModelWithTheBf16WireMovesHalfTheBytes) {
  run_device_rounds("one_peer_exponential", 1, "bf16");
}

}  // namespace
}  // namespace gossip::peer
