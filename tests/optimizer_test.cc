// The optimizers over the model's buffers: clipping, AdamW's state through save and restore, and
// what a wrong checkpoint state says.
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
