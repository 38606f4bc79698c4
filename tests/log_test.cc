#include "common/log.h"

#include <gtest/gtest.h>

namespace gossip {
namespace {

TEST(NumberText, WritesNumbersAsPeopleDo) {
  EXPECT_EQ(number_text(60), "60");
  EXPECT_EQ(number_text(2.5), "2.5");
  EXPECT_EQ(number_text(0.05), "0.05");
  EXPECT_EQ(number_text(1e-7), "1e-07");
  EXPECT_EQ(number_text(3600), "3600");
  EXPECT_EQ(number_text(-3), "-3");
}

TEST(HexByte, TwoLowercaseDigitsAndPrintableIsSpaceToTilde) {
  EXPECT_EQ(hex_byte(0x0a), "0a");
  EXPECT_EQ(hex_byte(0xff), "ff");
  EXPECT_TRUE(is_printable_ascii(' '));
  EXPECT_TRUE(is_printable_ascii('~'));
  EXPECT_FALSE(is_printable_ascii(0x1f));
  EXPECT_FALSE(is_printable_ascii(0x7f));
  EXPECT_FALSE(is_printable_ascii(0xc3));
}

}  // namespace
}  // namespace gossip
