// The agreeing collectives of consensus.h on in-process peers: Ξ against a direct computation,
// the smallest value, and whether every peer holds the same value (the same answer on each).
#include "algorithms/consensus.h"

#include <gtest/gtest.h>

#include <cmath>
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
    got[r] = consensus_distance(allreduce, n, r, x[r].data(), floats, scratch);
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

// 64-bit values that differ in one 16-bit quarter only, or not at all, on one peer (the first,
// a middle or the last one).
TEST(Consensus, AllEqualSaysTheSameOnEveryPeer) {
  const uint64_t common = 0x0123456789abcdefull, one = 1;
  for (int odd_peer : {0, 2, 3})
    for (uint64_t odd : {common, common ^ one, common ^ (one << 20), common ^ (one << 40), common ^ (one << 63)}) {
      std::vector<int> got(4, -1);
      run_peers(4, [&](int r, Transport& t) {
        RingAllReduce allreduce(t, 3, 10.0);
        got[r] = all_equal(allreduce, 4, r, r == odd_peer ? odd : common);
      });
      for (int r = 0; r < 4; ++r)
        EXPECT_EQ(got[r], odd == common ? 1 : 0) << std::hex << odd << " on peer " << odd_peer << ", answer of peer " << r;
    }
}

// Models that differ in one word only have different fingerprints (both halves).
TEST(Consensus, FingerprintSeesOneChangedWord) {
  std::vector<float> x(1000, 0.25f);
  const uint64_t base = model_fingerprint(x.data(), x.size());
  for (size_t i : {size_t{0}, size_t{517}, size_t{999}}) {
    std::vector<float> y = x;
    y[i] = std::nextafter(y[i], 1.0f);
    const uint64_t changed = model_fingerprint(y.data(), y.size());
    EXPECT_NE(changed >> 32, base >> 32) << "word " << i;
    EXPECT_NE(changed & 0xffffffffu, base & 0xffffffffu) << "word " << i;
  }
  std::vector<float> a = x, b = x;  // the same words in another order
  a[3] = 1.0f;
  b[4] = 1.0f;
  const uint64_t fa = model_fingerprint(a.data(), a.size()), fb = model_fingerprint(b.data(), b.size());
  EXPECT_NE(fa >> 32, fb >> 32);
  EXPECT_NE(fa & 0xffffffffu, fb & 0xffffffffu);
}

// Identical models: Ξ is exactly 0 and x̄ = x, found without all-reducing the model (fewer bytes
// than one model); one peer's model one ulp off takes the full measurement.
TEST(Consensus, IdenticalModelsAreMeasuredWithoutAModelAllReduce) {
  const int n = 4;
  const size_t floats = 4000;
  std::vector<float> x(floats);
  for (size_t i = 0; i < floats; ++i) x[i] = 0.001f * float(i) - 1.5f;
  for (bool one_off : {false, true}) {
    std::vector<Consensus> got(n);
    std::vector<uint64_t> sent(n);
    std::vector<std::vector<float>> mean(n);
    run_peers(n, [&](int r, Transport& t) {
      RingAllReduce allreduce(t, 1000, 10.0);
      std::vector<float> mine = x;
      if (one_off && r == 1) mine[7] = std::nextafter(mine[7], 0.0f);
      got[r] = consensus_distance(allreduce, n, r, mine.data(), floats, mean[r]);
      sent[r] = t.stats().bytes_sent;
    });
    double norm = 0;
    for (float v : x) norm += double(v) * v;
    for (int r = 0; r < n; ++r) {
      if (!one_off) {
        EXPECT_EQ(got[r].distance, 0.0) << "peer " << r;
        EXPECT_EQ(mean[r], x) << "peer " << r;
        EXPECT_NEAR(got[r].mean_norm2, norm, 1e-9 * norm) << "peer " << r;
        EXPECT_LT(sent[r], floats * sizeof(float) / 4) << "peer " << r;
      } else {
        EXPECT_GT(got[r].distance, 0.0) << "peer " << r;
        EXPECT_GT(sent[r], floats * sizeof(float)) << "peer " << r;
      }
    }
  }
}

}  // namespace
}  // namespace gossip::peer
