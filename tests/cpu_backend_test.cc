#include "kernels/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gossip::kernels {
namespace {

std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Naive row-major reference: C = op(A)·op(B).
std::vector<float> naive_gemm(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                              const std::vector<float>& b) {
  std::vector<float> c(size_t(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = float(s);
    }
  return c;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesNaive) {
  auto [ta, tb] = GetParam();
  CpuBackend be;
  const int m = 7, n = 5, k = 9;
  auto a = random_vector(m * k, 1), b = random_vector(k * n, 2);
  std::vector<float> c(m * n, 1.0f);
  be.gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
  auto ref = naive_gemm(ta, tb, m, n, k, a, b);
  for (int i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], ref[i], 1e-4) << i;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(CpuBackend, BiasReluAndBackward) {
  CpuBackend be;
  std::vector<float> y{-1, 0.5, 2, -3}, bias{0.5, -1};
  be.bias_act_forward(y.data(), bias.data(), 2, 2, true);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);
  EXPECT_FLOAT_EQ(y[2], 2.5f);
  EXPECT_FLOAT_EQ(y[3], 0.0f);
  std::vector<float> dy{1, 1, 1, 1};
  be.relu_backward(dy.data(), y.data(), 4);
  EXPECT_EQ(dy, (std::vector<float>{0, 0, 1, 0}));
  std::vector<float> db(2);
  std::vector<float> g{1, 2, 3, 4};
  be.column_sum(g.data(), db.data(), 2, 2);
  EXPECT_EQ(db, (std::vector<float>{4, 6}));
}

TEST(CpuBackend, SoftmaxCrossEntropyKnownValues) {
  CpuBackend be;
  // Uniform logits over 4 classes: loss = log 4, gradient = 1/4 − onehot.
  std::vector<float> z(4, 3.0f), d(4);
  int32_t y = 2;
  LossResult r = be.softmax_xent(z.data(), &y, 1, 4, d.data(), 1.0f);
  EXPECT_NEAR(r.loss_sum, std::log(4.0), 1e-6);
  EXPECT_NEAR(d[2], -0.75f, 1e-6);
  EXPECT_NEAR(d[0], 0.25f, 1e-6);
  // A confident correct row counts as a hit and has a tiny loss; large logits must not overflow.
  std::vector<float> z2{1000, 0, 0};
  int32_t y2 = 0;
  LossResult r2 = be.softmax_xent(z2.data(), &y2, 1, 3, nullptr, 1.0f);
  EXPECT_EQ(r2.correct, 1);
  EXPECT_LT(r2.loss_sum, 1e-6);
  EXPECT_TRUE(std::isfinite(r2.loss_sum));
}

TEST(CpuBackend, SgdMomentumAndNesterovFollowTorchConvention) {
  CpuBackend be;
  std::vector<float> w{1.0f}, g{0.5f}, v{0.2f};
  be.sgd_update(w.data(), g.data(), v.data(), 1, 0.1f, 0.9f, 0.01f, false);
  const float gi = 0.5f + 0.01f * 1.0f, vi = 0.9f * 0.2f + gi;
  EXPECT_FLOAT_EQ(v[0], vi);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.1f * vi);
  std::vector<float> w2{1.0f}, v2{0.2f};
  be.sgd_update(w2.data(), g.data(), v2.data(), 1, 0.1f, 0.9f, 0.0f, true);
  const float vn = 0.9f * 0.2f + 0.5f;
  EXPECT_FLOAT_EQ(w2[0], 1.0f - 0.1f * (0.5f + 0.9f * vn));
}

TEST(CpuBackend, AxpyScaleFillCopy) {
  CpuBackend be;
  std::vector<float> x{1, 2, 3}, y{1, 1, 1};
  be.axpy(3, 2.0f, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{3, 5, 7}));
  be.scale(3, 0.5f, y.data());
  EXPECT_EQ(y, (std::vector<float>{1.5, 2.5, 3.5}));
  be.fill(y.data(), 4.0f, 3);
  EXPECT_EQ(y, (std::vector<float>{4, 4, 4}));
  be.axpy(0, 1.0f, nullptr, nullptr);  // size 0 is a no-op
}

TEST(CpuBackend, DeviceArrayIsMoveOnlyAndAligned) {
  CpuBackend be;
  DeviceArray<float> a(be, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get()) % 64, 0u);
  DeviceArray<float> b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(b.size(), 100u);
  DeviceArray<float> empty(be, 0);
  EXPECT_EQ(empty.get(), nullptr);
}

TEST(Backend, FactoryRejectsUnknownDevice) {
  EXPECT_THROW(make_backend("tpu"), std::exception);
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
  // auto always yields a working backend.
  EXPECT_FALSE(make_backend("auto")->name().empty());
}

}  // namespace
}  // namespace gossip::kernels
