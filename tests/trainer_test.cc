#include "peer/trainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/error.h"

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

// optimizer.label_smoothing reaches the model: the smoothed training loss cannot fall below the
// entropy of its target (4 classes, 0.2: 0.85 / 0.05 / 0.05 / 0.05 → 0.587 nats), while the plain
// loss on this separable data does; both learn.
TEST(Trainer, LabelSmoothingShapesTheTrainingLoss) {
  Trainer plain(synthetic_config(), 0, 1, nullptr);
  Trainer smoothed(synthetic_config("{lr: 0.05, momentum: 0.9, batch: 32, epochs: 2, label_smoothing: 0.2}"), 0, 1,
                   nullptr);
  const TrainResult p = plain.run(), s = smoothed.run();
  EXPECT_GT(s.final_train_loss, 0.58);
  EXPECT_LT(p.final_train_loss, 0.5);
  EXPECT_GT(p.test.accuracy, 0.9);
  EXPECT_GT(s.test.accuracy, 0.9);
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
    void before_step(int64_t step, model::Model&) override { EXPECT_EQ(step, before++); }
    void after_step(int64_t step, model::Model&) override { EXPECT_EQ(step, after++); }
    bool finish(model::Model&) override {
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

// A tiny GPT on a repetitive text file: the validation loss is per byte, its bits per byte fall
// far below the 8 of uniform bytes, and every validation byte but the last window's remainder
// is scored once.
TEST(Trainer, GptLearnsATextFile) {
  const std::string path = ::testing::TempDir() + "/trainer_text.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 400; ++i) out << "the ring averages the models of its peers. ";
  }
  const RunConfig c = parse_config(
      "seed: 3\ndevice: cpu\nlog_every: 1000\nmodel: {kind: gpt, layers: 1, heads: 2, dim: 16, context: 16}\n"
      "data: {dataset: text, files: [" + path + "]}\n"
      "optimizer: {kind: adamw, lr: 0.01, batch: 8, steps: 150, clip_norm: 1}\n", "text.yaml");
  Trainer t(c, 0, 1, nullptr);
  const EvalResult before = t.evaluate();
  EXPECT_TRUE(before.per_byte);
  EXPECT_NEAR(before.bits_per_byte(), 8.0, 0.5) << "an untrained model is near uniform";
  const TrainResult r = t.run();
  EXPECT_EQ(r.steps, 150);
  EXPECT_LT(r.test.bits_per_byte(), 2.0);
  EXPECT_GT(r.test.accuracy, 0.5) << "next-byte accuracy";
  std::remove(path.c_str());
}

TEST(Trainer, MissingTextFileNamesIt) {
  const RunConfig c = parse_config(
      "model: {kind: gpt, layers: 1, heads: 1, dim: 8, context: 8}\n"
      "data: {dataset: text, files: [/nonexistent/story.txt]}\n", "text.yaml");
  try {
    Trainer t(c, 0, 1, nullptr);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/story.txt"), std::string::npos) << e.what();
  }
}

// A diverging run stops at the next progress line with an error that names the loss, the steps
// it was taken over and what to do: the loss is summed where the model lies and read there.
TEST(Trainer, DivergingLossStopsTheRunNamingTheSteps) {
  RunConfig c = synthetic_config("{lr: 1000, momentum: 0.9, batch: 32, epochs: 2}");
  c.log_every = 20;
  Trainer t(c, 0, 1, nullptr);
  try {
    t.run();
    FAIL() << "the run went on with a diverged model";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("training loss became"), std::string::npos) << what;
    EXPECT_NE(what.find("in steps "), std::string::npos) << what;
    EXPECT_NE(what.find("..20 (lower the learning rate)"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace gossip::peer
