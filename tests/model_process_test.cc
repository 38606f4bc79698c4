// The CNN and the GPT in multi-process runs: elastic join and a crash, checkpoint + --resume
// (bit-exact) and gossip-consensus, as the MLP's tests do. Small shapes keep them quick: the CNN
// reads synthetic rows as 8×8 images, the GPT a generated text file.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "control/sketch.h"
#include "kernels/backend.h"
#include "model/presets.h"
#include "peer/checkpoint.h"
#include "process_util.h"

namespace gossip {
namespace {

using testing::capture_all;
using testing::run_command;
using testing::crcs_in;
using testing::TempDir;

// ~60 KB of word salad over a 40-word vocabulary: learnable, so bits per byte fall well below 8.
std::string word_salad() {
  static const char* words[] = {"the", "peer", "gossip", "model", "ring", "average", "of", "and", "weights",
                                "train", "sends", "its", "to", "a", "neighbour", "round", "graph", "step",
                                "loss", "falls", "mixing", "every", "one", "two", "four", "eight", "slow",
                                "fast", "joins", "leaves", "crash", "view", "epoch", "byte", "text", "window",
                                "head", "layer", "norm", "token"};
  std::mt19937_64 rng(42);
  std::string text;
  while (text.size() < 60000) {
    text += words[rng() % 40];
    text += rng() % 9 == 0 ? ".\n" : " ";
  }
  return text;
}

// A run's YAML for `kind` "cnn" or "gpt" (files written into `dir`).
// `frozen`: learning rate 0, so every model stays as initialised.
std::string yaml(const TempDir& dir, const std::string& kind, int n, const std::string& algorithm, int steps,
                 const std::string& extra = "", bool frozen = false) {
  std::string y = "seed: 7\ndevice: cpu\nthreads: 1\nlog_every: 20\n" + extra + "peers: {count: " + std::to_string(n) +
                  ", host: 127.0.0.1, base_port: 0}\ntopology: ring\nalgorithm: " + algorithm + "\n";
  if (kind == "cnn") {
    y += "model: {kind: cnn, net: lenet}\n"
         "data: {dataset: synthetic, synthetic: {train: 4000, test: 400, dims: 64, classes: 4, noise: 2}}\n"
         "optimizer: {lr: " + std::string(frozen ? "0" : "0.02") + ", momentum: 0.9, batch: 16, steps: " +
         std::to_string(steps) + "}\n";
  } else {
    const std::string text = dir.write("salad.txt", word_salad());
    y += "model: {kind: gpt, layers: 1, heads: 2, dim: 16, context: 16}\n"
         "data: {dataset: text, files: [" + text + "]}\n"
         "optimizer: {kind: adamw, lr: " + std::string(frozen ? "0" : "0.01") + ", batch: 8, clip_norm: 1, steps: " +
         std::to_string(steps) + "}\n";
  }
  return y;
}

std::string wait_for_end(const std::string& log, int limit_s) {
  return testing::wait_for_text(log, "peers succeeded", limit_s);
}

class ModelProcess : public ::testing::TestWithParam<std::string> {};

// 4 ring peers (paced at 60 ms a step, so the run is still going when the joiner's process is up
// and lasts ~18 s on any build: --slowdown 20 multiplied ASan's compute and every preemption to
// over 200 s on two busy cores); one joins, then one is SIGKILLed: the 3 survivors and the
// joiner end with one averaged model, which has
// learned (CNN: accuracy over chance; GPT: well under 8 bits per byte).
TEST_P(ModelProcess, JoinThenCrash) {
  TempDir dir;
  const std::string y = dir.write("run.yaml", yaml(dir, GetParam(), 4, "{kind: gossip, dead_after_s: 2}", 300));
  testing::BackgroundRun run(y, dir.path() + "/run.log", "--min-step-ms 60");
  const std::string contact = run.peer0_endpoint();
  ASSERT_FALSE(contact.empty()) << run.log();
  testing::wait_for_text(dir.path() + "/run.log", "step 20/", 60);
  // The timeout only guards against a hung joiner (one killed at 120 s once left its final line
  // unwritten, when this run was stretched by a multiple of its steps' time).
  ASSERT_EQ(std::system(("timeout -s KILL 280 " + testing::bin("gossip-peer") + " --config " + y + " --join " + contact +
                         " > " + dir.path() + "/join.log 2>&1 &").c_str()),
            0);
  const std::string joined = testing::wait_for_text(dir.path() + "/join.log", "joined as peer", 60);
  ASSERT_NE(joined.find("joined as peer"), std::string::npos) << joined << run.log();
  run_command("pkill -KILL -f '[g]ossip-peer --config " + y + " --rank 2 '", 10);
  const std::string out = wait_for_end(dir.path() + "/run.log", 220);
  const std::string j = testing::wait_for_text(dir.path() + "/join.log", "final:", 60);
  ASSERT_NE(out.find("3 of 4 peers succeeded"), std::string::npos) << out << j;
  EXPECT_NE(out.find("5 members (gone: none, joined: 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("4 members (gone: 2,"), std::string::npos) << out;
  EXPECT_EQ(crcs_in(out + j).size(), 1u) << "survivors and joiner hold one model\n" << out << j;
  if (GetParam() == "cnn") {
    const std::vector<double> acc = capture_all(out + j, R"(averaged_model_test_acc ([0-9.]+))");
    ASSERT_EQ(acc.size(), 4u) << out << j;
    for (double a : acc) EXPECT_GT(a, 0.5) << "4 classes: chance is 0.25";
  } else {
    const std::vector<double> bpb = capture_all(out + j, R"(averaged_model_test_bpb ([0-9.]+))");
    ASSERT_EQ(bpb.size(), 4u) << out << j;
    for (double b : bpb) EXPECT_LT(b, 4.0) << "uniform bytes are 8 bits";
  }
}

// Two ring peers checkpointing every 10 steps are SIGKILLed once both have a checkpoint, then
// resumed: they finish with exactly the models of a run that was never interrupted.
TEST_P(ModelProcess, KilledRunResumesBitExactly) {
  TempDir dir;
  auto config = [&](const std::string& name) {
    return dir.write(name + ".yaml", yaml(dir, GetParam(), 2, "{kind: gossip}", 120,
                                          "checkpoint: {dir: " + dir.path() + "/" + name + ", every: 10}\n"));
  };
  const testing::CommandResult ref = run_command(testing::bin("gossip-launch") + " " + config("straight"), 150);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const std::set<std::string> want = crcs_in(ref.output);

  const std::string killed = config("killed");
  testing::BackgroundRun run(killed, dir.path() + "/run.log", "--slowdown 10");
  bool both = false;
  for (int i = 0; i < 3000 && !both; ++i) {  // up to 60 s: a loaded machine (sanitizers, other jobs) is slow
    both = !peer::list_checkpoints(dir.path() + "/killed", 0).empty() &&
           !peer::list_checkpoints(dir.path() + "/killed", 1).empty();
    ::usleep(20000);
  }
  run_command("pkill -KILL -f '[g]ossip-peer --config " + killed + " '", 10);
  ASSERT_TRUE(both) << run.log();
  run.stop();
  ASSERT_EQ(run.log().find("final:"), std::string::npos) << "the run ended before the kill\n" << run.log();
  const testing::CommandResult resumed = run_command(testing::bin("gossip-launch") + " --resume " + killed, 150);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(capture_all(resumed.output, R"(resumed from \S+ at step (\d+))").size(), 2u) << resumed.output;
  EXPECT_EQ(crcs_in(resumed.output), want) << ref.output << resumed.output;
}

// Frozen per-rank models (lr 0, no mixing): gossip-consensus's exact figure matches the distance
// of the same initial models built here.
TEST_P(ModelProcess, ConsensusToolSeesTheModels) {
  TempDir dir;
  const int n = 3;
  const std::string cfg = dir.write("run.yaml", yaml(dir, GetParam(), n, "{kind: local_sgd, global_average_every: 1000000}",
                                                     1000000, "init: per_rank\n", true));
  const std::string log = dir.path() + "/run.log";
  testing::BackgroundRun run(cfg, log);
  const std::string ep = run.peer0_endpoint();
  ASSERT_FALSE(ep.empty()) << run.log();
  const testing::CommandResult r =
      run_command(testing::bin("gossip-consensus") + " --peer " + ep + " --format json --samples 1 --ahead 20", 60);
  ASSERT_EQ(r.exit_code, 0) << r.output << run.log();

  model::ModelConfig m;
  m.kind = GetParam() == "cnn" ? model::ModelKind::kCnn : model::ModelKind::kGpt;
  if (m.kind == model::ModelKind::kGpt) {
    m.layers = 1;
    m.heads = 2;
    m.dim = 16;
    m.context = 16;
  }
  auto backend = kernels::make_cpu_backend();
  std::vector<std::vector<float>> x;
  for (int rank = 0; rank < n; ++rank) {
    auto model = model::make_model(m, *backend, {1, 8, 8, 4}, 1);
    model->init(7 + 1000003ull * (rank + 1));  // the trainer's per-rank seed
    x.push_back(model->download_params());
  }
  const peer::ConsensusFigures expect = peer::consensus_figures(x);
  const std::vector<double> xi = capture_all(r.output, R"("xi": ([-+0-9.e]+))");
  ASSERT_EQ(xi.size(), 1u) << r.output;
  EXPECT_NEAR(xi[0], expect.xi, 1e-6 * expect.xi);
}

INSTANTIATE_TEST_SUITE_P(CnnAndGpt, ModelProcess, ::testing::Values("cnn", "gpt"));

}  // namespace
}  // namespace gossip
