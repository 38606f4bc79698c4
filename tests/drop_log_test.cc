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

}  // namespace
}  // namespace gossip::peer
