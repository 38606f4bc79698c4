// The comm thread's drop log: escaped, globally rate-limited, bounded per-sender table, and a
// summary of what was not logged.
#include "transport/zmq/drop_log.h"

#include <gtest/gtest.h>

#include <string>

#include "common/log.h"

namespace gossip::peer {
namespace {

TEST(EscapeForLog, ControlBytesAndNewlinesBecomeVisibleEscapes) {
  EXPECT_EQ(escape_for_log("r12"), "r12");
  EXPECT_EQ(escape_for_log("a\nb"), "a\\x0ab");
  EXPECT_EQ(escape_for_log("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(escape_for_log("back\\slash"), "back\\\\slash");
  EXPECT_EQ(escape_for_log(std::string("\0\xff", 2)), "\\x00\\xff");
  const std::string long_one(100, 'x');
  EXPECT_EQ(escape_for_log(long_one, 10), "xxxxxxxxxx...(90 more bytes)");
}

TEST(DropLog, ManySendersGiveABoundedNumberOfLinesAndABoundedTable) {
  DropLog drops;
  auto t = DropLog::Clock::now();
  for (int i = 0; i < 5000; ++i) {
    drops.dropped("peer 0: ", "sender-" + std::to_string(i), "garbage", t);
    t += std::chrono::milliseconds(1);  // 5 s: within one window
  }
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerWindow));
  EXPECT_LE(drops.senders_tracked(), DropLog::kMaxSenders);
  drops.tick("peer 0: ", t + DropLog::kWindow);  // the window ends: one summary line
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerWindow) + 1);
  drops.tick("peer 0: ", t + 2 * DropLog::kWindow + std::chrono::seconds(1));  // nothing suppressed: no line
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerWindow) + 1);
}

TEST(DropLog, OneSenderCannotTakeTheWholeBudget) {
  DropLog drops;
  const auto t = DropLog::Clock::now();
  for (int i = 0; i < 100; ++i) drops.dropped("", "noisy", "garbage", t);
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerSender));
  drops.dropped("", "other", "garbage", t);
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerSender) + 1);
}

TEST(DropLog, RefusalsHaveTheirOwnBudgetAndAreSummarised) {
  DropLog drops;
  const auto t = DropLog::Clock::now();
  for (int i = 0; i < 50; ++i) drops.dropped("", "s" + std::to_string(i), "garbage", t);
  for (int i = 0; i < 50; ++i) drops.refused("", "closed a connection", t);
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerWindow + DropLog::kRefusalLinesPerWindow));
  drops.tick("", t + DropLog::kWindow);
  EXPECT_EQ(drops.lines_logged(), static_cast<uint64_t>(DropLog::kLinesPerWindow + DropLog::kRefusalLinesPerWindow + 1));
}

// Kept per member connection ("r<id>"): how many were dropped and the last reason; anything
// else (a joiner's "j<nonce>", garbage, "r01", an id past 2^24) is not kept.
TEST(DropsByMember, CountsAndTheLastReasonPerMemberConnection) {
  DropsByMember drops;
  EXPECT_EQ(drops.of(1), "");
  drops.note("r1", "garbage");
  EXPECT_EQ(drops.of(1), "1 message from connection 'r1' was dropped here, the last: garbage");
  drops.note("r1", "another model shape?");
  drops.note("r2", "a bad checksum");
  EXPECT_EQ(drops.of(1), "2 messages from connection 'r1' were dropped here, the last: another model shape?");
  EXPECT_EQ(drops.of(2), "1 message from connection 'r2' was dropped here, the last: a bad checksum");
  for (const char* other : {"j77", "x1", "r", "r01", "r1x", "r16777216", "r999999999", ""}) drops.note(other, "?");
  EXPECT_EQ(drops.of(0), "");
  EXPECT_EQ(drops.of(77), "");
  EXPECT_EQ(drops.of(16777216), "");
  EXPECT_NE(drops.of(1).find("2 messages"), std::string::npos) << "r01 and r1x are not r1";
  drops.note("r16777215", "the largest id");
  EXPECT_NE(drops.of(16777215), "");
}

// Heartbeats with another settings digest: noted once (true the first time), and said after
// the drops, or alone.
TEST(DropsByMember, OtherSharedSettingsAreSaidOnceAfterTheDrops) {
  DropsByMember drops;
  const std::string other = "its heartbeats say it was started with other shared settings than this peer";
  EXPECT_TRUE(drops.note_other_settings(4));
  EXPECT_FALSE(drops.note_other_settings(4));
  EXPECT_EQ(drops.of(4).rfind(other, 0), 0u) << drops.of(4);
  drops.note("r4", "garbage");
  EXPECT_EQ(drops.of(4).rfind("1 message from connection 'r4' was dropped here, the last: garbage; and " + other, 0), 0u)
      << drops.of(4);
  EXPECT_EQ(drops.of(5), "");
}

TEST(DropsByMember, TheTableIsBounded) {
  DropsByMember drops;
  for (size_t i = 0; i < DropsByMember::kMaxMembers + 10; ++i) drops.note("r" + std::to_string(i), "garbage");
  EXPECT_EQ(drops.of(0), "") << "cleared when full";
  EXPECT_NE(drops.of(static_cast<int>(DropsByMember::kMaxMembers + 9)), "");
}

}  // namespace
}  // namespace gossip::peer
