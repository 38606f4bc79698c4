#include "peer/push_sum_step.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "peer/inproc_transport.h"
#include "peer_threads.h"

namespace gossip::peer {
namespace {

struct Outcome {
  std::vector<std::vector<float>> z;  // de-biased models after drain
  std::vector<double> w;
};

// n peers run `rounds` push-sum rounds of pure averaging (no local update), each peer `delay`
// microseconds per round times its rank, so that with overlap messages arrive late.
Outcome run(int n, int rounds, bool overlap, int staleness, topology::Kind kind, int delay_us) {
  const size_t dim = 6;
  Outcome out{std::vector<std::vector<float>>(n, std::vector<float>(dim)), std::vector<double>(n)};
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) out.z[r][d] = float(r + 1) * float(d + 1);
  gossip::testing::run_peers(n, [&](int r, Transport& t) {
    PushSumStep ps(t, {kind, 0, {}}, dim, 4, 10.0, overlap, staleness);
    ps.init(out.z[r].data());
    for (int k = 0; k < rounds; ++k) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us * r));
      ps.step(k, out.z[r].data());
    }
    ps.drain(out.z[r].data());
    out.w[r] = ps.weight();
  });
  return out;
}

class PushSumTest : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(PushSumTest, ConservesMassAndConvergesToTheAverage) {
  auto [overlap, n] = GetParam();
  Outcome o = run(n, 40, overlap, 2, topology::Kind::kPushSumOnePeerExponential, overlap ? 200 : 0);
  double wsum = 0;
  for (double w : o.w) wsum += w;
  EXPECT_NEAR(wsum, n, 1e-9) << "total weight is conserved";
  for (size_t d = 0; d < 6; ++d) {
    const double avg = (n + 1) / 2.0 * (d + 1);
    for (int r = 0; r < n; ++r) EXPECT_NEAR(o.z[r][d], avg, 1e-3 * avg) << "peer " << r << " dim " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PushSumTest, ::testing::Combine(::testing::Bool(), ::testing::Values(1, 2, 3, 5, 8)));

TEST(PushSum, LocalUpdateAppliesToNumerator) {
  InprocFabric fabric(1);
  InprocTransport t(fabric, 0);
  PushSumStep ps(t, {topology::Kind::kPushSumOnePeerExponential, 0, {}}, 2, 4, 1.0, false, 0);
  float z[2] = {1, 2};
  ps.init(z);
  z[0] = 0.5f;  // a local step moved the model
  ps.step(0, z);
  EXPECT_FLOAT_EQ(z[0], 0.5f);
  EXPECT_FLOAT_EQ(z[1], 2.0f);
}

}  // namespace
}  // namespace gossip::peer
