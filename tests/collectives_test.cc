#include "algorithms/collectives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "kernels/bf16.h"
#include "transport/inproc/inproc_transport.h"
#include "peer_threads.h"

namespace gossip::peer {
namespace {

using gossip::testing::run_peers;

std::vector<float> values(int rank, size_t n) {
  std::mt19937 rng(rank + 1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class AllReduceTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(AllReduceTest, SumMatchesDirectAndIsIdenticalEverywhere) {
  auto [n, size] = GetParam();
  std::vector<std::vector<float>> results(n);
  run_peers(n, [&, size = size](int r, Transport& t) {
    RingAllReduce ar(t, 3, 10.0);  // tiny chunks exercise the chunking
    std::vector<float> x = values(r, size);
    ar.sum(x.data(), x.size());
    std::vector<float> y = values(r, size);
    ar.average(y.data(), y.size());  // a second call in sequence must not mix with the first
    results[r] = x;
    results[r].insert(results[r].end(), y.begin(), y.end());
  });
  for (size_t i = 0; i < size; ++i) {
    double expect = 0;
    for (int r = 0; r < n; ++r) expect += values(r, size)[i];
    EXPECT_NEAR(results[0][i], expect, 1e-5);
    EXPECT_NEAR(results[0][size + i], expect / n, 1e-5);
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << "bitwise identical on peer " << r;
}

INSTANTIATE_TEST_SUITE_P(SizesAndPeers, AllReduceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 8), ::testing::Values(0, 1, 7, 1000)));

// bf16 wire: half the payload bytes; every peer ends with the same values, each one a bfloat16
// (the owner of a segment keeps its rounded sum), within the rounding of p partial sums.
TEST(AllReduceBf16, HalvesTheBytesAndStaysIdenticalEverywhere) {
  const int n = 5;
  const size_t size = 1001;
  std::vector<std::vector<float>> results(n);
  std::vector<double> payload_f32(n), payload_bf16(n);
  run_peers(n, [&](int r, Transport& t) {
    RingAllReduce ar(t, 250, 10.0);
    std::vector<float> x = values(r, size);
    const uint64_t before = t.stats().bytes_sent;
    ar.sum(x.data(), size);
    const uint64_t mid = t.stats().bytes_sent;
    results[r] = values(r, size);
    ar.sum(results[r].data(), size, Dtype::kBf16);
    payload_f32[r] = static_cast<double>(mid - before);
    payload_bf16[r] = static_cast<double>(t.stats().bytes_sent - mid);
  });
  size_t differs_from_f32 = 0;
  for (size_t i = 0; i < size; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      exact += values(r, size)[i];
      magnitude += std::abs(values(r, size)[i]);
    }
    const float got = results[0][i];
    EXPECT_EQ(kernels::from_bf16(kernels::to_bf16(got)), got) << "value " << i << " is not a bfloat16";
    EXPECT_NEAR(got, exact, n * std::ldexp(magnitude, -8)) << "value " << i;
    differs_from_f32 += std::abs(got - exact) > 1e-5;
  }
  EXPECT_GT(differs_from_f32, size / 2) << "the values did not travel as bf16";
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << "bitwise identical on peer " << r;
  for (int r = 0; r < n; ++r) {  // headers are a few % of a 250-value chunk
    EXPECT_LT(payload_bf16[r], 0.56 * payload_f32[r]) << "peer " << r;
    EXPECT_GT(payload_bf16[r], 0.45 * payload_f32[r]) << "peer " << r;
  }
}

TEST(Collectives, ReceiveTimesOutNamingThePeer) {
  InprocFabric fabric(2);
  InprocTransport t(fabric, 0);
  try {
    receive_vector(t, 1, {MessageKind::kGossip, 4, 0}, 0, 10, 0.05, [](size_t, const float*, size_t) {});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("inproc://1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("round 4"), std::string::npos) << e.what();
  }
}

TEST(SnapshotPool, ReusesReleasedBuffers) {
  SnapshotPool pool;
  float x[3] = {1, 2, 3};
  const float* first;
  {
    auto a = pool.copy(x, 3, 2.0f);
    first = a->data();
    EXPECT_EQ((*a)[2], 6.0f);
    auto b = pool.copy(x, 3);
    EXPECT_NE(b->data(), first) << "a is still held";
  }
  EXPECT_EQ(pool.copy(x, 3)->data(), first);
}

}  // namespace
}  // namespace gossip::peer
