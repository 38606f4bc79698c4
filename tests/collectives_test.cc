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

// n peers each sum values(rank, size) once in f32 and once with `wire` (chunks of 250 values).
struct WireRun {
  std::vector<std::vector<float>> results;     // of the `wire` sum, per peer
  std::vector<double> f32_bytes, wire_bytes;  // sent by each peer in each sum
};
WireRun sum_in_f32_then(Dtype wire, int n, size_t size, uint64_t seed) {
  WireRun run{std::vector<std::vector<float>>(n), std::vector<double>(n), std::vector<double>(n)};
  run_peers(n, [&](int r, Transport& t) {
    RingAllReduce ar(t, 250, 10.0, seed);
    std::vector<float> x = values(r, size);
    const uint64_t before = t.stats().bytes_sent;
    ar.sum(x.data(), size);
    const uint64_t mid = t.stats().bytes_sent;
    run.results[r] = values(r, size);
    ar.sum(run.results[r].data(), size, wire);
    run.f32_bytes[r] = static_cast<double>(mid - before);
    run.wire_bytes[r] = static_cast<double>(t.stats().bytes_sent - mid);
  });
  return run;
}

// bf16 wire: half the payload bytes; every peer ends with the same values, each one a bfloat16
// (the owner of a segment keeps its rounded sum), within the rounding of p partial sums.
TEST(AllReduceBf16, HalvesTheBytesAndStaysIdenticalEverywhere) {
  const int n = 5;
  const size_t size = 1001;
  const WireRun run = sum_in_f32_then(Dtype::kBf16, n, size, 1);
  const std::vector<std::vector<float>>& results = run.results;
  const std::vector<double>&payload_f32 = run.f32_bytes, &payload_bf16 = run.wire_bytes;
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

// int8 wire, every peer count and size (with chunks of 3 values: one scale each): one result on
// every peer, within the rounding of p − 1 partial sums and the owner's (each within a step of
// max |partial sum| / 127 of its block, |partial sums| ≤ p here).
TEST_P(AllReduceTest, Int8SumIsIdenticalEverywhereWithinItsRounding) {
  auto [n, size] = GetParam();
  std::vector<std::vector<float>> results(n);
  run_peers(n, [&, size = size](int r, Transport& t) {
    RingAllReduce ar(t, 3, 10.0, 7);
    results[r] = values(r, size);
    ar.sum(results[r].data(), size, Dtype::kInt8);
  });
  for (size_t i = 0; i < size; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += values(r, size)[i];
    EXPECT_NEAR(results[0][i], exact, n * n / 127.0 + 1e-6) << "value " << i;
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << "bitwise identical on peer " << r;
}

// int8 wire on 1000 values: a quarter of f32's payload bytes and more; each result is the mean of
// unbiased stochastic roundings, so the errors average out (mean near 0) while most values differ
// from the exact sum; the same seed gives the same result, another seed another one.
TEST(AllReduceInt8, QuartersTheBytesWithUnbiasedRounding) {
  const int n = 4;
  const size_t size = 1000;
  const WireRun run = sum_in_f32_then(Dtype::kInt8, n, size, 7);
  for (int r = 1; r < n; ++r) EXPECT_EQ(run.results[r], run.results[0]) << "bitwise identical on peer " << r;
  const std::vector<float>& got = run.results[0];
  double error_sum = 0, error_squares = 0;
  size_t inexact = 0;
  for (size_t i = 0; i < size; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += values(r, size)[i];
    error_sum += got[i] - exact;
    error_squares += (got[i] - exact) * (got[i] - exact);
    inexact += std::abs(got[i] - exact) > 1e-5;
  }
  const double rms = std::sqrt(error_squares / size);
  EXPECT_GT(inexact, size / 2) << "the values did not travel as int8";
  EXPECT_LT(rms, 0.03) << "each rounding is within one step of ~p/127";
  EXPECT_LT(std::abs(error_sum / size), 4 * rms / std::sqrt(double(size))) << "rounding is biased";
  EXPECT_EQ(sum_in_f32_then(Dtype::kInt8, n, size, 7).results[2], got) << "the same seed rounds the same way";
  EXPECT_NE(sum_in_f32_then(Dtype::kInt8, n, size, 8).results[2], got) << "another seed rounds another way";
  for (int r = 0; r < n; ++r) {  // 250 values: 4·250 bytes of f32, 8 + 250 of int8, 64 of header
    EXPECT_LT(run.wire_bytes[r], 0.31 * run.f32_bytes[r]) << "peer " << r;
    EXPECT_GT(run.wire_bytes[r], 0.25 * run.f32_bytes[r]) << "peer " << r;
  }
}

// Two peers' ring all-reduces of their own values(r, sizes[r]) with their own wires, on threads;
// what each threw ("" when nothing).
std::vector<std::string> errors_of_two(const size_t sizes[2], const Dtype wires[2]) {
  std::vector<std::string> errors(2);
  InprocFabric fabric(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      InprocTransport t(fabric, r);
      RingAllReduce ar(t, 100, 2.0);
      std::vector<float> x = values(r, sizes[r]);
      try {
        ar.sum(x.data(), x.size(), wires[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

// Peers configured with different wires: the int8 peer names the f32 sender and the setting.
TEST(AllReduceInt8, APeerSendingAnotherWireIsNamed) {
  const size_t sizes[2] = {100, 100};
  const Dtype wires[2] = {Dtype::kInt8, Dtype::kF32};
  const std::vector<std::string> errors = errors_of_two(sizes, wires);
  EXPECT_NE(errors[0].find("(inproc://1) sends reduce-scatter values as f32 but this peer expects int8"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("algorithm.wire settings differ"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("as int8 but this peer expects f32"), std::string::npos) << errors[1];
}

// Peers whose vectors differ in length (different models) name the sender and both lengths at the
// first chunk, instead of waiting for values that never come; in f32 and int8 alike.
TEST(Collectives, APeerWithAVectorOfAnotherLengthIsNamed) {
  for (Dtype wire : {Dtype::kF32, Dtype::kInt8}) {
    const size_t sizes[2] = {100, 107};
    const Dtype wires[2] = {wire, wire};
    const std::vector<std::string> errors = errors_of_two(sizes, wires);
    EXPECT_NE(errors[0].find("(inproc://1) sends reduce-scatter vectors of 107 values but this peer's has 100"),
              std::string::npos)
        << errors[0];
    EXPECT_NE(errors[0].find("the peers' models differ in size"), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find("(inproc://0) sends reduce-scatter vectors of 100 values but this peer's has 107"),
              std::string::npos)
        << errors[1];
  }
}

TEST(Collectives, ReceiveTimesOutNamingThePeer) {
  InprocFabric fabric(2);
  InprocTransport t(fabric, 0);
  try {
    receive_vector(t, 1, {MessageKind::kGossip, 4, 0}, 0, 10, 10, 0.05, [](size_t, const float*, size_t) {});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("inproc://1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("round 4"), std::string::npos) << e.what();
  }
}

TEST(SnapshotPool, ReusesReleasedBuffers) {
  SnapshotPool pool;
  const float* first;
  {
    auto a = pool.buffer(3);
    first = a->data();
    auto b = pool.buffer(3);
    EXPECT_NE(b->data(), first) << "a is still held";
    EXPECT_EQ(b->size(), 3u);
  }
  EXPECT_EQ(pool.buffer(3)->data(), first);
}

}  // namespace
}  // namespace gossip::peer
