#include "peer/gossip_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "peer/inproc_transport.h"
#include "peer_threads.h"
#include "topology/analysis.h"

namespace gossip::peer {
namespace {

// Every peer mixes its vector for a few rounds; the result must equal the topology library's
// W(round)·x applied centrally.
class GossipStepTest : public ::testing::TestWithParam<std::tuple<topology::Kind, int>> {};

TEST_P(GossipStepTest, MatchesMixingMatrix) {
  auto [kind, n] = GetParam();
  const topology::Graph g{kind, 0, {}};
  const size_t dim = 5;
  const int rounds = 4;
  std::vector<std::vector<float>> x(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) x[r][d] = float(r * 10 + d);
  // Central reference in double.
  std::vector<std::vector<double>> ref(n, std::vector<double>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) ref[r][d] = x[r][d];
  for (int k = 0; k < rounds; ++k) {
    topology::Matrix w = topology::mixing_matrix(g, n, k);
    auto next = ref;
    for (int i = 0; i < n; ++i)
      for (size_t d = 0; d < dim; ++d) {
        double s = 0;
        for (int j = 0; j < n; ++j) s += w.at(i, j) * ref[j][d];
        next[i][d] = s;
      }
    ref = next;
  }
  gossip::testing::run_peers(n, [&, g = g, dim = dim, rounds = rounds](int r, Transport& t) {
    GossipStep step(t, g, dim, 2, 10.0);
    std::vector<float> out(dim);
    for (int k = 0; k < rounds; ++k) {
      step.step(k, x[r].data(), out.data());
      x[r].swap(out);
    }
  });
  for (int r = 0; r < n; ++r) {
    for (size_t d = 0; d < dim; ++d) EXPECT_NEAR(x[r][d], ref[r][d], 1e-3) << r << "," << d;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, GossipStepTest,
    ::testing::Combine(::testing::Values(topology::Kind::kRing, topology::Kind::kExponential,
                                         topology::Kind::kOnePeerExponential, topology::Kind::kComplete,
                                         topology::Kind::kTorus),
                       ::testing::Values(1, 2, 3, 4, 8)),
    [](const auto& info) {
      return topology::kind_name(std::get<0>(info.param)) + "_n" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
}  // namespace gossip::peer

namespace gossip::peer {
namespace {

// A neighbour whose vector holds NaN/Inf is not mixed in: the receivers' own values stand in
// for the bad chunk, so they stay finite; its good chunks are still mixed.
TEST(GossipStep, NonFiniteNeighbourValuesAreNotMixedIn) {
  const int n = 3;
  const size_t dim = 8;  // chunks of 2 floats: the NaN sits in chunk [2, 4) of peer 1
  std::vector<std::vector<float>> x(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) x[r][d] = float(r + 1);
  x[1][3] = std::numeric_limits<float>::quiet_NaN();
  x[1][6] = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> out(n, std::vector<float>(dim));
  gossip::testing::run_peers(n, [&](int r, Transport& t) {
    GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, 2, 10.0);
    step.step(0, x[r].data(), out[r].data());
  });
  for (int r : {0, 2}) {
    for (size_t d = 0; d < dim; ++d) EXPECT_TRUE(std::isfinite(out[r][d])) << r << "," << d;
    // Good chunk of peer 1: mixed (1 + 2 + 3)/3 = 2. Bad chunks: peer 1's third goes to self.
    EXPECT_FLOAT_EQ(out[r][0], 2.0f);
    const float other = r == 0 ? 3.0f : 1.0f;
    const float self = float(r + 1);
    EXPECT_FLOAT_EQ(out[r][2], (2 * self + other) / 3) << r;
    EXPECT_FLOAT_EQ(out[r][7], (2 * self + other) / 3) << r;
  }
}

// A neighbour's chunk far larger than this peer's values over the same floats is an outlier:
// not mixed in (its weight goes to self); ordinary chunks, even a few times larger, still are.
TEST(GossipStep, OutlierNormsAreNotMixedIn) {
  const int n = 3;
  const size_t dim = 8;  // chunks of 4 floats
  std::vector<std::vector<float>> x(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) x[r][d] = float(r + 1);
  for (size_t d = 4; d < 8; ++d) x[1][d] = 1e4f;  // peer 1's second chunk: ~5000x the others'
  std::vector<std::vector<float>> out(n, std::vector<float>(dim));
  gossip::testing::run_peers(n, [&](int r, Transport& t) {
    GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, 4, 10.0, 10.0);
    step.step(0, x[r].data(), out[r].data());
  });
  for (int r : {0, 2}) {
    EXPECT_FLOAT_EQ(out[r][0], 2.0f) << "3x larger chunks are ordinary";
    const float other = r == 0 ? 3.0f : 1.0f, self = float(r + 1);
    EXPECT_FLOAT_EQ(out[r][5], (2 * self + other) / 3) << r;
  }
  // With the check off the outlier is mixed in.
  gossip::testing::run_peers(n, [&](int r, Transport& t) {
    GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, 4, 10.0, 0.0);
    step.step(0, x[r].data(), out[r].data());
  });
  EXPECT_GT(out[0][5], 1000.0f);
}

// Neighbours that cut their vectors into different chunks: each chunk is screened as a whole.
TEST(GossipStep, OutlierScreenWithMismatchedChunks) {
  const int n = 3;
  const size_t dim = 8;
  std::vector<std::vector<float>> x(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) x[r][d] = float(r + 1);
  for (size_t d = 4; d < 6; ++d) x[1][d] = 1e4f;
  std::vector<std::vector<float>> out(n, std::vector<float>(dim));
  gossip::testing::run_peers(n, [&](int r, Transport& t) {
    const size_t chunk = r == 1 ? 3 : 4;  // peer 1 sends [0,3) [3,6) [6,8); the others [0,4) [4,8)
    GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, chunk, 10.0, 10.0);
    step.step(0, x[r].data(), out[r].data());
  });
  for (int r : {0, 2}) {
    const float self = float(r + 1), other = r == 0 ? 3.0f : 1.0f;
    for (size_t d = 0; d < dim; ++d) {
      const bool from_outlier_chunk = d >= 3 && d < 6;  // peer 1's [3,6) holds the large values
      const float expected = from_outlier_chunk ? (2 * self + other) / 3 : (self + 2.0f + other) / 3;
      EXPECT_FLOAT_EQ(out[r][d], expected) << "peer " << r << " float " << d;
    }
  }
}

TEST(Collectives, AllFinite) {
  std::vector<float> v(37, 1.0f);
  EXPECT_TRUE(all_finite(v.data(), v.size()));
  v[36] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(all_finite(v.data(), v.size()));
  v[36] = std::nanf("");
  EXPECT_FALSE(all_finite(v.data(), v.size()));
  EXPECT_TRUE(all_finite(nullptr, 0));
}

TEST(Collectives, AllReduceRefusesNonFiniteContributions) {
  std::vector<std::string> errors(2);
  gossip::testing::run_peers(2, [&](int r, Transport& t) {
    RingAllReduce ar(t, 4, 2.0);
    std::vector<float> x(6, 1.0f);
    if (r == 1) x[0] = std::nanf("");
    try {
      ar.sum(x.data(), x.size());
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_NE(errors[0].find("NaN or Inf"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("peer 1"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace gossip::peer
