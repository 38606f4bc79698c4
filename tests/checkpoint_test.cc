// Checkpoints: the file format (round trip, truncation, damage, how many are kept) and, with real
// gossip-peer processes killed by SIGKILL at random moments, that --resume continues exactly where
// the run stopped: the final model is bit-identical to an uninterrupted run's.
#include "peer/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "process_util.h"

namespace gossip::peer {
namespace {

using testing::capture_all;
using testing::run_command;
using testing::TempDir;

Checkpoint sample(int64_t step, uint32_t epoch = 0) {
  Checkpoint c;
  c.step = step;
  c.epoch = epoch;
  c.rank = epoch ? 0 : 1;  // after a view change, member 1 may be rank 0
  c.peers = epoch ? 3 : 4;
  for (int i = 0; i < 1000; ++i) {
    c.params.push_back(0.001f * i + step);
    c.optimizer_state.push_back(-0.5f * i);
  }
  c.extra = {1.0f, 2.0f};
  return c;
}

TEST(Checkpoint, RoundTripsEveryField) {
  TempDir dir;
  const Checkpoint c = sample(7, 3);
  write_checkpoint(dir.path(), 1, c);
  std::string problem;
  std::optional<Checkpoint> back = read_checkpoint(checkpoint_path(dir.path(), 1, 7, 3), &problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->epoch, 3u);
  EXPECT_EQ(back->rank, 0);
  EXPECT_EQ(back->peers, 3);
  EXPECT_EQ(back->params, c.params);
  EXPECT_EQ(back->optimizer_state, c.optimizer_state);
  EXPECT_EQ(back->extra, c.extra);
}

TEST(Checkpoint, KeepsTheNewestTwoAndLeavesNoTemporaryFile) {
  TempDir dir;
  for (int64_t s : {10, 20, 30, 40}) write_checkpoint(dir.path(), 1, sample(s));
  EXPECT_EQ(list_checkpoints(dir.path(), 1), (std::vector<int64_t>{40, 30}));
  EXPECT_TRUE(list_checkpoints(dir.path(), 0).empty());  // other ranks' files are separate
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().extension(), ".ckpt") << e.path();
}

// Member 1 became rank 0 of 3 at a view change: its later checkpoints are named by its id and
// epoch, kept apart (the newest two), and neither delete its resumable ones nor touch member 0's.
TEST(Checkpoint, AfterAViewChangeFilesAreNamedByIdAndKeptApart) {
  TempDir dir;
  write_checkpoint(dir.path(), 0, sample(20));
  for (int64_t s : {10, 20}) write_checkpoint(dir.path(), 1, sample(s));
  for (int64_t s : {30, 40, 50}) write_checkpoint(dir.path(), 1, sample(s, s < 50 ? 1 : 2));
  EXPECT_EQ(list_checkpoints(dir.path(), 1), (std::vector<int64_t>{20, 10}));
  EXPECT_EQ(list_later_checkpoints(dir.path(), 1), (std::vector<int64_t>{50, 40}));
  EXPECT_EQ(list_checkpoints(dir.path(), 0), (std::vector<int64_t>{20}));
  EXPECT_TRUE(list_later_checkpoints(dir.path(), 0).empty());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/peer-1.epoch-2.step-50.ckpt"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/peer-1.epoch-1.step-40.ckpt"));
  std::string problem;
  std::optional<Checkpoint> mine = read_checkpoint(checkpoint_path(dir.path(), 0, 20), &problem);
  ASSERT_TRUE(mine) << problem;
  EXPECT_EQ(mine->rank, 1);  // member 0's file still holds what it wrote
  std::optional<Checkpoint> resumable = newest_checkpoint(dir.path(), 1);
  ASSERT_TRUE(resumable);
  EXPECT_EQ(resumable->step, 20);
  EXPECT_EQ(resumable->epoch, 0u);
}

// A run resumed from step 10 writes step 15: the files of steps 20 and 30, left by the run it
// replaced, go (else, after a view change, they would outrank the new run's files and the new
// files would be the ones deleted).
TEST(Checkpoint, FilesOfAReplacedRunAreDeletedWhenTheResumedRunWrites) {
  TempDir dir;
  for (int64_t s : {10, 20, 30}) write_checkpoint(dir.path(), 1, sample(s));
  for (int64_t s : {40, 50}) write_checkpoint(dir.path(), 1, sample(s, 1));
  write_checkpoint(dir.path(), 1, sample(15));
  EXPECT_EQ(list_checkpoints(dir.path(), 1), (std::vector<int64_t>{15}));  // 10 went when 30 was written
  write_checkpoint(dir.path(), 1, sample(35, 1));
  EXPECT_EQ(list_later_checkpoints(dir.path(), 1), (std::vector<int64_t>{35}));
  write_checkpoint(dir.path(), 1, sample(45, 1));
  EXPECT_EQ(list_later_checkpoints(dir.path(), 1), (std::vector<int64_t>{45, 35}));
  EXPECT_EQ(list_checkpoints(dir.path(), 1), (std::vector<int64_t>{15}));
}

// checkpoint.dir is made (or found unusable) at start-up, naming it.
TEST(Checkpoint, TheDirectoryIsMadeOrRefusedUpFront) {
  TempDir dir;
  prepare_checkpoint_dir(dir.path() + "/a/b");
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/a/b"));
  const std::string file = dir.write("plain", "x");
  for (const std::string& bad : {std::string("/proc/nope"), file + "/ckpt"}) {
    try {
      prepare_checkpoint_dir(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad + ": cannot create the checkpoint directory"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Checkpoint, TruncatedOrDamagedFilesAreRefusedAndTheOlderOneIsUsed) {
  TempDir dir;
  write_checkpoint(dir.path(), 1, sample(10));
  write_checkpoint(dir.path(), 1, sample(20));
  const std::string newest = checkpoint_path(dir.path(), 1, 20);
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) - 100);
  std::string problem;
  EXPECT_FALSE(read_checkpoint(newest, &problem));
  EXPECT_NE(problem.find("truncated"), std::string::npos) << problem;
  std::optional<Checkpoint> c = newest_checkpoint(dir.path(), 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 10);

  write_checkpoint(dir.path(), 1, sample(30));  // now flip one byte in the middle of the newest
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

// The final models of an uninterrupted run of three ring peers, 30 epochs, checkpointing every 5
// steps into dir/a: what the process tests of three peers must end with.
std::vector<std::string> three_peer_reference(const TempDir& dir) {
  std::vector<std::string> crcs;
  uninterrupted(testing::bin("gossip-launch") + " " + dir.write("straight.yaml", yaml(3, dir.path() + "/a", 5, 30)), 3, &crcs);
  return crcs;
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
    // The first kill comes early, so at least one lands even when the reference run was slowed
    // down by other load (then every random delay could outlast a whole run).
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%.3f", attempt ? delay(rng) : delay.a());
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

// Starts the three ring peers of `config` (checkpoints in `ckpt_dir`) as separate processes, each
// logging to DIR/peer-R.log, with `flags` added; waits until every one has written a checkpoint.
bool start_three_until_each_checkpointed(const TempDir& dir, const std::string& config, const std::string& ckpt_dir,
                                         const std::string& flags = "") {
  std::filesystem::create_directories(dir.path() + "/rv");
  std::string group;
  for (int r = 0; r < 3; ++r)
    group += testing::bin("gossip-peer") + " --config " + config + " --rank " + std::to_string(r) + flags +
             " --rendezvous " + dir.path() + "/rv > " + dir.path() + "/peer-" + std::to_string(r) + ".log 2>&1 & ";
  if (std::system(group.c_str()) != 0) return false;
  for (int i = 0; i < 600; ++i, ::usleep(20000)) {
    bool all = true;
    for (int r = 0; r < 3; ++r) all &= !list_checkpoints(ckpt_dir, r).empty();
    if (all) return true;
  }
  return false;
}

// Three ring peers SIGKILLed together (each may have got one checkpoint further than another),
// then relaunched with --resume: they agree on the newest step all of them have and finish with
// exactly the models of an uninterrupted run.
TEST(CheckpointProcess, GroupKilledTogetherResumesFromTheNewestCommonStep) {
  TempDir dir;
  const std::vector<std::string> want = three_peer_reference(dir);
  if (HasFailure()) return;

  const std::string killed = dir.write("killed.yaml", yaml(3, dir.path() + "/b", 5, 30));
  // Once every peer has written a checkpoint, SIGKILL all of them a random moment later.
  const bool all = start_three_until_each_checkpointed(dir, killed, dir.path() + "/b");
  std::mt19937 rng(std::random_device{}());
  ::usleep(std::uniform_int_distribution<int>(0, 300000)(rng));
  run_command("pkill -KILL -f '[g]ossip-peer --config " + killed + "'", 10);
  ASSERT_TRUE(all) << testing::read_file(dir.path() + "/peer-0.log");
  for (int i = 0; i < 100 && !run_command("pgrep -f '[g]ossip-peer --config " + killed + "'", 10).output.empty(); ++i)
    ::usleep(50000);
  ASSERT_EQ(capture_all(testing::read_file(dir.path() + "/peer-0.log"), R"(final: peer (\d+))").size(), 0u)
      << "the run ended before the kill";

  // As if the peer furthest on had been killed inside its latest write: the others must step
  // back with it. (Only the furthest can have been: ring gossip lets no peer finish more than a
  // step or two beyond its neighbours, so none could have written a later checkpoint meanwhile.)
  int furthest = 0;
  for (int r = 1; r < 3; ++r)
    if (list_checkpoints(dir.path() + "/b", r)[0] >= list_checkpoints(dir.path() + "/b", furthest)[0]) furthest = r;
  const std::vector<int64_t> own = list_checkpoints(dir.path() + "/b", furthest);
  if (own.size() == 2) std::filesystem::remove(checkpoint_path(dir.path() + "/b", furthest, own[0]));
  std::string newest = "newest checkpoints (peer " + std::to_string(furthest) + "'s newest removed):";
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

// Peer 0 crashes; peers 1 and 2 carry on as ranks 0 and 1 of a new membership and write
// checkpoints there until they finish. Peer 0's files are still its own, and --resume restarts
// the YAML's membership from the newest step all three wrote before the change, ending with
// exactly the models of an uninterrupted run.
TEST(CheckpointProcess, AfterACrashAndAViewChangeTheRunStillResumes) {
  TempDir dir;
  const std::vector<std::string> want = three_peer_reference(dir);
  if (HasFailure()) return;

  const std::string b = dir.path() + "/b", crashed = dir.write("crashed.yaml", yaml(3, b, 5, 30));
  // Paced (3 ms a step), so the crash comes early in the run.
  const bool all = start_three_until_each_checkpointed(dir, crashed, b, " --min-step-ms 3");
  run_command("pkill -KILL -f '[g]ossip-peer --config " + crashed + " --rank 0 '", 10);
  ASSERT_TRUE(all) << testing::read_file(dir.path() + "/peer-0.log");
  for (int i = 0; i < 600 && !run_command("pgrep -f '[g]ossip-peer --config " + crashed + "'", 10).output.empty(); ++i)
    ::usleep(100000);
  const std::string survivor = testing::read_file(dir.path() + "/peer-1.log");
  ASSERT_NE(survivor.find("final: peer 1"), std::string::npos) << survivor;

  std::string problem;
  for (int id : {1, 2}) {
    const std::vector<int64_t> later = list_later_checkpoints(b, id);
    ASSERT_FALSE(later.empty()) << survivor;
    const std::optional<Checkpoint> c = read_checkpoint(checkpoint_path(b, id, later[0], 1), &problem);
    ASSERT_TRUE(c) << problem;
    EXPECT_EQ(c->rank, id - 1);
    EXPECT_EQ(c->peers, 2);
  }
  int64_t common = 1 << 30;
  for (int id : {0, 1, 2}) {
    const std::optional<Checkpoint> c = newest_checkpoint(b, id);
    ASSERT_TRUE(c) << "member " << id << "'s checkpoints of the YAML's membership are gone";
    EXPECT_EQ(c->rank, id);
    EXPECT_EQ(c->epoch, 0u);
    common = std::min(common, c->step);
  }
  const testing::CommandResult resumed = run_command(testing::bin("gossip-launch") + " --resume " + crashed, 150);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(capture_all(resumed.output, R"(resumed from \S+ at step (\d+))"), std::vector<double>(3, double(common)))
      << resumed.output;
  EXPECT_EQ(capture_all(resumed.output, R"(checkpoints up to step (\d+) were written after the membership changed)").size(), 2u) << resumed.output;
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

// Peer 2 holds only the older of the two newest steps and peer 0 only the newer: they agree on
// the older, which peer 0 no longer has, and it says so, naming its file.
TEST(CheckpointProcess, ResumeWithoutTheCommonStepNamesTheMissingFile) {
  TempDir dir;
  const std::string d = dir.path() + "/c", y = dir.write("run.yaml", yaml(3, d, 5, 5));
  std::vector<std::string> want;
  uninterrupted(testing::bin("gossip-launch") + " " + y, 3, &want);
  if (HasFailure()) return;
  const std::vector<int64_t> steps = list_checkpoints(d, 0);
  ASSERT_EQ(steps.size(), 2u);
  std::filesystem::remove(checkpoint_path(d, 0, steps[1]));
  std::filesystem::remove(checkpoint_path(d, 2, steps[0]));
  const testing::CommandResult r = run_command(testing::bin("gossip-launch") + " --resume " + y, 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(checkpoint_path(d, 0, steps[1]) + ": the peers' newest common checkpoint is step " +
                          std::to_string(steps[1]) + ", but this peer's file of that step cannot be used: cannot "
                          "open it: No such file or directory"),
            std::string::npos)
      << r.output;
}

TEST(CheckpointProcess, ResumeWithoutCheckpointsIsAClearError) {
  TempDir dir;
  const std::string y = dir.write("run.yaml", yaml(1, dir.path() + "/none", 10, 1));
  const testing::CommandResult r = run_command(testing::bin("gossip-peer") + " --config " + y + " --resume", 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no intact checkpoint in " + dir.path() + "/none"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gossip::peer
