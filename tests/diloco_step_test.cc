// Decentralized DiLoCo: the outer step's arithmetic against a double reference, and whole outer
// rounds of 4 peers on the in-process transport through DecentralizedHook (all-reduce: every peer
// ends each outer step with the reference model, bit-identical across peers; gossip rounds: the
// peers' mean is still the reference, as a doubly stochastic W keeps it).
#include "algorithms/diloco_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "peer/config.h"
#include "peer/decentralized_hook.h"
#include "peer/host_buffer_model.h"
#include "peer_threads.h"

namespace gossip::peer {
namespace {

constexpr float kLr = 0.7f, kMu = 0.9f;

TEST(DilocoStep, OuterNesterovStepMatchesDouble) {
  const size_t n = 257;
  DilocoStep d(n, kLr, kMu);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.1f * float(i));
  d.start(x.data(), true);
  std::vector<double> start(x.begin(), x.end()), m(n, 0.0);
  for (int k = 0; k < 4; ++k) {
    for (size_t i = 0; i < n; ++i) x[i] -= 0.01f * float(k + 1) * std::cos(float(i));  // the inner steps
    std::vector<float> delta(n);
    d.pseudo_gradient(x.data(), delta.data());
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(delta[i], start[i] - x[i], 1e-6);
    d.outer_step(delta.data(), x.data());
    for (size_t i = 0; i < n; ++i) {
      m[i] = kMu * m[i] + delta[i];
      start[i] -= kLr * (delta[i] + kMu * m[i]);
      ASSERT_NEAR(x[i], start[i], 1e-5) << "outer step " << k << " float " << i;
    }
  }
  const std::vector<float> state = d.save_state();
  ASSERT_EQ(state.size(), 2 * n);
  DilocoStep e(n, kLr, kMu);
  e.restore_state(state, "test");
  EXPECT_EQ(e.save_state(), state);
  EXPECT_THROW(e.restore_state(std::vector<float>(n), "test"), Error);
}

// Peer r's inner steps, emulated: x ← x − 0.01·(r + 1)·cos(i + step).
void inner_step(std::vector<float>& x, int rank, int64_t step) {
  for (size_t i = 0; i < x.size(); ++i) x[i] -= 0.01f * float(rank + 1) * std::cos(float(i + step));
}

// Runs `outer` outer steps of H inner steps on 4 peers; returns every peer's model after each
// outer step: models[outer][rank].
std::vector<std::vector<std::vector<float>>> run_diloco(const std::string& average, int outer, int h,
                                                       const std::string& wire = "f32") {
  const int n = 4;
  const size_t floats = 1000;
  const RunConfig cfg = parse_config("peers: {count: 4}\ntopology: ring\nalgorithm: {kind: diloco, inner_steps: " +
                                         std::to_string(h) + ", outer_lr: 0.7, outer_momentum: 0.9, outer_average: " +
                                         average + ", wire: " + wire + "}\n",
                                     "diloco.yaml");
  std::vector<std::vector<std::vector<float>>> models(outer, std::vector<std::vector<float>>(n));
  testing::run_peers(n, [&](int r, Transport& t) {
    std::vector<float> x(floats);
    for (size_t i = 0; i < floats; ++i) x[i] = std::sin(0.01f * float(i));  // one initial model
    HostBufferModel model(x);
    DecentralizedHook hook(cfg, t, floats);
    for (int64_t step = 0; step < int64_t(outer) * h; ++step) {
      hook.before_step(step, model);
      inner_step(x, r, step);
      hook.after_step(step, model);
      if ((step + 1) % h == 0) models[(step + 1) / h - 1][r] = x;
    }
  });
  return models;
}

// The reference in double: every peer's inner steps from the shared start, the exact mean of the
// pseudo-gradients, the outer Nesterov step.
std::vector<std::vector<double>> reference(int outer, int h) {
  const int n = 4;
  const size_t floats = 1000;
  std::vector<double> start(floats), m(floats, 0.0);
  for (size_t i = 0; i < floats; ++i) start[i] = std::sin(0.01f * float(i));
  std::vector<std::vector<double>> out;
  for (int k = 0; k < outer; ++k) {
    std::vector<double> mean_delta(floats, 0.0);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < floats; ++i) {
        double drift = 0;
        for (int64_t s = int64_t(k) * h; s < int64_t(k + 1) * h; ++s) drift += 0.01 * (r + 1) * std::cos(float(i + s));
        mean_delta[i] += drift / n;  // Δ_r = start − (start − drift)
      }
    for (size_t i = 0; i < floats; ++i) {
      m[i] = kMu * m[i] + mean_delta[i];
      start[i] -= kLr * (mean_delta[i] + kMu * m[i]);
    }
    out.push_back(start);
  }
  return out;
}

TEST(DilocoHook, AllReduceGivesEveryPeerTheReferenceModel) {
  const int outer = 3, h = 4;
  const auto models = run_diloco("allreduce", outer, h);
  const auto ref = reference(outer, h);
  for (int k = 0; k < outer; ++k) {
    for (int r = 1; r < 4; ++r) EXPECT_EQ(models[k][r], models[k][0]) << "outer step " << k << ": one model";
    for (size_t i = 0; i < ref[k].size(); ++i) ASSERT_NEAR(models[k][0][i], ref[k][i], 2e-5) << k << " " << i;
  }
}

// The int8 average (wire: int8): still one model on every peer after each outer step, near the
// reference: the pseudo-gradients here reach 0.16 and their partial sums 0.4, so an int8 step is
// ~3e-3 of a sum, ~8e-4 of the average (measured after 3 outer steps: worst 1.6e-3, rms 5e-4).
TEST(DilocoHook, Int8AllReduceGivesEveryPeerOneModelNearTheReference) {
  const int outer = 3, h = 4;
  const auto models = run_diloco("allreduce", outer, h, "int8");
  const auto ref = reference(outer, h);
  for (int k = 0; k < outer; ++k) {
    for (int r = 1; r < 4; ++r) EXPECT_EQ(models[k][r], models[k][0]) << "outer step " << k << ": one model";
    double worst = 0, squares = 0;
    for (size_t i = 0; i < ref[k].size(); ++i) {
      const double e = models[k][0][i] - ref[k][i];
      worst = std::max(worst, std::abs(e));
      squares += e * e;
    }
    const double rms = std::sqrt(squares / double(ref[k].size()));
    EXPECT_LT(worst, 5e-3) << "outer step " << k;
    EXPECT_GT(rms, 2e-5) << "outer step " << k << ": the average did not travel as int8";
  }
}

TEST(DilocoHook, GossipAverageKeepsThePeersMeanOnTheReference) {
  const int outer = 3, h = 4;
  const auto models = run_diloco("gossip", outer, h);
  const auto ref = reference(outer, h);
  for (int k = 0; k < outer; ++k) {
    double spread = 0;
    for (size_t i = 0; i < ref[k].size(); ++i) {
      double mean = 0;
      for (int r = 0; r < 4; ++r) mean += models[k][r][i] / 4.0;
      ASSERT_NEAR(mean, ref[k][i], 2e-5) << k << " " << i;
      spread += std::abs(models[k][0][i] - models[k][2][i]);
    }
    EXPECT_GT(spread, 1e-3) << "one gossip round does not make the peers equal";
  }
}

}  // namespace
}  // namespace gossip::peer
