#include "model/mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/optimizer.h"

namespace gossip::model {
namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch random_batch(int rows, int dims, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  Batch b;
  b.x.resize(size_t(rows) * dims);
  for (float& v : b.x) v = d(rng);
  for (int r = 0; r < rows; ++r) b.y.push_back(static_cast<int32_t>(rng() % classes));
  return b;
}

TEST(Mlp, ParametersAreOneContiguousBufferWithViews) {
  auto be = kernels::make_cpu_backend();
  Mlp m(*be, {6, 5, 4, 3}, 8);
  EXPECT_EQ(m.num_params(), size_t(6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3));
  EXPECT_EQ(m.layer(0).w, m.params());
  EXPECT_EQ(m.layer(0).b, m.params() + 30);
  EXPECT_EQ(m.layer(1).w, m.layer(0).b + 5);
  EXPECT_EQ(m.layer(2).b + 3, m.params() + m.num_params());
  EXPECT_EQ(m.grad_layer(2).b + 3, m.grads() + m.num_params());
}

// Central finite differences on every parameter of every layer against the analytic gradient.
TEST(Mlp, GradientMatchesFiniteDifferences) {
  auto be = kernels::make_cpu_backend();
  const int rows = 6;
  Mlp m(*be, {5, 7, 6, 4}, rows);
  m.init(3);
  // Non-zero biases so that every bias gradient is exercised.
  std::vector<float> p = m.download_params();
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  for (size_t l = 0; l < m.num_layers(); ++l)
    for (int i = 0; i < m.layer(l).out; ++i) p[(m.layer(l).b - m.params()) + i] = u(rng);
  m.upload_params(p);
  Batch b = random_batch(rows, 5, 4, 4);
  m.train_batch(b.x.data(), b.y.data(), rows);
  std::vector<float> analytic(m.num_params());
  be->download(analytic.data(), m.grads(), analytic.size() * 4);

  auto loss_at = [&](const std::vector<float>& params) {
    m.upload_params(params);
    return m.evaluate(b.x.data(), b.y.data(), rows).loss_sum / rows;
  };
  const float eps = 1e-2f;
  int checked = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<float> plus = p, minus = p;
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << i;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(m.num_params()));
}

TEST(Mlp, InitIsDeterministicAndSeedDependent) {
  auto be = kernels::make_cpu_backend();
  Mlp a(*be, {10, 8, 3}, 4), b(*be, {10, 8, 3}, 4), c(*be, {10, 8, 3}, 4);
  a.init(42);
  b.init(42);
  c.init(43);
  EXPECT_EQ(a.download_params(), b.download_params());
  EXPECT_NE(a.download_params(), c.download_params());
}

TEST(Mlp, TrainingIsDeterministicGivenSeed) {
  auto run = [] {
    auto be = kernels::make_cpu_backend();
    Mlp m(*be, {8, 16, 3}, 16);
    m.init(5);
    Sgd sgd(m, {0.9, true, 1e-4});
    for (int step = 0; step < 20; ++step) {
      Batch b = random_batch(16, 8, 3, 100 + step);
      m.train_batch(b.x.data(), b.y.data(), 16);
      sgd.step(0.05);
    }
    return m.download_params();
  };
  EXPECT_EQ(run(), run());
}

TEST(Mlp, LearnsASeparableProblem) {
  auto be = kernels::make_cpu_backend();
  Mlp m(*be, {2, 16, 2}, 64);
  m.init(1);
  Sgd sgd(m, {0.9, false, 0});
  std::mt19937_64 rng(2);
  std::normal_distribution<float> d;
  auto make = [&] {
    Batch b;
    for (int i = 0; i < 64; ++i) {
      float x0 = d(rng), x1 = d(rng);
      b.x.push_back(x0);
      b.x.push_back(x1);
      b.y.push_back(x0 + x1 > 0);
    }
    return b;
  };
  for (int s = 0; s < 300; ++s) {
    Batch b = make();
    m.train_batch(b.x.data(), b.y.data(), 64);
    sgd.step(0.05);
  }
  Batch t = make();
  EXPECT_GT(m.evaluate(t.x.data(), t.y.data(), 64).correct, 58);
}

TEST(Mlp, RejectsBadShapesAndOversizedBatch) {
  auto be = kernels::make_cpu_backend();
  EXPECT_THROW(Mlp(*be, {5}, 4), std::exception);
  EXPECT_THROW(Mlp(*be, {5, 0, 2}, 4), std::exception);
  Mlp m(*be, {3, 2}, 4);
  Batch b = random_batch(5, 3, 2, 1);
  EXPECT_THROW(m.train_batch(b.x.data(), b.y.data(), 5), std::exception);
  EXPECT_THROW(m.upload_params(std::vector<float>(3)), std::exception);
}

// Same training on CUDA and CPU stays within tolerance; skipped without a device.
TEST(Mlp, CudaTrainingMatchesCpu) {
  std::string why;
  if (!kernels::cuda_device_available(&why)) GTEST_SKIP() << why;
  auto run = [](const std::string& device) {
    auto be = kernels::make_backend(device);
    Mlp m(*be, {20, 32, 32, 5}, 32);
    m.init(7);
    Sgd sgd(m, {0.9, false, 0});
    for (int step = 0; step < 10; ++step) {
      Batch b = random_batch(32, 20, 5, step);
      m.train_batch(b.x.data(), b.y.data(), 32);
      sgd.step(0.05);
    }
    return m.download_params();
  };
  auto cpu = run("cpu"), gpu = run("cuda");
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(cpu[i], gpu[i], 1e-3) << i;
}

// With set_loss_tally a training pass returns the count only and its loss sum and hits go to the
// backend's tally, the same figures a plain pass returns; the gradient is the same; evaluation
// still returns its loss.
TEST(Mlp, LossTallyHoldsWhatTheStepsWouldHaveReturned) {
  auto plain_be = kernels::make_cpu_backend(), tally_be = kernels::make_cpu_backend();
  Mlp plain(*plain_be, {8, 6, 3}, 16), tallied(*tally_be, {8, 6, 3}, 16);
  plain.init(5);
  tallied.init(5);
  tallied.set_loss_tally(true);
  double loss = 0;
  int64_t correct = 0;
  for (int k = 0; k < 3; ++k) {
    const Batch b = random_batch(16, 8, 3, 20 + k);
    const BatchStats p = plain.train_batch(b.x.data(), b.y.data(), 16);
    const BatchStats t = tallied.train_batch(b.x.data(), b.y.data(), 16);
    EXPECT_FALSE(p.tallied);
    EXPECT_TRUE(t.tallied);
    EXPECT_EQ(t.loss_sum, 0);
    EXPECT_EQ(t.count, 16);
    loss += p.loss_sum;
    correct += p.correct;
    std::vector<float> gp(plain.num_params()), gt(tallied.num_params());
    plain_be->download(gp.data(), plain.grads(), gp.size() * 4);
    tally_be->download(gt.data(), tallied.grads(), gt.size() * 4);
    EXPECT_EQ(gp, gt);
  }
  const kernels::LossTally tally = tally_be->take_tally();
  EXPECT_GT(loss, 0);
  EXPECT_EQ(tally.loss_sum, loss);
  EXPECT_EQ(tally.correct, correct);
  EXPECT_EQ(tally_be->take_tally().loss_sum, 0) << "read once";
  const Batch e = random_batch(16, 8, 3, 40);
  EXPECT_GT(tallied.evaluate(e.x.data(), e.y.data(), 16).loss_sum, 0);
  EXPECT_EQ(tally_be->take_tally().loss_sum, 0) << "evaluation does not tally";
}

}  // namespace
}  // namespace gossip::model
