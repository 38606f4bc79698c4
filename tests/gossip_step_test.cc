#include "peer/gossip_step.h"

#include <gtest/gtest.h>

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
