// gossip-consensus against live peer processes on 127.0.0.1.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <utility>

#include "kernels/backend.h"
#include "model/mlp.h"
#include "control/sketch.h"
#include "process_util.h"

namespace gossip {
namespace {

using testing::capture_all;
using testing::run_command;
using testing::TempDir;

// Starts gossip-launch on `yaml` in the background, waits for peer 0's endpoint, runs `tool_args`
// against it, then interrupts the run. Returns the tool's output (and the run's log after it).
testing::CommandResult with_live_run(const TempDir& dir, const std::string& yaml, const std::string& tool_args) {
  const std::string cfg = dir.write("run.yaml", yaml), log = dir.path() + "/run.log";
  const std::string script = dir.write("drive.sh",
      "#!/bin/sh\n" + testing::bin("gossip-launch") + " " + cfg + " > " + log + " 2>&1 &\n"
      "LP=$!\n"
      "for i in $(seq 200); do grep -a -q 'peer 0] bound' " + log + " && break; sleep 0.05; done\n"
      "EP=$(grep -a -m1 'peer 0] bound' " + log + " | sed 's/.*bound \\([^,]*\\),.*/\\1/')\n" +
      testing::bin("gossip-consensus") + " --peer \"$EP\" " + tool_args + "\n"
      "RC=$?\nkill -INT $LP\nwait $LP\necho '--- run log'\ncat " + log + "\nexit $RC\n");
  return run_command("sh " + script, 120);
}

std::string long_run(int n, const std::string& topology, const std::string& algorithm, const std::string& optimizer,
                     const std::string& extra = "") {
  return "seed: 5\ndevice: cpu\nlog_every: 10\n" + extra + "peers: {count: " + std::to_string(n) +
         ", host: 127.0.0.1, base_port: 0}\ntopology: " + topology + "\nalgorithm: " + algorithm +
         "\nmodel: {hidden: [32]}\n"
         "data: {dataset: synthetic, synthetic: {train: 4000, test: 200, dims: 32, classes: 4}}\n"
         "optimizer: " + optimizer + "\n";
}

// Peers whose parameters never move (learning rate 0, no mixing) hold known vectors: their
// per-rank initial models. The tool's exact figure must match a direct computation.
TEST(ConsensusTool, ExactFigureMatchesKnownParameters) {
  TempDir dir;
  const int n = 4;
  auto r = with_live_run(dir,
                         long_run(n, "ring", "{kind: local_sgd, global_average_every: 1000000}",
                                  "{lr: 0.0, momentum: 0.0, batch: 32, epochs: 100000}", "init: per_rank\n"),
                         "--format json --samples 2 --stride 3 --ahead 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The same initial models, made here: seed + 1000003·(rank + 1), as the trainer does.
  auto backend = kernels::make_cpu_backend();
  std::vector<std::vector<float>> x;
  for (int rank = 0; rank < n; ++rank) {
    model::Mlp m(*backend, {32, 32, 4}, 1);
    m.init(5 + 1000003ull * (rank + 1));
    x.push_back(m.download_params());
  }
  const peer::ConsensusFigures expect = peer::consensus_figures(x);
  auto xi = capture_all(r.output, R"("xi": ([-+0-9.e]+))");
  auto rel = capture_all(r.output, R"("relative": ([-+0-9.e]+))");
  ASSERT_EQ(xi.size(), 2u) << r.output;
  for (size_t i = 0; i < xi.size(); ++i) {
    EXPECT_NEAR(xi[i], expect.xi, 1e-6 * expect.xi);
    EXPECT_NEAR(rel[i], expect.relative(), 1e-6 * expect.relative());
  }
  auto d0 = capture_all(r.output, R"("distance": \[([-+0-9.e]+))");
  ASSERT_FALSE(d0.empty());
  EXPECT_NEAR(d0[0], expect.distance[0], 1e-6 * expect.distance[0]);
}

// On a running 8-peer ring with PGA (H = 4), the distance is exactly 0 at every 4th round.
TEST(ConsensusTool, RingWithPeriodicAverageDropsToZeroEveryHRounds) {
  TempDir dir;
  auto r = with_live_run(dir,
                         long_run(8, "ring", "{kind: gossip, global_average_every: 4}",
                                  "{lr: 0.05, momentum: 0.9, batch: 32, epochs: 100000}"),
                         "--watch --samples 12 --stride 1 --ahead 30 --format csv --plot " + dir.path() + "/plot.svg");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::regex row(R"((\d+),8,([-+0-9.e]+),([-+0-9.e]+),)");
  int rows = 0, zeros = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), row); it != std::sregex_iterator(); ++it) {
    const int round = std::stoi((*it)[1]);
    const double relative = std::stod((*it)[3]);
    ++rows;
    if (round % 4 == 0) {
      EXPECT_LT(relative, 1e-12) << "round " << round;
      ++zeros;
    } else {
      EXPECT_GT(relative, 1e-9) << "round " << round;
    }
  }
  EXPECT_EQ(rows, 12) << r.output;
  EXPECT_EQ(zeros, 3);
  std::ifstream svg(dir.path() + "/plot.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("<polyline"), std::string::npos) << "the plot was written";
}

TEST(ConsensusTool, SketchAgreesWithExactOnALiveRun) {
  TempDir dir;
  // Several rounds, exact and sketched, of the same frozen per-rank models.
  auto r = with_live_run(dir,
                         long_run(4, "ring", "{kind: local_sgd, global_average_every: 1000000}",
                                  "{lr: 0.0, momentum: 0.0, batch: 32, epochs: 100000}", "init: per_rank\n"),
                         "--format json --samples 1 --ahead 20 && " + testing::bin("gossip-consensus") +
                             " --peer \"$EP\" --format json --samples 1 --ahead 20 --sketch 256");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto xi = capture_all(r.output, R"("xi": ([-+0-9.e]+))");
  auto err = capture_all(r.output, R"("expected_error": ([-+0-9.e]+))");
  ASSERT_EQ(xi.size(), 2u) << r.output;
  ASSERT_EQ(err.size(), 1u);
  EXPECT_NEAR(xi[1], xi[0], 4 * err[0] * xi[0]) << "within four stated standard errors";
}

TEST(ConsensusTool, DeadEndpointIsAClearError) {
  auto r = run_command(testing::bin("gossip-consensus") + " --peer tcp://127.0.0.1:1 --timeout 0.5", 20);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("tcp://127.0.0.1:1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no answer"), std::string::npos) << r.output;
}

// Flags and endpoints that cannot work are named before any peer is asked: with --timeout 30 and
// no peer at the endpoint, an answer within 15 s cannot have come from asking one.
TEST(ConsensusTool, BadFlagsAndEndpointsAreNamedAtOnce) {
  const std::pair<const char*, const char*> cases[] = {
      {"--peer tcp://127.0.0.1:1 --stride 0", "--stride must be >= 1"},
      {"--peer tcp://127.0.0.1:1 --samples -1", "--samples must be >= 0"},
      {"--peer tcp://127.0.0.1:1 --ahead -2", "--ahead must be >= 0"},
      {"--peer foo", "foo: cannot ask this peer: the endpoint must start with tcp://, ipc:// or inproc://"},
      {"--peer tcp://127.0.0.1:99999", "has port '99999' (expected a number in 0..65535)"},
  };
  for (const auto& [flags, says] : cases) {
    const auto started = std::chrono::steady_clock::now();
    auto r = run_command(testing::bin("gossip-consensus") + " " + flags + " --timeout 30", 40);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << flags << "\n" << r.output;
    EXPECT_LT(s, 15) << flags << ": answered after " << s << " s, so after asking a peer";
  }
}

}  // namespace
}  // namespace gossip
