// The CPU backend's gossip mix (Backend::mix_span, kernels/cpu_mix.cc) against the formula written
// out here one value at a time, in the order the kernel promises (so bit for bit): every common
// degree and the general loop, neighbours left out, the scans and the norm, bf16 values.
#include <gtest/gtest.h>

#include <cmath>
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

// A span of n values, our own and `degree` neighbours', with weights summing to one.
struct Case {
  Case(size_t n, size_t degree, uint64_t seed) : x(spread_values(n, seed)), dst(n, -1.0f) {
    for (size_t k = 0; k < degree; ++k) {
      v.push_back(spread_values(n, seed * 100 + k));
      w.push_back(1.0f / float(degree + 1));
    }
    self = 1.0f / float(degree + 1);
  }
  MixSpan span(const std::vector<const void*>& values) {
    MixSpan m;
    m.n = x.size();
    m.self = self;
    m.src = x.data();
    m.dst = dst.data();
    m.degree = v.size();
    m.values = values.data();
    m.weights = w.data();
    return m;
  }
  std::vector<const void*> all() const {
    std::vector<const void*> p;
    for (const auto& vk : v) p.push_back(vk.data());
    return p;
  }
  std::vector<float> x, dst;
  std::vector<std::vector<float>> v;
  std::vector<float> w;
  float self;
};

// Also with snapshot (each value loaded once for the scan and the mix): the same bits.
TEST(CpuMix, F32MixIsTheFormulaBitForBitAtEveryDegree) {
  auto cpu = make_cpu_backend();
  for (bool snapshot : {false, true})
    for (size_t degree : {0, 1, 2, 3, 9})
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(4096), size_t(10007)}) {
        Case c(n, degree, 7 + degree);
        const auto values = c.all();
        MixSpan m = c.span(values);
        std::vector<ValueScan> scans(degree);
        m.snapshot = snapshot;  // (a snapshot goes with a scan)
        if (snapshot) m.scans = scans.data();
        EXPECT_EQ(cpu->mix_span(m), 0.0) << "no norm asked";
        for (size_t i = 0; i < n; ++i) {
          float y = c.self * c.x[i];
          for (size_t k = 0; k < degree; ++k) y = y + c.w[k] * c.v[k][i];
          ASSERT_EQ(c.dst[i], y) << "snapshot " << snapshot << " degree " << degree << " n " << n << " at " << i;
        }
      }
}

TEST(CpuMix, ANeighbourLeftOutLeavesItsWeightWithOurOwnValues) {
  auto cpu = make_cpu_backend();
  for (size_t degree : {1, 2, 5}) {
    Case c(5000, degree, 3);
    auto values = c.all();
    values[degree - 1] = nullptr;
    cpu->mix_span(c.span(values));
    for (size_t i = 0; i < c.x.size(); ++i) {
      float y = c.self * c.x[i];
      for (size_t k = 0; k < degree; ++k) y = y + c.w[k] * (k == degree - 1 ? c.x[i] : c.v[k][i]);
      ASSERT_EQ(c.dst[i], y) << "degree " << degree << " at " << i;
    }
  }
}

TEST(CpuMix, ScansAndNormComeOutOfTheSamePass) {
  auto cpu = make_cpu_backend();
  for (size_t degree : {1, 2, 4}) {
    Case c(9000, degree, 11);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    c.v[0][8999] = nan;                       // the last value of the last block
    if (degree > 2) c.v[2][4096] = -inf;  // the first of the second block
    std::vector<ValueScan> scans(degree);
    auto values = c.all();
    MixSpan m = c.span(values);
    m.scans = scans.data();
    m.norm = true;
    m.snapshot = degree != 2;  // the copied values scan as the values themselves
    const double norm = cpu->mix_span(m);
    double want = 0;
    for (float x : c.x) want += double(x) * x;
    EXPECT_NEAR(norm, want, 1e-5 * want);
    for (size_t k = 0; k < degree; ++k) {
      const bool bad = k == 0 || k == 2;
      EXPECT_EQ(scans[k].finite, !bad) << "degree " << degree << " neighbour " << k;
      if (bad) continue;
      double sq = 0;
      for (float a : c.v[k]) sq += double(a) * a;
      EXPECT_NEAR(scans[k].sum_squares, sq, 1e-5 * sq) << "degree " << degree << " neighbour " << k;
    }
  }
}

TEST(CpuMix, Bf16ValuesKeepOurRoundingResidualOutOfTheMix) {
  auto cpu = make_cpu_backend();
  for (size_t degree : {1, 2, 3}) {
    Case c(6003, degree, 5);
    std::vector<std::vector<uint16_t>> q(degree, std::vector<uint16_t>(c.x.size()));
    std::vector<uint16_t> own(c.x.size());
    to_bf16(c.x.data(), own.data(), own.size());
    std::vector<const void*> values;
    for (size_t k = 0; k < degree; ++k) {
      to_bf16(c.v[k].data(), q[k].data(), q[k].size());
      values.push_back(q[k].data());
    }
    values[0] = nullptr;  // left out: Q(x) stands in
    MixSpan m = c.span(values);
    m.bf16 = true;
    m.own = own.data();
    std::vector<ValueScan> scans(degree);
    m.snapshot = degree == 2;  // with its scan
    if (m.snapshot) m.scans = scans.data();
    m.rest = 0;
    for (float wk : c.w) m.rest += wk;
    cpu->mix_span(m);
    for (size_t i = 0; i < c.x.size(); ++i) {
      const float qx = from_bf16(to_bf16(c.x[i]));
      float y = c.x[i] - m.rest * qx;
      for (size_t k = 0; k < degree; ++k) y = y + c.w[k] * (k == 0 ? qx : from_bf16(q[k][i]));
      ASSERT_EQ(c.dst[i], y) << "degree " << degree << " at " << i;
    }
  }
}

}  // namespace
}  // namespace gossip::kernels
