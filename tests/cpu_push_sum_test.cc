// The CPU backend's push-sum kernels (Backend::push_sum_split, accumulate, scale_copy;
// kernels/cpu_push_sum.cc) against the formulas of PushSumSplit written out here one value at a
// time, in the promised order (so bit for bit): one out-neighbour (the fused pass) and several,
// f32 and bf16 shares, asynchronous mode's gain, NaN in the model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "spread_values.h"

namespace gossip::kernels {
namespace {

using testing::spread_values;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Expected {
  std::vector<float> x;
  std::vector<std::vector<float>> shares;  // f32 shares, or the bf16 shares widened
};

// PushSumSplit's formulas, one value at a time.
Expected split_by_hand(const std::vector<float>& x0, const std::vector<float>& z, const std::vector<float>& p,
                       float inv, float gain, float self, bool bf16) {
  Expected e{x0, std::vector<std::vector<float>>(p.size(), std::vector<float>(x0.size()))};
  for (size_t i = 0; i < x0.size(); ++i) {
    const float correction = z[i] - x0[i] * inv;
    const float y = x0[i] + gain * correction;
    float r = 0;
    for (size_t k = 0; k < p.size(); ++k) {
      const float sent = p[k] * y;
      e.shares[k][i] = bf16 ? from_bf16(to_bf16(sent)) : sent;
      const float d = sent - e.shares[k][i];
      r = k == 0 ? d : r + d;
    }
    const float kept = self * y;
    e.x[i] = bf16 && !p.empty() ? kept + r : kept;
  }
  return e;
}

void check_split(size_t degree, bool bf16, float gain) {
  const size_t n = 4099;
  auto backend = make_cpu_backend();
  std::vector<float> x = spread_values(n, 1 + degree), z = spread_values(n, 7 + degree);
  z[n / 3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> p(degree, 1.0f / float(degree + 1));
  if (degree > 1) p[1] = 0.0f;  // an out-neighbour that has finished (asynchronous mode)
  const float inv = 1.0f / 1.37f, self = 1.0f / float(degree + 1);
  const Expected e = split_by_hand(x, z, p, inv, gain, self, bf16);

  std::vector<std::vector<float>> f32(degree, std::vector<float>(n, -1));
  std::vector<std::vector<uint16_t>> b16(degree, std::vector<uint16_t>(n, 0xFFFF));
  std::vector<void*> shares;
  for (size_t k = 0; k < degree; ++k) shares.push_back(bf16 ? static_cast<void*>(b16[k].data()) : f32[k].data());
  PushSumSplit s;
  s.n = n;
  s.z = z.data();
  s.x = x.data();
  s.inv = inv, s.gain = gain, s.self = self, s.bf16 = bf16;
  s.degree = degree;
  s.shares = shares.data();
  s.weights = p.data();
  backend->push_sum_split(s);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_bits(x[i], e.x[i]) || (std::isnan(x[i]) && std::isnan(e.x[i])))
        << "degree " << degree << " bf16 " << bf16 << " x at " << i << ": " << x[i] << " vs " << e.x[i];
    for (size_t k = 0; k < degree; ++k) {
      const float got = bf16 ? from_bf16(b16[k][i]) : f32[k][i];
      ASSERT_TRUE(same_bits(got, e.shares[k][i]) || (std::isnan(got) && std::isnan(e.shares[k][i])))
          << "degree " << degree << " bf16 " << bf16 << " share " << k << " at " << i;
    }
  }
  EXPECT_TRUE(std::isnan(x[n / 3])) << "a NaN in the model reaches the numerator";
}

TEST(CpuPushSum, SplitIsTheFormulaBitForBit) {
  for (bool bf16 : {false, true})
    for (size_t degree : {0, 1, 2, 3, 9}) {
      check_split(degree, bf16, 1.0f);
      check_split(degree, bf16, 0.625f);  // asynchronous mode's gain w
    }
}

// What rounding takes off a bf16 share stays in x: p·y = Q(p·y) + (p·y − Q(p·y)) for each share,
// so shares plus what is kept add up to y (within float rounding of the sums).
TEST(CpuPushSum, Bf16SharesKeepTheRoundingResidual) {
  const size_t n = 1000;
  auto backend = make_cpu_backend();
  std::vector<float> x = spread_values(n, 3), z = x, y = x;
  std::vector<std::vector<uint16_t>> b16(2, std::vector<uint16_t>(n));
  std::vector<void*> shares{b16[0].data(), b16[1].data()};
  std::vector<float> p{0.25f, 0.375f};
  PushSumSplit s;
  s.n = n, s.z = z.data(), s.x = x.data(), s.self = 0.375f, s.bf16 = true, s.degree = 2;
  s.shares = shares.data(), s.weights = p.data();
  backend->push_sum_split(s);
  for (size_t i = 0; i < n; ++i) {
    const double total = double(x[i]) + from_bf16(b16[0][i]) + from_bf16(b16[1][i]);
    ASSERT_NEAR(total, y[i], 4e-7 * std::abs(y[i])) << i;
    ASSERT_NE(from_bf16(b16[0][i]) + from_bf16(b16[1][i]), 0.625f * y[i]) << "shares not rounded at " << i;
  }
}

TEST(CpuPushSum, AccumulateAddsFloatsAndWidenedBf16) {
  auto backend = make_cpu_backend();
  const size_t n = 777;
  std::vector<float> x = spread_values(n, 5), v = spread_values(n, 6), a = x, b = x;
  std::vector<uint16_t> q(n);
  to_bf16(v.data(), q.data(), n);
  backend->accumulate(a.data(), v.data(), n, false);
  backend->accumulate(b.data(), q.data(), n, true);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_bits(a[i], x[i] + v[i])) << i;
    ASSERT_TRUE(same_bits(b[i], x[i] + from_bf16(q[i]))) << i;
  }
}

TEST(CpuPushSum, ScaleCopyWritesAProductAndLeavesTheSource) {
  auto backend = make_cpu_backend();
  std::vector<float> x = spread_values(100, 8), keep = x, y(100, 0);
  x[3] = -0.0f, keep[3] = -0.0f;
  backend->scale_copy(x.size(), 0.3f, x.data(), y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(same_bits(y[i], 0.3f * keep[i])) << i;
    ASSERT_TRUE(same_bits(x[i], keep[i])) << i;
  }
  backend->scale_copy(x.size(), 1.0f, x.data(), y.data());
  EXPECT_TRUE(std::signbit(y[3])) << "a = 1 copies, negative zero included";
}

}  // namespace
}  // namespace gossip::kernels
