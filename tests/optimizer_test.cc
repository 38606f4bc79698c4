// The optimizers over the model's buffers: clipping, AdamW's and quasi-global SGD's state through
// save and restore, quasi-global momentum against a double reference, and what a wrong checkpoint
// state says.
#include "model/optimizer.h"
#include "model/mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

namespace gossip::model {
namespace {

void set_grads(Mlp& m, double base) {
  for (size_t i = 0; i < m.num_params(); ++i) m.grads()[i] = static_cast<float>(std::sin(base + 0.37 * double(i)));
}

TEST(Optimizer, KindsParseByTheirYamlNames) {
  EXPECT_EQ(parse_optimizer_kind("sgd"), OptimizerKind::kSgd);
  EXPECT_EQ(parse_optimizer_kind("adamw"), OptimizerKind::kAdamW);
  EXPECT_EQ(parse_optimizer_kind("adam"), std::nullopt);
}

TEST(Optimizer, ClippingScalesTheGlobalNormDownToTheLimitOnly) {
  auto be = kernels::make_cpu_backend();
  Mlp m(*be, {4, 3, 2}, 2);
  set_grads(m, 1.0);
  const double norm = be->norm2(m.grads(), m.num_params());
  ASSERT_GT(norm, 1.0);
  EXPECT_DOUBLE_EQ(clip_gradients(m, 10 * norm), norm);
  EXPECT_NEAR(be->norm2(m.grads(), m.num_params()), norm, 1e-6 * norm);  // under the limit: untouched
  EXPECT_DOUBLE_EQ(clip_gradients(m, 1.0), norm);
  EXPECT_NEAR(be->norm2(m.grads(), m.num_params()), 1.0, 1e-5);
  EXPECT_EQ(clip_gradients(m, 0), 0.0);  // off
}

// A run that saves AdamW's state after 3 steps and restores it into a fresh optimizer continues
// bit for bit like one that never stopped (moments and step count both come back).
TEST(Optimizer, AdamWStateSurvivesSaveAndRestoreExactly) {
  auto be = kernels::make_cpu_backend();
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.weight_decay = 0.01;
  c.clip_norm = 2.0;
  Mlp a(*be, {5, 4, 3}, 2), b(*be, {5, 4, 3}, 2);
  a.init(3);
  auto opt_a = make_optimizer(a, c);
  for (int t = 0; t < 3; ++t) {
    set_grads(a, t);
    opt_a->step(1e-2);
  }
  const std::vector<float> state = opt_a->save_state();
  ASSERT_EQ(state.size(), 2 * a.num_params() + 2);
  b.upload_params(a.download_params());
  auto opt_b = make_optimizer(b, c);
  opt_b->restore_state(state, "test.ckpt");
  EXPECT_EQ(static_cast<AdamW&>(*opt_b).steps(), 3);
  for (int t = 3; t < 6; ++t) {
    set_grads(a, t);
    opt_a->step(1e-2);
    set_grads(b, t);
    opt_b->step(1e-2);
  }
  EXPECT_EQ(a.download_params(), b.download_params());
}

TEST(Optimizer, AResetStartsBiasCorrectionAgain) {
  auto be = kernels::make_cpu_backend();
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  Mlp m(*be, {3, 2}, 1);
  AdamW opt(m, c);
  set_grads(m, 0.5);
  opt.step(1e-3);
  opt.step(1e-3);
  EXPECT_EQ(opt.steps(), 2);
  opt.reset();
  EXPECT_EQ(opt.steps(), 0);
  const std::vector<float> state = opt.save_state();
  for (size_t i = 0; i < 2 * m.num_params(); ++i) ASSERT_EQ(state[i], 0.0f) << i;
}

// "The mix" between steps, emulated: every parameter moves by a small pull of its own.
void pull(std::vector<double>& x, int t) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += 0.01 * std::cos(0.5 * double(i) + t);
}

// Quasi-global momentum against a double reference over 5 steps with a changing lr, weight decay
// and a "mix" moving the parameters between steps: m̂ ← μ·m̂ + (1 − μ)·(x_last − x)/lr_last,
// v ← μ·m̂ + g + wd·x, x ← x − lr·v.
TEST(Optimizer, QuasiGlobalMomentumMatchesDouble) {
  auto be = kernels::make_cpu_backend();
  OptimizerConfig c;
  c.quasi_global = true;
  c.momentum = 0.8;
  c.weight_decay = 0.01;
  Mlp m(*be, {5, 4, 3}, 2);
  m.init(5);
  const size_t n = m.num_params();
  std::vector<double> x(m.params(), m.params() + n), last(n), mhat(n, 0.0);
  auto opt = make_optimizer(m, c);
  double last_lr = 0;
  for (int t = 0; t < 5; ++t) {
    const double lr = static_cast<float>(0.1 / (t + 1));
    set_grads(m, t);
    for (size_t i = 0; i < n; ++i) {
      if (t > 0) mhat[i] = c.momentum * mhat[i] + (1 - c.momentum) * (last[i] - x[i]) / last_lr;
      last[i] = x[i];
      x[i] -= lr * (c.momentum * mhat[i] + m.grads()[i] + c.weight_decay * x[i]);
    }
    last_lr = lr;
    opt->step(lr);
    pull(x, t);
    for (size_t i = 0; i < n; ++i) {
      m.params()[i] += static_cast<float>(0.01 * std::cos(0.5 * double(i) + t));
      ASSERT_NEAR(m.params()[i], x[i], 1e-5) << "step " << t << " parameter " << i;
    }
  }
  double moved = 0;  // the mix's pull is in the momentum: plain SGD momentum would not have it
  for (size_t i = 0; i < n; ++i) moved += std::abs(mhat[i]);
  EXPECT_GT(moved / double(n), 1e-2);
}

// Its state (the momentum, m̂, x_last and lr_last) survives save and restore bit for bit, and a
// reset forgets x_last (a joiner's model is not a step away from the one it dropped).
TEST(Optimizer, QuasiGlobalStateSurvivesSaveAndRestoreExactly) {
  auto be = kernels::make_cpu_backend();
  OptimizerConfig c;
  c.quasi_global = true;
  Mlp a(*be, {5, 4, 3}, 2), b(*be, {5, 4, 3}, 2);
  a.init(3);
  auto opt_a = make_optimizer(a, c);
  auto step = [](Mlp& m, Optimizer& opt, int t) {
    set_grads(m, t);
    opt.step(0.05 / (t + 1));
    m.params()[t] += 0.01f;  // a mix
  };
  for (int t = 0; t < 3; ++t) step(a, *opt_a, t);
  const std::vector<float> state = opt_a->save_state();
  ASSERT_EQ(state.size(), 3 * a.num_params() + 1);
  b.upload_params(a.download_params());
  auto opt_b = make_optimizer(b, c);
  opt_b->restore_state(state, "test.ckpt");
  for (int t = 3; t < 6; ++t) {
    step(a, *opt_a, t);
    step(b, *opt_b, t);
  }
  EXPECT_EQ(a.download_params(), b.download_params());
  opt_a->reset();
  EXPECT_EQ(opt_a->save_state().back(), 0.0f);
  c.quasi_global = false;
  try {
    make_optimizer(b, c)->restore_state(state, "q.ckpt");
    FAIL() << "restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SGD needs " + std::to_string(a.num_params())), std::string::npos) << e.what();
  }
}

TEST(Optimizer, AStateOfAnotherSizeNamesTheCheckpoint) {
  auto be = kernels::make_cpu_backend();
  Mlp m(*be, {3, 2}, 1);
  OptimizerConfig c;
  auto sgd = make_optimizer(m, c);
  c.kind = OptimizerKind::kAdamW;
  auto adamw = make_optimizer(m, c);
  try {
    adamw->restore_state(sgd->save_state(), "dir/peer-0.step-9.ckpt");  // an SGD checkpoint
    FAIL() << "restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dir/peer-0.step-9.ckpt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("AdamW needs " + std::to_string(2 * m.num_params() + 2)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gossip::model
