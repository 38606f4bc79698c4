#include "algorithms/push_sum_step.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "transport/inproc/inproc_transport.h"
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

// bf16 on the wire: every share is rounded, the sender keeps what rounding took off, so Σx and
// Σw are still conserved (to float rounding) and the de-biased models meet within bf16 rounding
// of the true average; with overlap too (late messages folded later), and with several
// out-neighbours.
TEST(PushSum, Bf16WireConservesMass) {
  // One out-neighbour a round, and three (the static exponential graph: several shares, one residual).
  for (auto [kind, overlap] : {std::pair{topology::Kind::kPushSumOnePeerExponential, false},
                               std::pair{topology::Kind::kPushSumOnePeerExponential, true},
                               std::pair{topology::Kind::kExponential, false}}) {
    const int n = 5, rounds = 60;
    const size_t dim = 6;
    std::vector<std::vector<float>> z(n, std::vector<float>(dim));
    std::vector<double> w(n);
    std::vector<std::vector<float>> x(n);
    for (int r = 0; r < n; ++r)
      for (size_t d = 0; d < dim; ++d) z[r][d] = float(r + 1) * float(d + 1) + 0.1f;  // not exact in bf16
    gossip::testing::run_peers(n, [&](int r, Transport& t) {
      PushSumStep ps(t, {kind, 0, {}}, dim, 4, 10.0, overlap, 2, Dtype::kBf16);
      ps.init(z[r].data());
      for (int k = 0; k < rounds; ++k) {
        if (overlap) std::this_thread::sleep_for(std::chrono::microseconds(200 * r));
        ps.step(k, z[r].data());
      }
      ps.drain(z[r].data());
      w[r] = ps.weight();
      x[r] = ps.numerator();
    });
    double wsum = 0;
    for (double v : w) wsum += v;
    EXPECT_NEAR(wsum, n, 1e-9) << "overlap " << overlap;
    for (size_t d = 0; d < dim; ++d) {
      const double avg = (n + 1) / 2.0 * (d + 1) + 0.1;
      double xsum = 0;
      for (int r = 0; r < n; ++r) xsum += x[r][d];
      EXPECT_NEAR(xsum, n * avg, 1e-5 * n * avg) << "Σx, overlap " << overlap << " dim " << d;
      for (int r = 0; r < n; ++r)
        EXPECT_NEAR(z[r][d], avg, std::ldexp(avg, -7)) << "peer " << r << " dim " << d << " overlap " << overlap;
    }
  }
}

// One persistent straggler (peer 2, 2 ms per round). Asynchronous mode: the others never wait for
// it (when they finish their rounds it is far behind), mass (Σw and Σx) is conserved, and the
// straggler keeps its weight once the others have finished instead of giving it all away.
// Bounded staleness, for contrast, ties everyone to it.
TEST(PushSum, AsynchronousModeIsNotHeldBackByAStraggler) {
  const int n = 5, rounds = 60, straggler = 2;
  const size_t dim = 6;
  for (int staleness : {-1, 2}) {
    std::vector<std::vector<float>> z(n, std::vector<float>(dim));
    double mass = 0;
    for (int r = 0; r < n; ++r)
      for (size_t d = 0; d < dim; ++d) mass += z[r][d] = float(r + 1) * float(d + 1);
    std::vector<double> w(n);
    std::atomic<int> straggler_rounds{0};
    std::vector<int> straggler_rounds_when_done(n);
    gossip::testing::run_peers(n, [&](int r, Transport& t) {
      PushSumStep ps(t, {topology::Kind::kPushSumOnePeerExponential, 0, {}}, dim, 4, 10.0, true, staleness);
      ps.set_total_rounds(rounds);
      ps.init(z[r].data());
      for (int k = 0; k < rounds; ++k) {
        if (r == straggler) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ps.step(k, z[r].data());
        if (r == straggler) ++straggler_rounds;
      }
      straggler_rounds_when_done[r] = straggler_rounds;
      ps.drain(z[r].data());
      w[r] = ps.weight();
    });
    double wsum = 0, xsum = 0;
    for (int r = 0; r < n; ++r) {
      wsum += w[r];
      for (size_t d = 0; d < dim; ++d) xsum += double(z[r][d]) * w[r];
    }
    EXPECT_NEAR(wsum, n, 1e-9) << "staleness " << staleness;
    EXPECT_NEAR(xsum, mass, 1e-4 * mass) << "staleness " << staleness;
    EXPECT_GT(w[straggler], 0.1) << "the straggler kept weight";
    for (int r = 0; r < n; ++r) {
      if (r == straggler) continue;
      if (staleness < 0)
        EXPECT_LT(straggler_rounds_when_done[r], rounds / 2) << "peer " << r << " waited for the straggler";
      else
        EXPECT_GE(straggler_rounds_when_done[r], rounds / 2) << "peer " << r << " did not wait";
    }
  }
}

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
