// DecentralizedHook on a model in a device backend's memory (here host memory behind a backend
// that says it is not the host's, and counts what crosses): one gossip round costs one download
// of the model (to send it and screen the neighbours' chunks against it) and the upload of each
// received chunk, which the backend's mix folds where the model lies; nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "counting_device_backend.h"
#include "kernels/backend.h"
#include "model/dataset.h"
#include "model/device_data.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/presets.h"
#include "peer/config.h"
#include "peer/decentralized_hook.h"
#include "peer_threads.h"
#include "topology/topology.h"

namespace gossip::peer {
namespace {

using testing::CountingDeviceBackend;

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

// A whole training step of MLP 784-1024-1024-10 (1,863,690 parameters) at batch 128, its rows in
// the device's memory, gossip with one neighbour: per step the batch's row numbers and the
// neighbour's model go up and the model comes down once, nothing else (the loss stays in the
// backend's tally until a progress line reads it).
TEST(DecentralizedHook, AnMlpStepOnADeviceMovesTheModelEachWayOnceAndTheRowNumbersUp) {
  const int batch = 128, steps = 3;
  const RunConfig cfg =
      parse_config("peers: {count: 2}\ntopology: one_peer_exponential\nalgorithm: {kind: gossip}\n", "hook.yaml");
  testing::run_peers(2, [&](int r, Transport& t) {
    CountingDeviceBackend backend;
    const model::TrainTest data = model::make_synthetic(4 * batch, 1, 784, 10, 7 + r);
    model::DeviceRows rows(backend, data.train);
    model::ModelConfig mlp_config;
    mlp_config.hidden = {1024, 1024};
    const std::unique_ptr<model::Model> mlp = model::make_model(mlp_config, backend, {1, 1, 784, 10}, batch);
    mlp->init(1);
    mlp->set_loss_tally(true);
    const std::unique_ptr<model::Optimizer> sgd = model::make_optimizer(*mlp, {});
    DecentralizedHook hook(cfg, t, mlp->num_params());
    ASSERT_EQ(mlp->num_params(), 1863690u);
    const uint64_t model_bytes = mlp->num_params() * sizeof(float);
    std::vector<int32_t> ids(batch);
    for (int step = 0; step < steps; ++step) {
      for (int i = 0; i < batch; ++i) ids[i] = (step * batch + i * 3) % (4 * batch);
      const kernels::TransferStats before = backend.transfers();
      hook.before_step(step, *mlp);
      EXPECT_TRUE(mlp->train_batch(rows.gather(ids.data(), batch)).tallied);
      sgd->step(0.01);
      hook.after_step(step, *mlp);
      const kernels::TransferStats after = backend.transfers();
      EXPECT_EQ(after.host_to_device - before.host_to_device, batch * sizeof(int32_t) + model_bytes)
          << "peer " << r << " step " << step << ": the row numbers and the neighbour's model";
      EXPECT_EQ(after.device_to_host - before.device_to_host, model_bytes) << "peer " << r << " step " << step;
    }
    EXPECT_GE(backend.mixes(), steps) << "peer " << r << ": the mix runs in the device backend (in chunks)";
  });
}

TEST(DecentralizedHook, DeviceModelOnARingUploadsBothNeighboursChunksAndNothingElse) { run_device_rounds("ring", 2); }

// The start values and every mix of them (k/2^rounds below 32) are exact in bf16, so the bf16
// wire's mix must land on the same values.
TEST(DecentralizedHook, DeviceModelWithTheBf16WireMovesHalfTheBytes) {
  run_device_rounds("one_peer_exponential", 1, "bf16");
}

// Push-sum with device models: the numerator lives on the device and the backend's kernels split
// and fold it; a round downloads each out-neighbour's share once (one, on SGP's one-peer graph)
// and uploads each received message once, nothing else. The models are the column-stochastic
// mix (in double) de-biased: x / w.
TEST(DecentralizedHook, DevicePushSumDownloadsOneShareAndUploadsOneMessagePerRound) {
  const int n = 4, rounds = 3;
  const size_t floats = 50000;
  const RunConfig cfg = parse_config(
      "peers: {count: 4}\ntopology: push_sum_one_peer_exponential\nalgorithm: {kind: push_sum, overlap: false}\n",
      "hook.yaml");
  auto start = [&](int r) {
    std::vector<float> x(floats);
    for (size_t i = 0; i < floats; ++i) x[i] = static_cast<float>((r + 1) * (i % 5) - r);
    return x;
  };
  std::vector<std::vector<double>> x(n);
  std::vector<double> w(n, 1.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> s = start(r);
    x[r].assign(s.begin(), s.end());
  }
  for (int k = 0; k < rounds; ++k) {
    std::vector<std::vector<double>> nx(n, std::vector<double>(floats, 0.0));
    std::vector<double> nw(n, 0.0);
    for (int r = 0; r < n; ++r) {
      const topology::Neighbours nb = topology::neighbours(cfg.topology, n, r, k);
      std::vector<std::pair<int, double>> to{{r, nb.self_weight}};
      for (const topology::Link& l : nb.out) to.emplace_back(l.peer, l.weight);
      for (auto [peer, p] : to) {
        nw[peer] += p * w[r];
        for (size_t i = 0; i < floats; ++i) nx[peer][i] += p * x[r][i];
      }
    }
    x = std::move(nx);
    w = nw;
  }
  testing::run_peers(n, [&](int r, Transport& t) {
    CountingDeviceBackend backend;
    DeviceBufferModel model(backend, start(r));
    DecentralizedHook hook(cfg, t, floats);
    for (int step = 0; step < rounds; ++step) {
      hook.before_step(step, model);
      hook.after_step(step, model);
    }
    const kernels::TransferStats moved = backend.transfers();
    const uint64_t bytes = floats * sizeof(float) * rounds;
    EXPECT_EQ(moved.device_to_host, bytes) << "peer " << r << ": one share down per round";
    EXPECT_EQ(moved.host_to_device - floats * sizeof(float), bytes)  // (the model's own first upload)
        << "peer " << r << ": one message up per round";
    EXPECT_EQ(backend.splits(), rounds) << "peer " << r << ": the split runs in the device backend";
    const std::vector<float> got = model.download_params();
    for (size_t i = 0; i < floats; i += 97) {
      const double want = x[r][i] / w[r];
      ASSERT_NEAR(got[i], want, 1e-5 * (1 + std::abs(want))) << r << " " << i;
    }
  });
}

}  // namespace
}  // namespace gossip::peer
