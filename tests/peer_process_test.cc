// Multi-process integration tests: real gossip-peer processes on 127.0.0.1 (port 0 and a
// rendezvous directory), started by gossip-launch, for every algorithm.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sys/stat.h>

#include "kernels/backend.h"
#include "model/mlp.h"
#include "process_util.h"
#include "topology/analysis.h"

namespace gossip {
namespace {

using testing::capture_all;
using testing::run_command;
using testing::TempDir;

std::string config(int n, const std::string& topology, const std::string& algorithm, const std::string& extra = "",
                   const std::string& optimizer = "{lr: 0.05, momentum: 0.9, batch: 32, epochs: 2}") {
  return "seed: 3\ndevice: cpu\nlog_every: 20\n"
         "peers: {count: " + std::to_string(n) + ", host: 127.0.0.1, base_port: 0}\n"
         "topology: " + topology + "\nalgorithm: " + algorithm + "\n"
         "model: {hidden: [32]}\n"
         "data: {dataset: synthetic, synthetic: {train: 4000, test: 1000, dims: 32, classes: 4}}\n"
         "optimizer: " + optimizer + "\n" + extra;
}

testing::CommandResult launch(const TempDir& dir, const std::string& yaml, int limit_s = 150) {
  return run_command(testing::bin("gossip-launch") + " " + dir.write("run.yaml", yaml), limit_s);
}

// The most any peer reports having sent (MB), 0 when no line says.
double sent(const testing::CommandResult& r) {
  const std::vector<double> mb = capture_all(r.output, R"(sent_MB ([0-9.]+))");
  return mb.empty() ? 0.0 : *std::max_element(mb.begin(), mb.end());
}

// Every peer finished and both its own and the averaged model reach `bar`.
void expect_all_trained(const testing::CommandResult& r, int n, double bar) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto own = capture_all(r.output, R"(final: peer \d+ test_acc ([0-9.]+))");
  auto avg = capture_all(r.output, R"(averaged_model_test_acc ([0-9.]+))");
  ASSERT_EQ(own.size(), size_t(n)) << r.output;
  ASSERT_EQ(avg.size(), size_t(n)) << r.output;
  for (int i = 0; i < n; ++i) {
    EXPECT_GE(own[i], bar) << r.output;
    EXPECT_GE(avg[i], bar) << r.output;
  }
  EXPECT_NE(r.output.find("gossip-launch: " + std::to_string(n) + " of " + std::to_string(n) + " peers succeeded"),
            std::string::npos);
  EXPECT_NE(r.output.find("consensus "), std::string::npos) << "consensus distance is logged";
}

// Ξ per step from rank 0's "consensus step S xi X rel R" lines: step → (xi, rel).
std::map<int, std::pair<double, double>> consensus_by_step(const std::string& out) {
  std::map<int, std::pair<double, double>> m;
  std::regex re(R"(consensus step (\d+) xi ([-+0-9.e]+) rel ([-+0-9.e]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    m[std::stoi((*it)[1])] = {std::stod((*it)[2]), std::stod((*it)[3])};
  return m;
}

TEST(PeerProcesses, RingGossip4) {
  TempDir dir;
  auto r = launch(dir, config(4, "ring", "gossip", "eval_every: 20\n"));
  expect_all_trained(r, 4, 0.9);
  // eval_every: each peer logs its own model's test accuracy and its training time at steps 20, 40, 60.
  std::regex re(R"(eval step (\d+) test_acc ([0-9.]+) train_s ([0-9.]+))");
  std::map<int, int> lines_per_step;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), re); it != std::sregex_iterator(); ++it) {
    const int step = std::stoi((*it)[1]);
    ++lines_per_step[step];
    EXPECT_EQ(step % 20, 0);
    EXPECT_GT(std::stod((*it)[2]), 0.25) << "better than chance (4 classes)";
    EXPECT_LE(std::stod((*it)[2]), 1.0);
    EXPECT_GT(std::stod((*it)[3]), 0.0);
    if (step == 60) {
      EXPECT_GE(std::stod((*it)[2]), 0.8) << r.output;
    }
  }
  EXPECT_EQ(lines_per_step, (std::map<int, int>{{20, 4}, {40, 4}, {60, 4}})) << r.output;
  // The final line's train_s (time to the end, evaluations excluded) continues each peer's curve.
  std::map<int, double> at_60, at_end;
  std::regex eval_60(R"(\[peer (\d)\] eval step 60 test_acc [0-9.]+ train_s ([0-9.]+))");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), eval_60); it != std::sregex_iterator(); ++it)
    at_60[std::stoi((*it)[1])] = std::stod((*it)[2]);
  std::regex final_re(R"(final: peer (\d) .* train_s ([0-9.]+))");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), final_re); it != std::sregex_iterator(); ++it)
    at_end[std::stoi((*it)[1])] = std::stod((*it)[2]);
  ASSERT_EQ(at_end.size(), 4u) << r.output;
  for (const auto& [rank, secs] : at_end) EXPECT_GE(secs + 0.05, at_60.at(rank)) << "peer " << rank;  // 1 decimal
}

TEST(PeerProcesses, OnePeerExponentialGossip8) {
  TempDir dir;
  expect_all_trained(launch(dir, config(8, "one_peer_exponential", "gossip")), 8, 0.9);
}

TEST(PeerProcesses, PushSumWithOverlap8) {
  TempDir dir;
  expect_all_trained(
      launch(dir, config(8, "push_sum_one_peer_exponential", "{kind: push_sum, overlap: true, max_staleness: 2}")), 8,
      0.9);
}

TEST(PeerProcesses, LocalSgdAndAllReduce4) {
  TempDir dir;
  expect_all_trained(launch(dir, config(4, "ring", "{kind: local_sgd, global_average_every: 4}")), 4, 0.9);
  auto r = launch(dir, config(4, "ring", "allreduce", "consensus_every: 1\n"));
  expect_all_trained(r, 4, 0.9);
  for (auto [step, v] : consensus_by_step(r.output)) EXPECT_LT(v.second, 1e-12) << "all-reduce keeps Ξ = 0, step " << step;
}

// Decentralized DiLoCo, its pseudo-gradients averaged by the ring all-reduce or by a gossip round
// every 10 steps: both train, sending a fraction of what gossip every step sends.
TEST(PeerProcesses, DilocoTrainsSendingAFractionOfGossip) {
  TempDir dir;
  const auto gossip = launch(dir, config(4, "ring", "gossip"));
  expect_all_trained(gossip, 4, 0.9);
  for (const char* average : {"allreduce", "gossip"}) {
    const auto r = launch(dir, config(4, "ring", std::string("{kind: diloco, inner_steps: 10, outer_average: ") + average + "}"));
    expect_all_trained(r, 4, 0.9);
    EXPECT_LT(sent(r), sent(gossip) / 5) << average << "\n" << r.output;
    EXPECT_GT(sent(r), 0.0) << r.output;
  }
}

// CHOCO-SGD with each compressor trains as plain gossip does, sending a fraction of its bytes
// (the consensus all-reduces of the progress lines and the final average are counted in too).
TEST(PeerProcesses, ChocoTrainsWithEveryCompressorSendingAFractionOfGossip) {
  TempDir dir;
  const auto gossip = launch(dir, config(4, "ring", "gossip"));
  expect_all_trained(gossip, 4, 0.9);
  for (const char* compressor : {"top_k, ratio: 0.05, consensus_step: 0.2", "random_k, ratio: 0.1, consensus_step: 0.05",
                                 "sign, consensus_step: 0.2", "int8, consensus_step: 0.5"}) {
    const auto r = launch(dir, config(4, "ring", std::string("{kind: choco, compressor: ") + compressor + "}"));
    expect_all_trained(r, 4, 0.9);
    EXPECT_LT(sent(r), sent(gossip) / 2.5) << compressor << "\n" << r.output;
    EXPECT_GT(sent(r), 0.0) << r.output;
  }
}

// An MLP 32-8192-4 (303,108 floats, 1.21 MB): one model more or less shows in sent_MB.
std::string wide(std::string yaml) {
  yaml.replace(yaml.find("hidden: [32]"), 12, "hidden: [8192]");
  return yaml;
}
constexpr double kWideMB = 303108 * 4 / 1e6;

// Each peer's sent_MB on its last progress line and on its final line.
std::map<int, std::pair<double, double>> sent_at_end(const std::string& out) {
  std::map<int, std::pair<double, double>> m;
  std::regex step(R"(\[peer (\d+)\] step .* sent_MB ([0-9.]+))"), final(R"(\[peer (\d+)\] final: .* sent_MB ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), step); it != std::sregex_iterator(); ++it)
    m[std::stoi((*it)[1])].first = std::stod((*it)[2]);
  for (auto it = std::sregex_iterator(out.begin(), out.end(), final); it != std::sregex_iterator(); ++it)
    m[std::stoi((*it)[1])].second = std::stod((*it)[2]);
  return m;
}

// CHOCO from one initial model (init: same) starts its public copies there instead of sending
// the values uncompressed in its first round: with a model per peer (init: per_rank) each peer
// sends about one model per neighbour more.
TEST(PeerProcesses, ChocoFromOneInitialModelSkipsTheUncompressedRound) {
  TempDir dir;
  const std::string choco = "{kind: choco, compressor: sign, consensus_step: 0.2}";
  const auto same = launch(dir, wide(config(4, "ring", choco, "init: same\n")));
  const auto own = launch(dir, wide(config(4, "ring", choco, "init: per_rank\n")));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  ASSERT_EQ(own.exit_code, 0) << own.output;
  const double extra = sent(own) - sent(same);
  EXPECT_GT(extra, 0.8 * 2 * kWideMB) << same.output << own.output;
  EXPECT_LT(extra, 1.2 * 2 * kWideMB) << same.output << own.output;
}

// DiLoCo's all-reduce average in bf16 sends half the bytes of f32's, in int8 a quarter (and a
// little more: a scale per 4096 values), and trains as well. After an outer step every peer holds
// the same model, so the Ξ measurements there (the models' fingerprints compared: Ξ = 0) and the
// final average send no model at all; each would add 2·3/4 of a model per peer otherwise.
TEST(PeerProcesses, DilocoAveragesInBf16AndInt8ForHalfAndAQuarterOfTheBytes) {
  TempDir dir;
  const std::string optimizer = "{lr: 0.05, momentum: 0.9, batch: 32, steps: 60}";
  std::map<std::string, double> mb;
  for (const char* wire : {"f32", "bf16", "int8"}) {
    const std::string algorithm = std::string("{kind: diloco, inner_steps: 10, outer_average: allreduce, wire: ") + wire + "}";
    const auto r = launch(dir, wide(config(4, "ring", algorithm, "consensus_every: 10\n", optimizer)));
    expect_all_trained(r, 4, 0.9);
    for (auto [peer, at] : sent_at_end(r.output)) {
      EXPECT_LT(at.second - at.first, 0.01 * kWideMB) << wire << " peer " << peer << "\n" << r.output;
      mb[wire] = std::max(mb[wire], at.second);
    }
    const auto xi = consensus_by_step(r.output);
    EXPECT_EQ(xi.size(), 6u) << r.output;
    for (auto [step, v] : xi) EXPECT_EQ(v.first, 0.0) << wire << " step " << step << ": the outer step leaves one model";
  }
  // 6 outer steps of 2·3/4 of a model (10.9 MB in f32; sent_MB is printed to 0.1 MB), plus small collectives.
  EXPECT_GT(mb["f32"], 0.98 * 6 * 1.5 * kWideMB) << mb["f32"];
  EXPECT_LT(mb["f32"], 1.05 * 6 * 1.5 * kWideMB) << mb["f32"];
  EXPECT_LT(mb["bf16"], 0.55 * mb["f32"]) << mb["bf16"] << " vs " << mb["f32"];
  EXPECT_GT(mb["bf16"], 0.45 * mb["f32"]) << mb["bf16"] << " vs " << mb["f32"];
  EXPECT_LT(mb["int8"], 0.28 * mb["f32"]) << mb["int8"] << " vs " << mb["f32"];
  EXPECT_GT(mb["int8"], 0.22 * mb["f32"]) << mb["int8"] << " vs " << mb["f32"];
}

// The last progress line's Ξ averages the models at the last step; the run's end takes that
// average instead of all-reducing the same models again (2·3/4 of a model per peer).
TEST(PeerProcesses, TheFinalAverageIsTheLastProgressLinesMeasurement) {
  TempDir dir;
  const auto r = launch(dir, wide(config(4, "ring", "gossip")));
  ASSERT_EQ(r.exit_code, 0) << r.output;  // the launcher also checks that all end with one model
  const auto sent = sent_at_end(r.output);
  ASSERT_EQ(sent.size(), 4u) << r.output;
  for (auto [peer, mb] : sent) {
    EXPECT_GT(mb.first, 10 * kWideMB) << "peer " << peer << "\n" << r.output;
    EXPECT_LT(mb.second - mb.first, 0.25 * kWideMB) << "peer " << peer << "\n" << r.output;
  }
}

// Gradient tracking: the tracker is gossiped beside the model (twice gossip's bytes) and the run
// trains to one model.
TEST(PeerProcesses, GradientTrackingTrainsSendingTwiceGossipsBytes) {
  TempDir dir;
  const auto gossip = launch(dir, config(4, "ring", "gossip"));
  expect_all_trained(gossip, 4, 0.9);
  const auto r = launch(dir, config(4, "ring", "{kind: gossip, gradient_tracking: true}"));
  expect_all_trained(r, 4, 0.9);
  EXPECT_GT(sent(r), 1.5 * sent(gossip)) << r.output;
  EXPECT_LT(sent(r), 2.5 * sent(gossip)) << r.output;
}

// Quasi-global momentum changes the optimiser only: gossip's bytes, and the run trains to one
// model — not the same one as plain momentum's.
TEST(PeerProcesses, QuasiGlobalMomentumTrainsWithGossipsBytes) {
  TempDir dir;
  const auto gossip = launch(dir, config(4, "ring", "gossip"));
  expect_all_trained(gossip, 4, 0.9);
  const auto r = launch(dir, config(4, "ring", "gossip", "",
                                    "{lr: 0.05, momentum: 0.9, quasi_global_momentum: true, batch: 32, epochs: 2}"));
  expect_all_trained(r, 4, 0.9);
  EXPECT_NEAR(sent(r), sent(gossip), 0.02 * sent(gossip)) << r.output;
  EXPECT_NE(testing::crcs_in(r.output), testing::crcs_in(gossip.output)) << r.output;
}

// Gossip-PGA: Ξ is 0 (to float rounding) right after every H-th step, and not in between.
TEST(PeerProcesses, PeriodicGlobalAverageZeroesConsensusDistance) {
  TempDir dir;
  auto r = launch(dir, config(8, "ring", "{kind: gossip, global_average_every: 3}", "consensus_every: 1\n",
                              "{lr: 0.05, momentum: 0.9, batch: 32, epochs: 1}"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto xi = consensus_by_step(r.output);
  ASSERT_GE(xi.size(), 12u) << r.output;
  int zero_rounds = 0;
  for (auto [step, v] : xi) {
    if (step % 3 == 0) {
      EXPECT_LT(v.second, 1e-12) << "step " << step;
      ++zero_rounds;
    } else {
      EXPECT_GT(v.second, 1e-9) << "step " << step;
    }
  }
  EXPECT_GE(zero_rounds, 4);
}

TEST(PeerProcesses, PushSumWithPeriodicGlobalAverage) {
  TempDir dir;
  auto r = launch(dir, config(4, "push_sum_one_peer_exponential",
                              "{kind: push_sum, overlap: true, global_average_every: 4}", "consensus_every: 1\n"));
  expect_all_trained(r, 4, 0.9);
  for (auto [step, v] : consensus_by_step(r.output))
    if (step % 4 == 0) {
      EXPECT_LT(v.second, 1e-12) << "step " << step;
    }
}

// Learning rate 0 and different initial models: pure averaging, as the topology library predicts.
std::string pure_averaging(int n, const std::string& topology) {
  return config(n, topology, "gossip", "consensus_every: 1\ninit: per_rank\n", "{lr: 0.0, momentum: 0.0, batch: 32, epochs: 1}");
}

TEST(PeerProcesses, PureAveragingOnePeerExponentialIsExactAfterThreeRounds) {
  TempDir dir;
  auto r = launch(dir, pure_averaging(8, "one_peer_exponential"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto xi = consensus_by_step(r.output);
  ASSERT_TRUE(xi.count(3)) << r.output;
  EXPECT_GT(xi[1].second, 1e-3);
  EXPECT_GT(xi[2].second, 1e-3);
  EXPECT_LT(xi[3].second, 1e-12) << "exact average after tau = 3 rounds";
}

TEST(PeerProcesses, PureAveragingRingDecaysAtRhoSquared) {
  TempDir dir;
  auto r = launch(dir, pure_averaging(8, "ring"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto xi = consensus_by_step(r.output);
  ASSERT_GE(xi.size(), 12u);
  const double rho = (1 + 2 * std::cos(2 * M_PI / 8)) / 3;
  for (int k = 8; k < 12; ++k) {
    const double ratio = xi[k + 1].first / xi[k].first;
    EXPECT_NEAR(ratio, rho * rho, 0.1 * rho * rho) << "round " << k;
  }
}

// Random matchings among 7 peers (odd: a triangle every round): every peer draws the same
// matching from the run's seed, so the measured Ξ after each round is the one the topology
// library's W(k)⋯W(0) gives for the peers' initial models (made here as the trainer makes them).
TEST(PeerProcesses, PureAveragingRandomMatchingFollowsTheLibrary) {
  TempDir dir;
  const int n = 7, rounds = 12;
  auto r = launch(dir, pure_averaging(n, "random_matching"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto measured = consensus_by_step(r.output);
  auto backend = kernels::make_cpu_backend();
  std::vector<double> x;  // peer r's parameters at [r·dim, (r+1)·dim)
  int dim = 0;
  for (int rank = 0; rank < n; ++rank) {
    model::Mlp m(*backend, {32, 32, 4}, 1);
    m.init(3 + 1000003ull * (rank + 1));  // seed 3, init: per_rank
    const std::vector<float> p = m.download_params();
    x.insert(x.end(), p.begin(), p.end());
    dim = static_cast<int>(p.size());
  }
  const std::vector<double> xi = topology::consensus_trajectory(
      topology::Graph{topology::Kind::kRandomMatching, 0, {}, 3}, n, rounds, dim, std::move(x));
  for (int k = 0; k < rounds; ++k) {  // xi[k + 1]: after round k
    ASSERT_TRUE(measured.count(k + 1)) << r.output;
    EXPECT_NEAR(measured.at(k + 1).first, xi[k + 1], 1e-4 * xi[k + 1]) << "after round " << k;
  }
}

// Single copy changes how the values travel, not what they are: the same run with and without it
// ends with bit-identical models on every peer (gossip with PGA: gossip and all-reduce chunks both
// lent), and the peers report what their neighbours copied out of their memory and what they
// folded in place from their neighbours' shared regions (the gossip rounds' parameters).
TEST(PeerProcesses, SingleCopyTrainsBitIdenticallyToTheSocket) {
  TempDir dir;
  auto crcs = [](const std::string& out) {
    std::map<int, std::string> m;
    std::regex re(R"(final: peer (\d+) .* params_crc ([0-9a-f]+))");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
      m[std::stoi((*it)[1])] = (*it)[2];
    return m;
  };
  const std::string optimizer = "{lr: 0.05, momentum: 0.9, batch: 32, epochs: 1}";
  auto plain = launch(dir, config(4, "ring", "{kind: gossip, global_average_every: 5}", "", optimizer));
  auto lent = launch(dir, config(4, "ring", "{kind: gossip, global_average_every: 5, single_copy: true}", "", optimizer));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(lent.exit_code, 0) << lent.output;
  EXPECT_EQ(crcs(plain.output).size(), 4u) << plain.output;
  EXPECT_EQ(crcs(lent.output), crcs(plain.output)) << lent.output;
  if (testing::process_vm_readv_works()) {
    EXPECT_EQ(capture_all(lent.output, R"(lent_MB ([0-9.]+))").size(), 4u) << lent.output;
    const std::vector<double> mapped = capture_all(lent.output, R"(mapped_MB ([0-9.]+))");
    EXPECT_EQ(mapped.size(), 4u) << lent.output;
    for (double mb : mapped) EXPECT_GT(mb, 0.0) << lent.output;
  }
  EXPECT_EQ(lent.output.find("cannot map"), std::string::npos) << lent.output;
  EXPECT_EQ(plain.output.find("lent_MB"), std::string::npos);
}

// --min-step-ms paces every step (the rest asleep): the run lasts at least steps × the pace, and
// the models are exactly those of an unpaced run. Values outside 0..60000 are refused by name.
TEST(Launcher, PacedStepsLastTheirMinimumAndLeaveTheModelsAsTheyWere) {
  TempDir dir;
  const std::string yaml = dir.write("run.yaml", config(2, "ring", "gossip", "", "{lr: 0.05, batch: 32, epochs: 1}"));
  const auto plain = run_command(testing::bin("gossip-launch") + " " + yaml, 60);
  const auto paced = run_command(testing::bin("gossip-launch") + " " + yaml + " --min-step-ms 30", 60);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(paced.exit_code, 0) << paced.output;
  const std::set<std::string> model = testing::crcs_in(plain.output);
  EXPECT_EQ(model.size(), 1u) << plain.output;
  EXPECT_EQ(testing::crcs_in(paced.output), model) << paced.output;
  const std::vector<double> steps = capture_all(paced.output, R"(training rows, (\d+) steps)");
  const std::vector<double> train_s = capture_all(paced.output, R"(train_s ([0-9.]+))");
  ASSERT_EQ(steps.size(), 2u) << paced.output;
  ASSERT_EQ(train_s.size(), 2u) << paced.output;
  for (double t : train_s) EXPECT_GE(t, steps[0] * 0.030) << paced.output;
  for (const char* bad : {"-1", "60001", "nan"}) {
    const auto r = run_command(testing::bin("gossip-peer") + " --config " + yaml + " --min-step-ms " + bad, 30);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.output.find("min"), std::string::npos) << bad << ": " << r.output;
  }
}

// A neighbour that never shows up: the peer fails with a clear error naming it, no hang.
TEST(PeerProcesses, DeadNeighbourIsReportedNotWaitedForever) {
  TempDir dir;
  const std::string yaml = dir.write(
      "dead.yaml", config(2, "ring", "{kind: gossip, timeout_s: 2}", "", "{lr: 0.05, batch: 32, epochs: 1}"));
  auto r = run_command(testing::bin("gossip-peer") + " --config " + yaml + " --rank 0 --rendezvous " + dir.path(), 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.output.find("peer 1"), std::string::npos) << r.output;
}

// The rank can come from a cluster launcher's environment instead of --rank.
TEST(PeerProcesses, RankFromClusterEnvironment) {
  TempDir dir;
  const std::string yaml = dir.write("one.yaml", config(2, "ring", "{kind: gossip, timeout_s: 1}", "", "{lr: 0.05, batch: 32, epochs: 1}"));
  auto r = run_command("env SLURM_PROCID=1 " + testing::bin("gossip-peer") + " --config " + yaml + " --rendezvous " +
                           dir.path(), 30);
  EXPECT_NE(r.output.find("[peer 1] bound"), std::string::npos) << r.output;
  auto bad = run_command("env OMPI_COMM_WORLD_RANK=5 " + testing::bin("gossip-peer") + " --config " + yaml, 30);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("rank 5 is outside 0..1"), std::string::npos) << bad.output;
}

// Ctrl-C to the launcher reaches every peer, and nothing is left running.
TEST(Launcher, InterruptStopsEveryPeer) {
  TempDir dir;
  const std::string yaml = dir.write("long.yaml", config(4, "ring", "gossip", "", "{lr: 0.05, batch: 32, epochs: 100000}"));
  const std::string pidfile = dir.path() + "/launcher.pid";
  auto r = run_command("sh -c '" + testing::bin("gossip-launch") + " " + yaml + " & echo $! > " + pidfile +
                           "; sleep 2; kill -INT $(cat " + pidfile + "); wait $(cat " + pidfile + ")'",
                       60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.output.find("forwarding signal 2"), std::string::npos) << r.output;
  // The [g] keeps pgrep from matching the shell that runs it.
  auto left = run_command("pgrep -f '[g]ossip-peer --config " + yaml + "'", 10);
  EXPECT_EQ(left.output, "") << "peers left behind";
}

TEST(Launcher, BadConfigIsExitCodeTwoNamingTheFile) {
  TempDir dir;
  auto r = launch(dir, "peers: {count: 2}\ntopology: hypercube\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("run.yaml:2"), std::string::npos) << r.output;
}

// Duplicate key, NaN value, complex key: one "file:line" error and exit code 2, from the peer and
// from the launcher alike.
TEST(PeerProcesses, YamlEdgeCasesAreExitCodeTwoWithFileAndLine) {
  TempDir dir;
  const std::vector<std::array<std::string, 3>> cases = {
      {"dup.yaml", "seed: 1\noptimizer: {lr: 0.1}\noptimizer: {lr: 0.5}\n",
       "dup.yaml:3: duplicate key 'optimizer' (first at line 2)"},
      {"nan.yaml", "seed: 1\noptimizer: {lr: .nan}\n", "nan.yaml:2: field 'optimizer.lr': '.nan' is not a finite number"},
      {"complex.yaml", "seed: 1\nmodel:\n  ? [a]\n  : 1\n", "complex.yaml:3: a key must be a plain name"}};
  for (const auto& [name, text, message] : cases) {
    const std::string path = dir.write(name, text);
    for (const std::string& tool : {testing::bin("gossip-peer") + " --config ", testing::bin("gossip-launch") + " "}) {
      auto r = run_command(tool + path, 30);
      EXPECT_EQ(r.exit_code, 2) << r.output;
      EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    }
  }
}

// Every peer exits 0, but they do not hold one model: a wrapper runs ranks 0-2 as a run of three
// and rank 3 alone. The launcher says the run split and exits non-zero.
TEST(Launcher, PeersEndingWithDifferentModelsFailTheRun) {
  TempDir dir;
  const std::string optimizer = "{lr: 0.05, batch: 32, epochs: 1}";
  const std::string alone = dir.write("alone.yaml", config(1, "ring", "none", "", optimizer));
  const std::string three = dir.write("three.yaml", config(3, "ring", "gossip", "", optimizer));
  const std::string wrapper = dir.write(
      "peer.sh", "#!/bin/sh\n[ \"$4\" = 3 ] && exec " + testing::bin("gossip-peer") + " --config " + alone + "\nshift 2\nexec " +
                     testing::bin("gossip-peer") + " --config " + three + " \"$@\"\n");
  ::chmod(wrapper.c_str(), 0755);
  auto r = run_command(testing::bin("gossip-launch") + " " + dir.write("run.yaml", config(4, "ring", "gossip", "", optimizer)) +
                           " --peer " + wrapper,
                       60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gossip-launch: 4 of 4 peers succeeded, 2 distinct final models: the run split"),
            std::string::npos) << r.output;
}

// One failing peer: the launcher stops the others at once and exits non-zero. It fails 2 s in,
// when the others have started (a started peer takes SIGTERM as "leave at the next step", and
// those waiting for its messages never reach one: the launcher kills them after a grace period).
TEST(Launcher, OneFailingPeerStopsTheRun) {
  TempDir dir;
  const std::string wrapper = dir.write(
      "peer.sh", "#!/bin/sh\n[ \"$4\" = 2 ] && { sleep 2; echo 'simulated failure'; exit 3; }\nexec " +
                     testing::bin("gossip-peer") + " \"$@\"\n");
  ::chmod(wrapper.c_str(), 0755);
  auto r = run_command(testing::bin("gossip-launch") + " " +
                           dir.write("run.yaml", config(4, "ring", "{kind: gossip, timeout_s: 60}")) + " --peer " + wrapper,
                       60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(r.seconds, 30) << "the others were stopped, not left to time out";
  EXPECT_NE(r.output.find("peer 2 failed (exit code 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[peer 2] simulated failure"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gossip
