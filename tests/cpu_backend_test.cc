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
  LossResult r = be.softmax_xent(z.data(), &y, 1, 4, d.data(), 1.0f, 0.0f);
  EXPECT_NEAR(r.loss_sum, std::log(4.0), 1e-6);
  EXPECT_NEAR(d[2], -0.75f, 1e-6);
  EXPECT_NEAR(d[0], 0.25f, 1e-6);
  // A confident correct row counts as a hit and has a tiny loss; large logits must not overflow.
  std::vector<float> z2{1000, 0, 0};
  int32_t y2 = 0;
  LossResult r2 = be.softmax_xent(z2.data(), &y2, 1, 3, nullptr, 1.0f, 0.0f);
  EXPECT_EQ(r2.correct, 1);
  EXPECT_LT(r2.loss_sum, 1e-6);
  EXPECT_TRUE(std::isfinite(r2.loss_sum));
}

// Label smoothing s: the target is q = (1 − s)·onehot + s/cols; loss −Σ q·log p, gradient p − q.
TEST(CpuBackend, SoftmaxCrossEntropyWithLabelSmoothing) {
  CpuBackend be;
  const std::vector<float> z{0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 0.0f, -0.5f, 3.0f};
  const std::vector<int32_t> y{2, 0};
  const float s = 0.1f;
  std::vector<float> d(8);
  const LossResult r = be.softmax_xent(z.data(), y.data(), 2, 4, d.data(), 0.5f, s);
  double loss = 0;
  for (int row = 0; row < 2; ++row) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += std::exp(double(z[row * 4 + c]));
    for (int c = 0; c < 4; ++c) {
      const double p = std::exp(double(z[row * 4 + c])) / sum, q = (c == y[row]) * (1 - s) + s / 4.0;
      loss -= q * std::log(p);
      EXPECT_NEAR(d[row * 4 + c], 0.5 * (p - q), 1e-6) << "row " << row << " class " << c;
    }
  }
  EXPECT_NEAR(r.loss_sum, loss, 1e-5);
  EXPECT_EQ(r.correct, 1);  // row 0 predicts 2 (its label), row 1 predicts 3
  // Smoothing 0: −log p of the label, gradient p − onehot.
  std::vector<float> d0(8);
  double plain = 0;
  const LossResult r0 = be.softmax_xent(z.data(), y.data(), 2, 4, d0.data(), 1.0f, 0.0f);
  for (int row = 0; row < 2; ++row) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += std::exp(double(z[row * 4 + c]));
    plain -= std::log(std::exp(double(z[row * 4 + y[row]])) / sum);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(d0[row * 4 + c], std::exp(double(z[row * 4 + c])) / sum - (c == y[row]), 1e-6);
  }
  EXPECT_NEAR(r0.loss_sum, plain, 1e-5);
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

// Adam's first step, bias-corrected, moves every weight by lr against the sign of its gradient
// (m̂ = g, v̂ = g²), whatever the gradient's size; a zero gradient leaves it where it is.
TEST(CpuBackend, AdamWFirstStepMovesEachWeightByLrAgainstItsGradient) {
  CpuBackend be;
  std::vector<float> w{1, 1, 1, 1}, g{0.5f, -2.0f, 1e-3f, 0.0f}, m(4, 0.0f), v(4, 0.0f);
  AdamWStep s;
  s.lr = 0.1f;
  s.bias1 = 1 - 0.9f;
  s.bias2 = 1 - 0.999f;
  be.adamw_update(w.data(), g.data(), m.data(), v.data(), 4, s);
  EXPECT_NEAR(w[0], 0.9f, 1e-5);
  EXPECT_NEAR(w[1], 1.1f, 1e-5);
  EXPECT_NEAR(w[2], 0.9f, 1e-4);
  EXPECT_EQ(w[3], 1.0f);
  EXPECT_NEAR(m[1], -0.2f, 1e-7);
  EXPECT_NEAR(v[1], 0.004f, 1e-7);
}

TEST(CpuBackend, AdamWWeightDecayIsDecoupledFromTheGradient) {
  CpuBackend be;
  std::vector<float> w{2.0f, -4.0f}, g(2, 0.0f), m(2, 0.0f), v(2, 0.0f);
  AdamWStep s;
  s.lr = 0.1f;
  s.weight_decay = 0.5f;
  be.adamw_update(w.data(), g.data(), m.data(), v.data(), 2, s);
  EXPECT_FLOAT_EQ(w[0], 2.0f * 0.95f);  // SGD's L2 term would have gone through the moments
  EXPECT_FLOAT_EQ(w[1], -4.0f * 0.95f);
}

// Five steps against the update written out in double precision (PyTorch's AdamW formula).
TEST(CpuBackend, AdamWFollowsTheDoublePrecisionFormulaOverSteps) {
  CpuBackend be;
  const size_t n = 7;
  std::vector<float> w(n), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> wd(n), md(n, 0.0), vd(n, 0.0);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(wd[i] = 0.3 * double(i) - 1.0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-6, decay = 0.1;
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(double(t * 7 + i)));
    AdamWStep s{static_cast<float>(lr), static_cast<float>(b1), static_cast<float>(b2), static_cast<float>(eps),
                static_cast<float>(decay), static_cast<float>(1 - std::pow(b1, t)), static_cast<float>(1 - std::pow(b2, t))};
    be.adamw_update(w.data(), g.data(), m.data(), v.data(), n, s);
    for (size_t i = 0; i < n; ++i) {
      wd[i] *= 1 - lr * decay;
      md[i] = b1 * md[i] + (1 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1 - b2) * double(g[i]) * g[i];
      wd[i] -= lr / (1 - std::pow(b1, t)) * md[i] / (std::sqrt(vd[i]) / std::sqrt(1 - std::pow(b2, t)) + eps);
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(w[i], wd[i], 1e-5) << i;
}

TEST(CpuBackend, Norm2) {
  CpuBackend be;
  std::vector<float> x{3, 4, 0};
  EXPECT_DOUBLE_EQ(be.norm2(x.data(), 3), 5.0);
  EXPECT_DOUBLE_EQ(be.norm2(nullptr, 0), 0.0);
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
  be.copy_bytes(y.data(), x.data(), 2 * sizeof(float));
  EXPECT_EQ(y, (std::vector<float>{1, 2, 4}));
}

// gather_rows: picked rows (repeats allowed) through the byte value table, or as floats, and
// their labels.
TEST(CpuBackend, GatherRowsFromBytesAndFloats) {
  CpuBackend be;
  const std::vector<uint8_t> bytes{0, 1, 2, 3, 4, 5, 255, 254, 253};  // 3 rows of 3
  std::vector<float> table(256);
  for (int v = 0; v < 256; ++v) table[v] = float(v) * 0.5f - 1.0f;
  const std::vector<float> floats{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> labels{7, 8, 9}, rows{2, 0, 2};
  std::vector<float> x(9, -5);
  std::vector<int32_t> y(3, -1);
  RowGather g;
  g.bytes = bytes.data(), g.table = table.data(), g.labels = labels.data(), g.cols = 3;
  g.rows = rows.data(), g.count = 3, g.x = x.data(), g.y = y.data();
  be.gather_rows(g);
  EXPECT_EQ(x, (std::vector<float>{126.5f, 126, 125.5f, -1, -0.5f, 0, 126.5f, 126, 125.5f}));
  EXPECT_EQ(y, (std::vector<int32_t>{9, 7, 9}));
  g.bytes = nullptr, g.floats = floats.data(), g.count = 2;
  be.gather_rows(g);
  EXPECT_EQ(x, (std::vector<float>{7, 8, 9, 1, 2, 3, 126.5f, 126, 125.5f})) << "two rows only";
}

TEST(CpuBackend, GatherWindowsTakesTokensAndNextByteTargets) {
  CpuBackend be;
  const std::vector<uint8_t> text{10, 11, 12, 13, 14, 15, 16};
  const std::vector<int64_t> starts{4, 0, 1};
  std::vector<int32_t> tokens(6, -1), targets(6, -1);
  WindowGather g;
  g.text = text.data(), g.starts = starts.data(), g.count = 3, g.context = 2;
  g.tokens = tokens.data(), g.targets = targets.data();
  be.gather_windows(g);
  EXPECT_EQ(tokens, (std::vector<int32_t>{14, 15, 10, 11, 11, 12}));
  EXPECT_EQ(targets, (std::vector<int32_t>{15, 16, 11, 12, 12, 13}));
}

// The tally holds the sum of the batches' LossResults and is read once.
TEST(CpuBackend, LossTallyAddsWhatSoftmaxXentReturns) {
  CpuBackend be;
  const std::vector<float> z{1, 2, 0.5f, -1, 3, 0};
  const std::vector<int32_t> y{1, 0};
  std::vector<float> d1(6), d2(6);
  const LossResult r = be.softmax_xent(z.data(), y.data(), 2, 3, d1.data(), 0.5f, 0.1f);
  be.tally_softmax_xent(z.data(), y.data(), 2, 3, d2.data(), 0.5f, 0.1f);
  be.tally_softmax_xent(z.data(), y.data(), 2, 3, d2.data(), 0.5f, 0.1f);
  EXPECT_EQ(d1, d2);
  const LossTally t = be.take_tally();
  EXPECT_EQ(t.loss_sum, 2.0 * r.loss_sum);
  EXPECT_EQ(t.correct, 2 * r.correct);
  EXPECT_EQ(r.correct, 1);
  EXPECT_EQ(be.take_tally().correct, 0);
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
