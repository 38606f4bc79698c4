#include "common/log.h"

#include <gtest/gtest.h>

namespace gossip {
namespace {

TEST(SecondsText, WritesDurationsAsPeopleDo) {
  EXPECT_EQ(seconds_text(60), "60");
  EXPECT_EQ(seconds_text(2.5), "2.5");
  EXPECT_EQ(seconds_text(0.05), "0.05");
  EXPECT_EQ(seconds_text(1e-7), "1e-07");
  EXPECT_EQ(seconds_text(3600), "3600");
}

}  // namespace
}  // namespace gossip
