#include "control/sketch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gossip::peer {
namespace {

TEST(Sketch, LinearAndDeterministic) {
  std::vector<float> a{1, 2, 3, 4, 5}, b{-1, 0.5, 2, 0, 1}, sum(5);
  for (int i = 0; i < 5; ++i) sum[i] = a[i] + b[i];
  auto sa = count_sketch(a.data(), 5, 3, 7), sb = count_sketch(b.data(), 5, 3, 7), ss = count_sketch(sum.data(), 5, 3, 7);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(ss[j], sa[j] + sb[j], 1e-5);
  EXPECT_EQ(count_sketch(a.data(), 5, 3, 7), sa);
  EXPECT_NE(count_sketch(a.data(), 5, 3, 8), sa);
  EXPECT_THROW(count_sketch(a.data(), 5, 0, 1), std::exception);
}

TEST(Consensus, ExactFiguresByHand) {
  // Mean (2, 1); deviations (−1, 1), (1, −1): Ξ = (2 + 2)/2 = 2, ‖x̄‖² = 5.
  ConsensusFigures f = consensus_figures({{1, 2}, {3, 0}});
  EXPECT_DOUBLE_EQ(f.xi, 2.0);
  EXPECT_DOUBLE_EQ(f.mean_norm2, 5.0);
  EXPECT_DOUBLE_EQ(f.relative(), 0.4);
  EXPECT_EQ(f.distance, (std::vector<double>{2.0, 2.0}));
  EXPECT_DOUBLE_EQ(consensus_figures({{1, 2}, {1, 2}, {1, 2}}).xi, 0.0);
  EXPECT_THROW(consensus_figures({{1, 2}, {1}}), std::exception);
}

// The acceptance check: on a model of 1M parameters held by 8 peers, the sketch estimate of Ξ at
// k = 256 agrees with the exact figure within 5 % (RMS over 10 independent sketch seeds; each
// single estimate within 4 standard errors of sqrt(2/k)).
TEST(Sketch, EstimatesConsensusDistanceWithinFivePercentAtK256) {
  const size_t d = 1 << 20;
  const int n = 8, k = 256;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> common(d);
  for (float& v : common) v = normal(rng);
  std::vector<std::vector<float>> x(n, common);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < d; ++i) x[p][i] += 0.01f * (p + 1) * normal(rng);  // unequal spreads
  const double exact = consensus_figures(x).xi;
  double sum_sq = 0;
  const int trials = 10;
  for (int t = 0; t < trials; ++t) {
    std::vector<std::vector<float>> s;
    for (int p = 0; p < n; ++p) s.push_back(count_sketch(x[p].data(), d, k, 1000 + t));
    const double rel = consensus_figures(s).xi / exact - 1;
    EXPECT_LT(std::abs(rel), 4 * std::sqrt(2.0 / k)) << "seed " << t;
    sum_sq += rel * rel;
  }
  const double rms = std::sqrt(sum_sq / trials);
  EXPECT_LT(rms, 0.05) << "RMS relative error " << rms;
  std::printf("sketch k=%d on %zu params x %d peers: RMS relative error %.4f over %d seeds\n", k, d, n, rms, trials);
}

}  // namespace
}  // namespace gossip::peer
