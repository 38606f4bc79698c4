// Checkpoints: the file format (round trip, truncation, damage, how many are kept) and, with real
// gossip-peer processes killed by SIGKILL at random moments, that --resume continues exactly where
// the run stopped: the final model is bit-identical to an uninterrupted run's.
#include "peer/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "process_util.h"

namespace gossip::peer {
namespace {

using testing::capture_all;
using testing::run_command;
using testing::TempDir;

Checkpoint sample(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.epoch = 3;
  c.rank = 1;
  c.peers = 4;
  for (int i = 0; i < 1000; ++i) {
    c.params.push_back(0.001f * i + step);
    c.optimizer_state.push_back(-0.5f * i);
  }
  c.extra = {1.0f, 2.0f};
  return c;
}

TEST(Checkpoint, RoundTripsEveryField) {
  TempDir dir;
  const Checkpoint c = sample(7);
  write_checkpoint(dir.path(), c);
  std::string problem;
  std::optional<Checkpoint> back = read_checkpoint(checkpoint_path(dir.path(), 1, 7), &problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->epoch, 3u);
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->peers, 4);
  EXPECT_EQ(back->params, c.params);
  EXPECT_EQ(back->optimizer_state, c.optimizer_state);
  EXPECT_EQ(back->extra, c.extra);
}

TEST(Checkpoint, KeepsTheNewestTwoAndLeavesNoTemporaryFile) {
  TempDir dir;
  for (int64_t s : {10, 20, 30, 40}) write_checkpoint(dir.path(), sample(s));
  EXPECT_EQ(list_checkpoints(dir.path(), 1), (std::vector<int64_t>{40, 30}));
  EXPECT_TRUE(list_checkpoints(dir.path(), 0).empty());  // other ranks' files are separate
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().extension(), ".ckpt") << e.path();
}

TEST(Checkpoint, TruncatedOrDamagedFilesAreRefusedAndTheOlderOneIsUsed) {
  TempDir dir;
  write_checkpoint(dir.path(), sample(10));
  write_checkpoint(dir.path(), sample(20));
  const std::string newest = checkpoint_path(dir.path(), 1, 20);
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) - 100);
  std::string problem;
  EXPECT_FALSE(read_checkpoint(newest, &problem));
  EXPECT_NE(problem.find("truncated"), std::string::npos) << problem;
  std::optional<Checkpoint> c = newest_checkpoint(dir.path(), 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 10);

  write_checkpoint(dir.path(), sample(30));  // now flip one byte in the middle of the newest
  const std::string path = checkpoint_path(dir.path(), 1, 30);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2000);
    f.put('\x7f');
  }
  EXPECT_FALSE(read_checkpoint(path, &problem));
  EXPECT_NE(problem.find("checksum"), std::string::npos) << problem;
  EXPECT_FALSE(read_checkpoint(dir.path() + "/missing.ckpt", &problem));
  std::ofstream(dir.path() + "/junk.ckpt") << "hello";
  EXPECT_FALSE(read_checkpoint(dir.path() + "/junk.ckpt", &problem));
}

std::string yaml(int n, const std::string& ckpt_dir, int every, int epochs) {
  return "seed: 5\ndevice: cpu\nthreads: 1\nlog_every: 50\n"
         "peers: {count: " + std::to_string(n) + ", host: 127.0.0.1, base_port: 0}\n"
         "topology: ring\nalgorithm: {kind: " + std::string(n > 1 ? "gossip" : "none") + "}\n"
         "model: {hidden: [32]}\n"
         "data: {dataset: synthetic, synthetic: {train: 4000, test: 500, dims: 32, classes: 4}}\n"
         "optimizer: {lr: 0.05, momentum: 0.9, batch: 32, epochs: " + std::to_string(epochs) + "}\n"
         "checkpoint: {dir: " + ckpt_dir + ", every: " + std::to_string(every) + "}\n";
}

std::vector<std::string> final_crcs(const std::string& out) {
  std::vector<std::string> crcs;
  std::regex re(R"(final: peer (\d+) .* params_crc ([0-9a-f]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    crcs.push_back((*it)[1].str() + ":" + (*it)[2].str());
  std::sort(crcs.begin(), crcs.end());
  return crcs;
}

// The final models of an uninterrupted run of `command` (which must finish, with `peers` peers).
testing::CommandResult uninterrupted(const std::string& command, size_t peers, std::vector<std::string>* crcs) {
  const testing::CommandResult ref = run_command(command, 150);
  EXPECT_EQ(ref.exit_code, 0) << ref.output;
  *crcs = final_crcs(ref.output);
  EXPECT_EQ(crcs->size(), peers) << ref.output;
  return ref;
}

// One peer checkpointing every step, SIGKILLed at random moments (many kills land inside a write)
// and resumed each time until it finishes: same final model as a run that was never killed.
TEST(CheckpointProcess, KilledAtRandomMomentsResumesToTheSameModel) {
  TempDir dir;
  const std::string straight = dir.write("straight.yaml", yaml(1, dir.path() + "/a", 1, 30));
  std::vector<std::string> want;
  const testing::CommandResult ref = uninterrupted(testing::bin("gossip-peer") + " --config " + straight, 1, &want);
  if (HasFailure()) return;

  const std::string killed = dir.write("killed.yaml", yaml(1, dir.path() + "/b", 1, 30));
  // Kill points scale with this machine's speed (sanitizer builds are several times slower).
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> delay(0.1 + 0.1 * ref.seconds, 0.1 + 0.4 * ref.seconds);
  testing::CommandResult last;
  int kills = 0;
  for (int attempt = 0; attempt < 60; ++attempt) {
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%.3f", delay(rng));
    const bool resume = !list_checkpoints(dir.path() + "/b", 0).empty();
    last = run_command(std::string("timeout -s KILL ") + limit + " " + testing::bin("gossip-peer") + " --config " +
                           killed + (resume ? " --resume" : ""),
                       60);
    if (last.exit_code == 0) break;
    ASSERT_EQ(last.exit_code, 137) << last.output;  // killed, not failed
    ++kills;
  }
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_GE(kills, 1);
  std::printf("killed %d times before it finished\n", kills);
  EXPECT_EQ(final_crcs(last.output), want) << last.output;
}

// Three ring peers SIGKILLed together (each may have got one checkpoint further than another),
// then relaunched with --resume: they agree on the newest step all of them have and finish with
// exactly the models of an uninterrupted run.
TEST(CheckpointProcess, GroupKilledTogetherResumesFromTheNewestCommonStep) {
  TempDir dir;
  const std::string straight = dir.write("straight.yaml", yaml(3, dir.path() + "/a", 5, 30));
  std::vector<std::string> want;
  uninterrupted(testing::bin("gossip-launch") + " " + straight, 3, &want);
  if (HasFailure()) return;

  const std::string killed = dir.write("killed.yaml", yaml(3, dir.path() + "/b", 5, 30));
  std::filesystem::create_directories(dir.path() + "/rv");
  std::string group;
  for (int r = 0; r < 3; ++r)
    group += testing::bin("gossip-peer") + " --config " + killed + " --rank " + std::to_string(r) + " --rendezvous " +
             dir.path() + "/rv > " + dir.path() + "/cut-" + std::to_string(r) + ".log 2>&1 & ";
  ASSERT_EQ(std::system(group.c_str()), 0);
  // Once every peer has written a checkpoint, SIGKILL all of them a random moment later.
  bool all = false;
  for (int i = 0; i < 600 && !all; ++i) {
    all = true;
    for (int r = 0; r < 3; ++r) all &= !list_checkpoints(dir.path() + "/b", r).empty();
    ::usleep(20000);
  }
  std::mt19937 rng(std::random_device{}());
  ::usleep(std::uniform_int_distribution<int>(0, 300000)(rng));
  run_command("pkill -KILL -f '[g]ossip-peer --config " + killed + "'", 10);
  ASSERT_TRUE(all) << testing::read_file(dir.path() + "/cut-0.log");
  for (int i = 0; i < 100 && !run_command("pgrep -f '[g]ossip-peer --config " + killed + "'", 10).output.empty(); ++i)
    ::usleep(50000);
  ASSERT_EQ(capture_all(testing::read_file(dir.path() + "/cut-0.log"), R"(final: peer (\d+))").size(), 0u)
      << "the run ended before the kill";

  // As if peer 2 had been killed inside its latest write: the others must step back with it.
  const std::vector<int64_t> p2 = list_checkpoints(dir.path() + "/b", 2);
  if (p2.size() == 2) std::filesystem::remove(checkpoint_path(dir.path() + "/b", 2, p2[0]));
  std::string newest = "newest checkpoints (peer 2's newest removed):";
  int64_t common = 1 << 30;
  for (int r = 0; r < 3; ++r) {
    newest += " " + std::to_string(list_checkpoints(dir.path() + "/b", r)[0]);
    common = std::min(common, list_checkpoints(dir.path() + "/b", r)[0]);
  }
  const testing::CommandResult resumed = run_command(testing::bin("gossip-launch") + " --resume " + killed, 150);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::vector<double> at = capture_all(resumed.output, R"(resumed from \S+ at step (\d+))");
  ASSERT_EQ(at.size(), 3u) << resumed.output;
  EXPECT_TRUE(at[0] == at[1] && at[1] == at[2]) << resumed.output;
  EXPECT_EQ(at[0], double(common)) << resumed.output;
  std::printf("%s; all resumed at step %g\n", newest.c_str(), at[0]);
  EXPECT_EQ(final_crcs(resumed.output), want) << resumed.output;
}

// DiLoCo's outer state (x_start and the outer momentum) is in the checkpoint: a run resumed from
// its last checkpoint, taken between two outer steps, ends with the uninterrupted run's models.
TEST(CheckpointProcess, DilocoResumesWithItsOuterState) {
  TempDir dir;
  std::string text = yaml(3, dir.path() + "/d", 7, 2);
  text.replace(text.find("{kind: gossip}"), std::string("{kind: gossip}").size(), "{kind: diloco, inner_steps: 4}");
  const std::string cfg = dir.write("diloco.yaml", text);
  std::vector<std::string> want;
  uninterrupted(testing::bin("gossip-launch") + " " + cfg, 3, &want);
  if (HasFailure()) return;
  const std::vector<int64_t> steps = list_checkpoints(dir.path() + "/d", 0);
  ASSERT_FALSE(steps.empty());
  ASSERT_NE(steps[0] % 4, 0) << "the newest checkpoint must fall between two outer steps";
  const testing::CommandResult resumed = run_command(testing::bin("gossip-launch") + " --resume " + cfg, 150);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(final_crcs(resumed.output), want) << resumed.output;
}

// Algorithm state in the checkpoint — CHOCO's public copies (x̂ and s), the gradient tracker
// (its mixed value and the last gradient), quasi-global momentum (m̂, x_last, lr_last): a run
// resumed from its last checkpoint ends with the uninterrupted run's models, bit for bit.
struct StateCase {
  const char* algorithm;
  const char* optimizer_fields;  // added to the optimizer's
};
class AlgorithmStateResume : public ::testing::TestWithParam<StateCase> {};

TEST_P(AlgorithmStateResume, EndsWithTheUninterruptedModels) {
  TempDir dir;
  std::string text = yaml(3, dir.path() + "/c", 7, 2);
  text.replace(text.find("{kind: gossip}"), std::string("{kind: gossip}").size(), GetParam().algorithm);
  text.replace(text.find("optimizer: {"), std::string("optimizer: {").size(),
               std::string("optimizer: {") + GetParam().optimizer_fields);
  const std::string cfg = dir.write("run.yaml", text);
  std::vector<std::string> want;
  uninterrupted(testing::bin("gossip-launch") + " " + cfg, 3, &want);
  if (HasFailure()) return;
  const testing::CommandResult resumed = run_command(testing::bin("gossip-launch") + " --resume " + cfg, 150);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(final_crcs(resumed.output), want) << resumed.output;
}

const StateCase kStateCases[] = {{"{kind: choco, compressor: top_k, ratio: 0.1}", ""},
                                  {"{kind: gossip, gradient_tracking: true}", ""},
                                  {"{kind: gossip}", "quasi_global_momentum: true, "}};
std::string state_case_name(const ::testing::TestParamInfo<StateCase>& info) {
  const char* names[] = {"Choco", "GradientTracking", "QuasiGlobalMomentum"};
  return names[info.index];
}
INSTANTIATE_TEST_SUITE_P(Algorithms, AlgorithmStateResume, ::testing::ValuesIn(kStateCases), state_case_name);

TEST(CheckpointProcess, ResumeWithoutCheckpointsIsAClearError) {
  TempDir dir;
  const std::string y = dir.write("run.yaml", yaml(1, dir.path() + "/none", 10, 1));
  const testing::CommandResult r = run_command(testing::bin("gossip-peer") + " --config " + y + " --resume", 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no intact checkpoint in " + dir.path() + "/none"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gossip::peer
