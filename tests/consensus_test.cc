// The agreeing collectives of consensus.h on in-process peers: Ξ against a direct computation,
// the smallest value, and whether every peer holds the same value (the same answer on each).
#include "algorithms/consensus.h"

#include <gtest/gtest.h>

#include <vector>

#include "peer_threads.h"

namespace gossip::peer {
namespace {

using gossip::testing::run_peers;

TEST(Consensus, DistanceMatchesADirectComputation) {
  const int n = 4;
  const size_t floats = 5;
  std::vector<std::vector<float>> x(n, std::vector<float>(floats));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < floats; ++i) x[r][i] = float(r * r) - 0.5f * float(i);
  double direct = 0, mean_norm2 = 0;
  for (size_t i = 0; i < floats; ++i) {
    double mean = 0;
    for (int r = 0; r < n; ++r) mean += x[r][i] / n;
    for (int r = 0; r < n; ++r) direct += (x[r][i] - mean) * (x[r][i] - mean) / n;
    mean_norm2 += mean * mean;
  }
  std::vector<Consensus> got(n);
  run_peers(n, [&](int r, Transport& t) {
    RingAllReduce allreduce(t, 2, 10.0);
    std::vector<float> scratch;
    got[r] = consensus_distance(allreduce, n, x[r].data(), floats, scratch);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(got[r].distance, direct, 1e-5 * direct) << "peer " << r;
    EXPECT_NEAR(got[r].mean_norm2, mean_norm2, 1e-5 * mean_norm2) << "peer " << r;
  }
}

TEST(Consensus, AgreeMinIsTheSmallestValueOnEveryPeer) {
  std::vector<int64_t> got(5);
  run_peers(5, [&](int r, Transport& t) {
    RingAllReduce allreduce(t, 4, 10.0);
    const int64_t mine[5] = {70, 12, 49, 3000000, 13};
    got[r] = agree_min(allreduce, 5, r, mine[r]);
  });
  for (int64_t v : got) EXPECT_EQ(v, 12);
}

// 32-bit values that differ only in the low or only in the high half, or not at all.
TEST(Consensus, AllEqualSaysTheSameOnEveryPeer) {
  for (uint32_t odd : {0xdeadbeefu, 0xdeadbeeeu, 0xdeacbeefu, 0x0000beefu}) {
    std::vector<int> got(4, -1);
    run_peers(4, [&](int r, Transport& t) {
      RingAllReduce allreduce(t, 3, 10.0);
      got[r] = all_equal(allreduce, 4, r, r == 2 ? odd : 0xdeadbeefu);
    });
    for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], odd == 0xdeadbeefu ? 1 : 0) << std::hex << odd << " peer " << r;
  }
}

}  // namespace
}  // namespace gossip::peer
