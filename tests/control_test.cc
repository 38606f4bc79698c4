#include "control/control.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "control/sketch.h"

namespace gossip::peer {
namespace {

ControlState make(int64_t total = 100) {
  ControlInfo info;
  info.id = 1;
  info.rank = 1;
  info.n = 4;
  info.total_steps = total;
  info.algorithm = "gossip";
  info.graph = topology::Graph{topology::Kind::kRing, 0, {}};
  info.num_params = 3;
  return ControlState(info, nullptr);
}

TEST(Control, StatusNamesRankRoundAndNeighbours) {
  ControlState c = make();
  c.set_round(7);
  c.set_progress(0.5, 0.8, 1000, 2.5);
  ControlReply r = c.handle(static_cast<uint32_t>(ControlOp::kStatus), "{}");
  EXPECT_FALSE(r.floats);
  EXPECT_EQ(ControlState::json_number(r.text, "round"), 7);
  EXPECT_EQ(ControlState::json_number(r.text, "rank"), 1);
  EXPECT_EQ(ControlState::json_number(r.text, "loss"), 0.5);
  EXPECT_NE(r.text.find("\"in\": [{\"peer\": 0"), std::string::npos) << r.text;
}

TEST(Control, StatusSaysTheStableIdBesideTheRankAfterAViewChange) {
  ControlState c = make();
  c.set_view(6, 2, 5, 3);  // peer 6 is now rank 2 of 5 in epoch 3
  const std::string text = c.handle(static_cast<uint32_t>(ControlOp::kStatus), "{}").text;
  EXPECT_EQ(ControlState::json_number(text, "id"), 6) << text;
  EXPECT_EQ(ControlState::json_number(text, "rank"), 2) << text;
  EXPECT_EQ(ControlState::json_number(text, "epoch"), 3) << text;
}

TEST(Control, SnapshotAtAFutureRound) {
  ControlState c = make();
  c.set_round(5);
  auto op = [](ControlOp o) { return static_cast<uint32_t>(o); };
  EXPECT_NE(c.handle(op(ControlOp::kSnapshot), "{\"round\": 5}").text.find("has passed"), std::string::npos);
  EXPECT_NE(c.handle(op(ControlOp::kSnapshot), "{\"round\": 101}").text.find("ends at round 100"), std::string::npos);
  EXPECT_NE(c.handle(op(ControlOp::kSnapshot), "{}").text.find("error"), std::string::npos);
  EXPECT_NE(c.handle(op(ControlOp::kSnapshot), "{\"round\": 9}").text.find("ok"), std::string::npos);
  EXPECT_NE(c.handle(op(ControlOp::kSnapshot), "{\"round\": 9, \"sketch\": 2, \"seed\": 3}").text.find("ok"),
            std::string::npos);
  EXPECT_FALSE(c.snapshot_due(8));
  EXPECT_FALSE(c.handle(op(ControlOp::kFetch), "{\"round\": 9}").floats) << "not taken yet";
  ASSERT_TRUE(c.snapshot_due(9));
  const float x[3] = {1, 2, 3};
  c.capture(9, x, 3);
  EXPECT_FALSE(c.snapshot_due(9));
  ControlReply full = c.handle(op(ControlOp::kFetch), "{\"round\": 9}");
  ASSERT_TRUE(full.floats);
  EXPECT_EQ(*full.values, (std::vector<float>{1, 2, 3}));
  ControlReply sk = c.handle(op(ControlOp::kFetch), "{\"round\": 9, \"sketch\": 2, \"seed\": 3}");
  ASSERT_TRUE(sk.floats);
  EXPECT_EQ(*sk.values, count_sketch(x, 3, 2, 3));
  EXPECT_NE(c.handle(99, "{}").text.find("unknown control operation"), std::string::npos);
}

TEST(Control, StatusWritesADivergedLossAsNullNotNan) {
  ControlState c = make();
  c.set_progress(std::nan(""), 0.5, std::numeric_limits<double>::infinity(), 2.5);
  const std::string text = c.handle(static_cast<uint32_t>(ControlOp::kStatus), "{}").text;
  EXPECT_NE(text.find("\"loss\": null, \"train_accuracy\": 0.5, \"samples_per_s\": null, \"param_norm\": 2.5"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_EQ(text.find("inf"), std::string::npos) << text;
  EXPECT_EQ(ControlState::json_figure(0.25), "0.25");
  EXPECT_EQ(ControlState::json_figure(1.0 / 3, 3), "0.333");
}

TEST(Control, StatusWritesOnlyPrintableAscii) {
  ControlState c = make();
  c.set_members({"tcp://127.0.0.1:1\n[peer 0] forged\x1b[2J", "tcp://a\"b\\c", "caf\xc3\xa9", "d"});
  const std::string text = c.handle(static_cast<uint32_t>(ControlOp::kStatus), "{}").text;
  for (char ch : text) ASSERT_TRUE(ch >= 0x20 && ch <= 0x7e) << int(static_cast<unsigned char>(ch)) << " in " << text;
  EXPECT_NE(text.find("\"tcp://127.0.0.1:1\\u000a[peer 0] forged\\u001b[2J\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"tcp://a\\\"b\\\\c\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"caf\\u00c3\\u00a9\""), std::string::npos) << text;
}

TEST(Control, JsonNumber) {
  EXPECT_EQ(ControlState::json_number("{\"a\": 3, \"b\": -2.5e1}", "b"), -25.0);
  EXPECT_EQ(ControlState::json_number("{\"a\": x}", "a"), std::nullopt);
  EXPECT_EQ(ControlState::json_number("{}", "a"), std::nullopt);
}

}  // namespace
}  // namespace gossip::peer
