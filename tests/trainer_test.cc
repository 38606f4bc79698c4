#include "peer/trainer.h"

#include <gtest/gtest.h>

namespace gossip::peer {
namespace {

RunConfig synthetic_config(const std::string& optimizer = "{lr: 0.05, momentum: 0.9, batch: 32, epochs: 2}") {
  return parse_config(R"(
seed: 4
device: cpu
log_every: 1000
model: {hidden: [32]}
data: {dataset: synthetic, synthetic: {train: 2000, test: 500, dims: 16, classes: 4}}
optimizer: )" + optimizer + "\n",
                      "synthetic.yaml");
}

TEST(Trainer, SinglePeerLearnsSyntheticData) {
  Trainer t(synthetic_config(), 0, 1, nullptr);
  TrainResult r = t.run();
  EXPECT_EQ(r.steps, 2 * (2000 / 32));
  EXPECT_GT(r.test.accuracy, 0.9);
  EXPECT_GT(r.samples_per_s, 0);
}

TEST(Trainer, AdamWWithClippingLearnsSyntheticData) {
  const RunConfig c = synthetic_config(
      "{kind: adamw, lr: 0.003, weight_decay: 0.01, clip_norm: 1.0, batch: 32, epochs: 2, schedule: cosine}");
  ASSERT_EQ(c.train.optimizer.kind, model::OptimizerKind::kAdamW);
  Trainer t(c, 0, 1, nullptr);
  const TrainResult r = t.run();
  EXPECT_GT(r.test.accuracy, 0.9);
}

TEST(Trainer, DeterministicGivenSeed) {
  RunConfig c = synthetic_config();
  c.train.epochs = 0.5;
  Trainer a(c, 0, 1, nullptr), b(c, 0, 1, nullptr);
  a.run();
  b.run();
  EXPECT_EQ(a.model().download_params(), b.model().download_params());
}

// Hooks run once per step, in order, on the training thread.
TEST(Trainer, HookSeesEveryStep) {
  struct Counter : StepHook {
    int64_t before = 0, after = 0;
    bool finished = false;
    void before_step(int64_t step, model::Mlp&) override { EXPECT_EQ(step, before++); }
    void after_step(int64_t step, model::Mlp&) override { EXPECT_EQ(step, after++); }
    bool finish(model::Mlp&) override {
      finished = true;
      return false;
    }
  } hook;
  RunConfig c = synthetic_config();
  c.train.epochs = 0.25;
  Trainer t(c, 1, 2, &hook);
  TrainResult r = t.run();
  EXPECT_EQ(hook.after, r.steps);
  EXPECT_EQ(hook.before, r.steps);
  EXPECT_TRUE(hook.finished);
}

TEST(Trainer, MissingDataDirectoryNamesTheFile) {
  RunConfig c = synthetic_config();
  c.data.dataset = Dataset::kFashionMnist;
  c.data.dir = "/nonexistent-data";
  try {
    Trainer t(c, 0, 1, nullptr);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-data/train-images-idx3-ubyte.gz"), std::string::npos);
  }
}

}  // namespace
}  // namespace gossip::peer
