// gossip-launch's live view: the rows it folds the peers' lines into, what it draws, and the whole
// launcher under a real terminal (tmux), captured while four peers train.
#include "live_view.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "process_util.h"

namespace gossip::tools {
namespace {

TEST(LiveView, StepAndLiveLinesFillTheRow) {
  PeerRow row;
  EXPECT_TRUE(update_row(row,
                         "[peer 2] step 100/400 epoch 0.50 loss 0.7917 train_acc 0.7314 samples/s 7522 consensus "
                         "4.936e-03 rel 4.6e-06 sent_MB 217.1 wait_s 0.4 peers 4",
                         10.0));
  EXPECT_EQ(row.state, "training");
  EXPECT_EQ(row.step, 100);
  EXPECT_EQ(row.total, 400);
  EXPECT_DOUBLE_EQ(*row.loss, 0.7917);
  EXPECT_DOUBLE_EQ(*row.accuracy, 0.7314);
  EXPECT_DOUBLE_EQ(*row.rate, 7522);
  EXPECT_DOUBLE_EQ(*row.consensus, 4.936e-03);
  EXPECT_FALSE(row.eta_s);  // one point: no rate yet
  EXPECT_FALSE(row.mb_out_per_s);

  // Live lines: no consensus (it stays the last measured), byte counters give MB/s.
  EXPECT_TRUE(update_row(row, "[peer 2] live step 150/400 loss 0.6 train_acc 0.8 samples/s 7000 sent_MB 10.0 "
                              "received_MB 20.0 peers 4", 12.0));
  EXPECT_TRUE(update_row(row, "[peer 2] live step 200/400 loss 0.5 train_acc 0.85 tokens/s 9000 sent_MB 14.0 "
                              "received_MB 21.0 peers 4", 14.0));
  EXPECT_EQ(row.step, 200);
  EXPECT_DOUBLE_EQ(*row.loss, 0.5);
  EXPECT_DOUBLE_EQ(*row.rate, 9000);
  EXPECT_DOUBLE_EQ(*row.consensus, 4.936e-03);
  EXPECT_DOUBLE_EQ(*row.mb_out_per_s, 2.0);  // (14 − 10) MB / 2 s
  EXPECT_DOUBLE_EQ(*row.mb_in_per_s, 0.5);
  ASSERT_TRUE(row.eta_s);
  EXPECT_DOUBLE_EQ(*row.eta_s, 8.0);  // 100 steps in 4 s since the first line, 200 to go

  const std::string text = format_row(row, 15.0, 200);  // a second after the line: 7 s left
  EXPECT_NE(text.find("[##########..........]  50%"), std::string::npos) << text;
  EXPECT_NE(text.find("0:00:07"), std::string::npos) << text;
  EXPECT_NE(text.find("200/400"), std::string::npos) << text;
  EXPECT_NE(text.find("4.94e-03"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 8), "training") << text;
  EXPECT_EQ(format_row(row, 15.0, 30).size(), 30u);
  EXPECT_EQ(header_row(25).size(), 25u);
}

TEST(LiveView, StatesFollowTheMembershipLines) {
  PeerRow row;
  EXPECT_NE(format_row(row, 0, 200).find("starting"), std::string::npos);
  struct Step {
    const char* line;
    bool absorbed;  // a step or live line, which the row replaces
    const char* state;
  };
  const Step steps[] = {
      {"[peer 4] joining via tcp://127.0.0.1:5000 as tcp://127.0.0.1:5004", false, "joining"},
      {"[peer 4] live step 10/100 loss 1 train_acc 0.5 samples/s 10", true, "training"},
      {"[peer 4] peer 4: view change to epoch 3: 4 members (gone: 1)", false, "view change"},
      {"[peer 4] live step 20/100 loss 1 train_acc 0.5 samples/s 10", true, "training"},
      {"[peer 4] peer 4: cut off from the run: no contact", false, "cut off"},
      {"[peer 4] peer 4: stopping after step 30 (leaving the run)", false, "leaving"},
      {"[peer 4] final: peer 4 test_acc 0.8 params_crc 1234", false, "done"},
      {"[peer 4] step 100/100 loss 1 train_acc 0.5 samples/s 10", true, "done"},  // a finished peer stays so
  };
  double t = 0;
  for (const Step& s : steps) {
    EXPECT_EQ(update_row(row, s.line, ++t), s.absorbed) << s.line;
    EXPECT_EQ(row.state, s.state) << s.line;
  }
  EXPECT_EQ(format_row(row, 9, 200).find("0:00"), std::string::npos);  // and shows no ETA
}

TEST(LiveView, BadNumbersShowAsDashesNotGarbage) {
  PeerRow row;
  EXPECT_FALSE(update_row(row, "[peer 0] step x/y loss 1", 1));  // not a step line after all
  EXPECT_EQ(row.total, 0);
  EXPECT_FALSE(update_row(row, "[peer 0] step 7/y loss 1", 1));  // half a step count changes nothing
  EXPECT_EQ(row.step, 0);
  EXPECT_TRUE(update_row(row, "[peer 0] step 5/10 loss nan train_acc inf samples/s 3", 1));
  const std::string text = format_row(row, 1, 200);
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_EQ(text.find("inf"), std::string::npos) << text;
  EXPECT_NE(text.find("5/10"), std::string::npos) << text;
}

// Events go above the rows; each redraw moves up over the rows it drew and clears them.
TEST(LiveView, RedrawsInPlaceWithEventsAbove) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    LiveView view(2, f);
    view.event("gossip-launch: started 2 peers");
    view.line(0, "[peer 0] live step 1/10 loss 1 train_acc 0.5 samples/s 10", 0.1);
    view.render(0.1);
    view.line(1, "[peer 1] peer 1: view change to epoch 2: 2 members (gone: none)", 0.15);
    view.render(0.15);  // an event waits: drawn at once
    view.line(0, "[peer 0] live step 2/10 loss 1 train_acc 0.5 samples/s 10", 0.2);
    view.render(0.2);  // no event and 0.05 s since the last draw: not drawn
    view.exited(0, "failed (signal 9)");
    view.finish(0.5);
  }
  std::rewind(f);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  std::fclose(f);
  EXPECT_EQ(out.find("] live step"), std::string::npos) << out;  // absorbed into the rows
  const size_t first_up = out.find("\x1b[3A\r\x1b[J");
  ASSERT_NE(first_up, std::string::npos) << out;  // a header and two rows
  EXPECT_LT(out.find("gossip-launch: started 2 peers\n"), first_up);
  EXPECT_GT(out.find("view change to epoch 2"), first_up);
  EXPECT_EQ(testing::count_of(out, "peer progress"), 3u) << out;
  EXPECT_NE(out.rfind("failed (signal 9)"), std::string::npos) << out;
  EXPECT_NE(out.rfind("view change"), std::string::npos);
}

// A peer given a GOSSIP_LIVE_S it cannot use says so at start instead of ignoring it.
TEST(LiveView, ABadLivePeriodIsAnErrorNamingIt) {
  testing::TempDir dir;
  const std::string yaml = dir.write("one.yaml",
      "device: cpu\nmodel: {hidden: [8]}\n"
      "data: {dataset: synthetic, synthetic: {train: 64, test: 16, dims: 4, classes: 2}}\n"
      "optimizer: {batch: 16, epochs: 1}\n");
  for (const char* bad : {"abc", "-1", "0", "1e9"}) {
    const auto r = testing::run_command("env GOSSIP_LIVE_S=" + std::string(bad) + " " + testing::bin("gossip-peer") +
                                        " --config " + yaml);
    EXPECT_NE(r.exit_code, 0) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("GOSSIP_LIVE_S: '" + std::string(bad) + "' is not a number of seconds"), std::string::npos)
        << r.output;
  }
  const auto good = testing::run_command("env GOSSIP_LIVE_S=0.001 " + testing::bin("gossip-peer") + " --config " + yaml);
  EXPECT_EQ(good.exit_code, 0) << good.output;
}

// A tmux server of its own, killed whatever the test's outcome.
class Tmux {
 public:
  explicit Tmux(const std::string& name) : socket_("gossip-" + name + "-" + std::to_string(::getpid())) {}
  ~Tmux() { testing::run_command("tmux -L " + socket_ + " kill-server", 10); }
  bool start(const std::string& command) {
    return testing::run_command("tmux -L " + socket_ + " new-session -d -x 160 -y 50 \"" + command + "\"", 10)
               .exit_code == 0;
  }
  std::string capture() { return testing::run_command("tmux -L " + socket_ + " capture-pane -p", 10).output; }

 private:
  std::string socket_;
};

// rank → (step, state) of every live-view row in a capture of the pane.
std::map<int, std::pair<int, std::string>> rows_in(const std::string& pane) {
  static const std::regex row(R"(^\s*(\d+) \[[#.]{20}\]\s+\d+%.*?(\d+)/\d+\s.*\s(\S+)\s*$)");
  std::map<int, std::pair<int, std::string>> rows;
  std::istringstream in(pane);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, m, row)) rows[std::stoi(m[1])] = {std::stoi(m[2]), m[3]};
  return rows;
}

TEST(LiveView, FourUpdatingRowsUnderARealTerminal) {
  if (testing::run_command("tmux -V", 10).exit_code != 0)
    GTEST_SKIP() << "tmux is not installed (scripts/run-tests.sh installs it)";
  testing::TempDir dir;
  const std::string yaml = dir.write("run.yaml",
      "seed: 5\ndevice: cpu\nlog_every: 100000\npeers: {count: 4, host: 127.0.0.1, base_port: 0}\ntopology: ring\n"
      "algorithm: gossip\nmodel: {hidden: [512, 512]}\n"
      "data: {dataset: synthetic, synthetic: {train: 8000, test: 400, dims: 256, classes: 4}}\n"
      "optimizer: {lr: 0.05, batch: 32, epochs: 4}\n");
  Tmux tmux("live");
  ASSERT_TRUE(tmux.start("GOSSIP_LIVE_S=0.1 " + testing::bin("gossip-launch") + " " + yaml +
                         " --slowdown 4; echo LAUNCH-EXIT=\\$?; sleep 120"));
  std::vector<std::map<int, std::pair<int, std::string>>> while_training;
  std::string pane;
  for (int i = 0; i < 600 && pane.find("LAUNCH-EXIT=") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pane = tmux.capture();
    auto rows = rows_in(pane);
    bool all_training = rows.size() == 4;
    for (const auto& [rank, r] : rows) all_training &= r.second == "training";
    if (all_training) while_training.push_back(rows);
  }
  ASSERT_NE(pane.find("LAUNCH-EXIT=0"), std::string::npos) << pane;
  ASSERT_GE(while_training.size(), 2u) << "never saw four training rows twice\n" << pane;
  EXPECT_LT(while_training.front().at(0).first, while_training.back().at(0).first) << "the rows did not move";
  // The end: each peer's row once (redrawn in place, not scrolled), every one done, no raw step lines.
  const auto end = rows_in(pane);
  ASSERT_EQ(end.size(), 4u) << pane;
  for (const auto& [rank, r] : end) EXPECT_EQ(r.second, "done") << pane;
  EXPECT_EQ(testing::count_of(pane, "peer progress"), 1u) << pane;
  EXPECT_EQ(pane.find("] live step"), std::string::npos) << pane;
  EXPECT_NE(pane.find("4 of 4 peers succeeded"), std::string::npos) << pane;

  // --plain on the same terminal: the peers' lines as they come, no rows.
  Tmux plain("plain");
  pane.clear();
  ASSERT_TRUE(plain.start(testing::bin("gossip-launch") + " " + yaml + " --plain; echo LAUNCH-EXIT=\\$?; sleep 120"));
  for (int i = 0; i < 600 && pane.find("LAUNCH-EXIT=") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pane = plain.capture();
  }
  EXPECT_NE(pane.find("LAUNCH-EXIT=0"), std::string::npos) << pane;
  EXPECT_NE(pane.find("] step 248/248"), std::string::npos) << pane;
  EXPECT_EQ(pane.find("peer progress"), std::string::npos) << pane;
}

}  // namespace
}  // namespace gossip::tools
