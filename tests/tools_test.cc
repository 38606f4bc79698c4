// The command-line tools as a user runs them.
#include <gtest/gtest.h>

#include <cmath>

#include "process_util.h"

namespace gossip {
namespace {

using testing::capture_all;
using testing::run_command;

TEST(GossipTopology, JsonReportsRhoAndConsensusDecay) {
  auto r = run_command(testing::bin("gossip-topology") + " --topology ring --n 8 --rounds 5 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rho = capture_all(r.output, R"("rho_one_round": ([-+0-9.e]+))");
  ASSERT_EQ(rho.size(), 1u);
  EXPECT_NEAR(rho[0], (1 + 2 * std::cos(2 * M_PI / 8)) / 3, 1e-12);
  EXPECT_NE(r.output.find("\"consensus_distance\": ["), std::string::npos);
  EXPECT_NE(r.output.find("{\"rank\": 7, \"self\": 0.33333333333333331, \"in\": [{\"peer\": 0"), std::string::npos)
      << r.output;
}

TEST(GossipTopology, TextShowsEveryRoundOfATimeVaryingGraph) {
  auto r = run_command(testing::bin("gossip-topology") + " --topology one_peer_exponential --n 8 --rounds 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("round 2 (mod 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rho (3-round product) 0.000000"), std::string::npos) << r.output;
}

TEST(GossipTopology, BadInputIsExitCodeTwo) {
  auto r = run_command(testing::bin("gossip-topology") + " --topology hypercube");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown topology 'hypercube'"), std::string::npos);
  EXPECT_EQ(run_command(testing::bin("gossip-topology") + " --n 0").exit_code, 2);
  EXPECT_EQ(run_command(testing::bin("gossip-topology") + " --nodes 3").exit_code, 2);
  EXPECT_EQ(run_command(testing::bin("gossip-topology") + " --topology torus --n 7 --rows 2").exit_code, 2);
  // Sizes are checked before they narrow to int or fill the memory (these ran out of time or RAM).
  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {"--n 4294967297", "--n must be in 1..4096, got 4294967297"},
           {"--dim 100000000", "--dim must be in 1..1000000, got 100000000"},
           {"--n 4096 --dim 10000", "--n × --dim must be at most 33554432"},
           {"--rounds 1000000 --n 4096", "--rounds × --n × --dim must be at most 2e9"}}) {
    const auto bad = run_command(testing::bin("gossip-topology") + " " + flags);
    EXPECT_EQ(bad.exit_code, 2) << flags << "\n" << bad.output;
    EXPECT_NE(bad.output.find(error), std::string::npos) << flags << "\n" << bad.output;
  }
}

TEST(GossipTopology, EdgeListFromAConfig) {
  auto r = run_command(testing::bin("gossip-topology") + " --config " + std::string(GOSSIP_SOURCE_DIR) +
                       "/configs/edges6.yaml --format json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"topology\": \"edge_list\", \"n\": 6"), std::string::npos) << r.output;
}

// Random matchings: a new matching every round (from --seed), analysed over the first τ rounds.
TEST(GossipTopology, RandomMatchingIsAnalysedOverItsFirstRounds) {
  auto r = run_command(testing::bin("gossip-topology") + " --topology random_matching --n 8 --seed 5 --rounds 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("new every round; the first 3 rounds"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rho (3-round product)"), std::string::npos) << r.output;
  auto xi = capture_all(r.output, R"(round +\d+  ([0-9.e+-]+))");
  ASSERT_EQ(xi.size(), 7u) << r.output;
  EXPECT_LT(xi[6], 0.01 * xi[0]) << "a matching halves Ξ in expectation (a repeated one leaves it)\n" << r.output;
  auto again = run_command(testing::bin("gossip-topology") + " --topology random_matching --n 8 --seed 5 --rounds 6");
  EXPECT_EQ(again.output, r.output) << "the same seed gives the same matchings";
}

TEST(GossipPeer, WrongFlagsAreExitCodeTwo) {
  auto r = run_command(testing::bin("gossip-peer") + " --confg x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag --confg"), std::string::npos) << r.output;
  auto missing = run_command(testing::bin("gossip-peer"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--config"), std::string::npos);
}

// Every binary, the benchmarks' too: --help prints the usage and exits 0; a wrong flag or argument
// prints the usage and exits 2 (never an abort).
TEST(AllBinaries, HelpAndWrongFlagsGiveTheUsage) {
  for (const char* name : {"gossip-peer", "gossip-launch", "gossip-consensus", "gossip-topology", "gossip-keygen",
                           "train_bench", "exchange_bench", "peer_mix_bench"}) {
    const auto help = run_command(testing::bin(name) + " --help");
    EXPECT_EQ(help.exit_code, 0) << name << "\n" << help.output;
    EXPECT_NE(help.output.find("usage"), std::string::npos) << name << "\n" << help.output;
    const auto wrong = run_command(testing::bin(name) + " --no-such-flag");
    EXPECT_EQ(wrong.exit_code, 2) << name << "\n" << wrong.output;
    EXPECT_NE(wrong.output.find("usage"), std::string::npos) << name << "\n" << wrong.output;
    EXPECT_EQ(wrong.output.find("terminate called"), std::string::npos) << name << "\n" << wrong.output;
  }
}

// `gossip-launch --plot run.svg`: one line per peer in each of the three panels (loss, accuracy,
// consensus distance), drawn from the step lines the peers printed.
TEST(GossipLaunch, PlotsEveryPeersLossAccuracyAndConsensus) {
  testing::TempDir dir;
  const std::string yaml = dir.write("run.yaml",
      "seed: 3\ndevice: cpu\nlog_every: 5\npeers: {count: 3, host: 127.0.0.1, base_port: 0}\ntopology: ring\n"
      "algorithm: gossip\nmodel: {hidden: [16]}\n"
      "data: {dataset: synthetic, synthetic: {train: 1500, test: 300, dims: 16, classes: 4}}\n"
      "optimizer: {lr: 0.05, batch: 32, epochs: 1}\n");
  const std::string svg = dir.path() + "/run.svg";
  const auto r = run_command(testing::bin("gossip-launch") + " " + yaml + " --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = capture_all(r.output, R"(plot of (\d+) step lines written)");
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_GE(lines[0], 6);  // 16 steps each, a line every 5
  const std::string text = testing::read_file(svg);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string cls = "class='peer" + std::to_string(rank) + "'";
    EXPECT_EQ(testing::count_of(text, cls), 3u) << "peer " << rank << ": one line per panel\n" << text;
    EXPECT_NE(text.find(">peer " + std::to_string(rank) + "</text>"), std::string::npos);
  }
  // Every panel's lines have points (the consensus panel too: gossip peers report it).
  EXPECT_EQ(text.find("points=''"), std::string::npos) << text;
  EXPECT_NE(run_command(testing::bin("gossip-launch") + " " + yaml + " --plot /nonexistent/dir/run.svg").exit_code, 0);
}

// `gossip-launch CONFIG -- CMD`: CMD runs once per rank, told its rank and the config through the
// environment; its output is prefixed and a failing rank fails the launch.
TEST(GossipLaunch, StartsACommandPerRank) {
  testing::TempDir dir;
  const std::string yaml = dir.write("run.yaml", "peers: {count: 3, host: 127.0.0.1, base_port: 0}\n");
  const auto r = run_command(testing::bin("gossip-launch") + " " + yaml +
                             " --epochs 4 -- sh -c 'echo \"rank $GOSSIP_RANK/$GOSSIP_SIZE of $GOSSIP_CONFIG epochs $GOSSIP_EPOCHS "
                             "rendezvous ${GOSSIP_RENDEZVOUS:+set}\"'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.output.find("[peer " + std::to_string(rank) + "] rank " + std::to_string(rank) + "/3 of " + yaml +
                            " epochs 4 rendezvous set"),
              std::string::npos)
        << r.output;
  EXPECT_NE(r.output.find("3 of 3 peers succeeded"), std::string::npos) << r.output;

  // Rank 1 fails first (rank 2 would a little later): the launcher stops the rest and names each failure.
  const auto failing = run_command(testing::bin("gossip-launch") + " " + yaml + " -- sh -c 'sleep 0.$GOSSIP_RANK; exit $GOSSIP_RANK'");
  EXPECT_EQ(failing.exit_code, 1) << failing.output;
  EXPECT_NE(failing.output.find("peer 1 failed (exit code 1)"), std::string::npos) << failing.output;

  const auto missing = run_command(testing::bin("gossip-launch") + " " + yaml + " -- no-such-command-here");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("exec no-such-command-here: No such file or directory"), std::string::npos)
      << missing.output;
  const auto empty = run_command(testing::bin("gossip-launch") + " " + yaml + " --");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.output.find("nothing after '--'"), std::string::npos) << empty.output;
}

// The flags gossip-launch passes on to every peer are checked before any peer starts: one error,
// not one per peer (it used to start all four, each printing the same line).
TEST(GossipLaunch, PassedOnFlagsAreCheckedBeforeAnyPeerStarts) {
  testing::TempDir dir;
  const std::string yaml = dir.write("run.yaml", "peers: {count: 4, host: 127.0.0.1, base_port: 0}\n");
  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {"--epochs abc", "gossip-launch: flag --epochs wants a number, got 'abc'"},
           {"--epochs -3", "gossip-launch: epochs must be between 0 and 1000000, not -3"},
           {"--device gpu", "gossip-launch: device must be auto, cpu or cuda, not 'gpu'"},
           {"--slowdown 0", "gossip-launch: slowdown must be between 1 and 1000, not 0"},
           {"--min-step-ms -1", "gossip-launch: min_step_ms must be between 0 and 60000 (milliseconds), not -1"}}) {
    const auto r = run_command(testing::bin("gossip-launch") + " " + yaml + " --plain " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_EQ(testing::count_of(r.output, error), 1u) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("started"), std::string::npos) << flags << "\n" << r.output;
  }
}

// bench/plot.py, which every bench script draws its SVG with: one bar (and whisker) per row, one
// line per series, and a clear error for a file with nothing to draw.
TEST(BenchPlots, BarsAndLinesFromTheScriptsFiles) {
  testing::TempDir dir;
  const std::string plot = "/usr/bin/python3 " + std::string(GOSSIP_SOURCE_DIR) + "/bench/plot.py";
  const std::string bars = dir.write("bars", "ring_n=4 0.8 0.7 0.95\none-peer_n=4 1.2 1.1 1.3\nbroken x\ngloo 2.5\n");
  const auto b = run_command(plot + " bars " + bars + " 'ratio' 'title <1>' 1");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(testing::count_of(b.output, "<rect x="), 3u) << b.output;  // the broken row is left out
  EXPECT_NE(b.output.find(">ring n=4</text>"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("title &lt;1&gt;"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("stroke-dasharray"), std::string::npos) << b.output;  // the reference line
  const std::string lines = dir.write("lines", "a 1 0.5\nb 1 0.4\na 2 0.7\nb 3 0.8\nb 4 nan\n");
  const auto l = run_command(plot + " lines " + lines + " s acc t");
  ASSERT_EQ(l.exit_code, 0) << l.output;
  EXPECT_EQ(testing::count_of(l.output, "<polyline "), 2u) << l.output;
  const auto empty = run_command(plot + " bars " + dir.write("empty", "nothing here\n") + " x t");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.output.find("nothing to draw in " + dir.path() + "/empty"), std::string::npos) << empty.output;
  EXPECT_EQ(run_command(plot + " pie " + bars).exit_code, 2);
}

}  // namespace
}  // namespace gossip
