// Gradient tracking on the in-process transport: the trackers of 4 peers against the
// adapt-then-combine recursion computed centrally in double, Σ y = Σ g every step, and on
// heterogeneous quadratics the property it exists for: with a constant step every peer reaches
// the minimiser of the average, where plain gossip (D-PSGD) stays a step-size-sized distance away.
#include "algorithms/gradient_tracking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "peer_threads.h"
#include "topology/analysis.h"

namespace gossip::peer {
namespace {

// Peer r's gradient at step t, made up: a different vector every step and peer.
float gradient(int r, size_t i, int t) { return static_cast<float>(std::sin(0.3 * double(i) * (r + 1) + 0.7 * t)); }

TEST(GradientTracker, FourPeersFollowTheRecursionAndKeepTheSum) {
  const int n = 4, steps = 8;
  const size_t floats = 300;
  const topology::Graph ring{topology::Kind::kRing, 0, {}, 0};
  std::vector<std::vector<std::vector<float>>> y(steps, std::vector<std::vector<float>>(n));  // y[t][r]
  testing::run_peers(n, [&](int r, Transport& t) {
    GradientTracker tracker(t, ring, floats, 128, 10.0, 0);
    std::vector<float> g(floats);
    for (int step = 0; step < steps; ++step) {
      for (size_t i = 0; i < floats; ++i) g[i] = gradient(r, i, step);
      tracker.track(g.data(), static_cast<uint64_t>(step));
      y[step][r] = g;
    }
  });
  // y_r(t) = Σ_j W_rj·(y_j(t−1) + g_j(t) − g_j(t−1)), with y_j(−1) = g_j(−1) = 0.
  const topology::Matrix w = topology::mixing_matrix(ring, n, 0);
  std::vector<std::vector<double>> ref(n, std::vector<double>(floats));
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<double>> next(n, std::vector<double>(floats));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < floats; ++i) {
        double mixed = 0;
        for (int j = 0; j < n; ++j)
          mixed += w.at(r, j) * (ref[j][i] + gradient(j, i, step) - (step > 0 ? gradient(j, i, step - 1) : 0.0f));
        next[r][i] = mixed;
      }
    ref = next;
    for (size_t i = 0; i < floats; ++i) {
      double sum_y = 0, sum_g = 0;
      for (int r = 0; r < n; ++r) {
        ASSERT_NEAR(y[step][r][i], ref[r][i], 1e-5) << "step " << step << " peer " << r << " value " << i;
        sum_y += y[step][r][i];
        sum_g += gradient(r, i, step);
      }
      ASSERT_NEAR(sum_y, sum_g, 1e-5) << "step " << step << " value " << i;
    }
  }
}

// f_r(x) = ½‖x − c_r‖² on 6 peers of a ring, constant step 0.1, x ← W(x − η·d) with d the
// gradient (gossip) or its tracker: returns the largest distance of a peer to c̄ after 400 steps.
double distance_to_optimum(bool tracking) {
  const int n = 6;
  const size_t floats = 16;
  const topology::Graph ring{topology::Kind::kRing, 0, {}, 0};
  auto centre = [](int r, size_t i) { return static_cast<float>(std::cos(double(i) + 2.0 * r) * (r + 1)); };
  std::vector<double> worst(n, 0);
  testing::run_peers(n, [&](int r, Transport& t) {
    GossipStep gossip(t, ring, floats, 64, 10.0);
    GradientTracker tracker(t, ring, floats, 64, 10.0, 0);
    std::vector<float> x(floats, 0.0f), d(floats), out(floats);
    for (int step = 0; step < 400; ++step) {
      for (size_t i = 0; i < floats; ++i) d[i] = x[i] - centre(r, i);
      if (tracking) tracker.track(d.data(), static_cast<uint64_t>(step));
      for (size_t i = 0; i < floats; ++i) x[i] -= 0.1f * d[i];
      gossip.step(static_cast<uint64_t>(step), x.data(), out.data());
      x.swap(out);
    }
    for (size_t i = 0; i < floats; ++i) {
      double mean = 0;
      for (int j = 0; j < n; ++j) mean += centre(j, i) / n;
      worst[r] = std::max(worst[r], std::fabs(x[i] - mean));
    }
  });
  return *std::max_element(worst.begin(), worst.end());
}

TEST(GradientTracker, HeterogeneousQuadraticsReachTheAverageOptimum) {
  const double gossip = distance_to_optimum(false), tracking = distance_to_optimum(true);
  EXPECT_GT(gossip, 0.05) << "plain gossip stays away from the average's minimiser";
  EXPECT_LT(tracking, 1e-4) << "gradient tracking reaches it (gossip: " << gossip << ")";
}

TEST(GradientTracker, CheckpointStateRoundTripsAndResetStartsAgain) {
  const topology::Graph ring{topology::Kind::kRing, 0, {}, 0};
  testing::run_peers(3, [&](int r, Transport& t) {
    GradientTracker tracker(t, ring, 10, 64, 10.0, 0);
    std::vector<float> g(10, float(r + 1));
    tracker.track(g.data(), 0);
    for (float v : g) ASSERT_NEAR(v, 2.0f, 1e-6) << "the mean of 1, 2 and 3 on a 3-ring";
    const std::vector<float> state = tracker.save_state();
    ASSERT_EQ(state.size(), 21u);
    EXPECT_EQ(state.back(), 1.0f);
    GradientTracker again(t, ring, 10, 64, 10.0, 0);
    again.restore_state(state, "test");
    EXPECT_EQ(again.save_state(), state);
    std::vector<float> h(10, float(r + 4));
    again.track(h.data(), 1);
    for (float v : h) ASSERT_NEAR(v, 5.0f, 1e-5) << "restored: y + g − g_prev = 2 + (r + 4) − (r + 1), mixed";
    again.reset();
    std::vector<float> k(10, float(3 * r));
    again.track(k.data(), 2);
    for (float v : k) ASSERT_NEAR(v, 3.0f, 1e-5) << "after a reset the tracker starts again at the mixed gradient";
    EXPECT_THROW(again.restore_state(std::vector<float>(20), "test"), Error);
  });
}

}  // namespace
}  // namespace gossip::peer
