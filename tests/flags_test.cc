#include "common/flags.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace gossip {
namespace {

Flags make() {
  Flags f("prog");
  f.add_string("config", "file");
  f.add_string("rank", "rank", "0");
  f.add_bool("json", "json output");
  return f;
}

TEST(Flags, ParsesSpaceAndEqualsForms) {
  Flags f = make();
  const char* argv[] = {"prog", "--config", "a.yaml", "--rank=3", "--json", "pos"};
  f.parse(6, argv);
  EXPECT_EQ(f.get_string("config"), "a.yaml");
  EXPECT_EQ(f.get_int("rank"), 3);
  EXPECT_TRUE(f.get_bool("json"));
  ASSERT_EQ(f.positional().size(), 1u);
  EXPECT_EQ(f.positional()[0], "pos");
}

TEST(Flags, FlagsOnlyProgramsStopAtHelpAndRefusePositionals) {
  Flags f = make();
  f.add_bool("help", "print this help");
  const char* help[] = {"prog", "--help"};
  testing::internal::CaptureStdout();
  EXPECT_FALSE(f.parse_flags_only(2, help));
  EXPECT_NE(testing::internal::GetCapturedStdout().find("--rank"), std::string::npos);
  Flags g = make();
  g.add_bool("help", "print this help");
  const char* extra[] = {"prog", "--rank", "2", "stray"};
  try {
    g.parse_flags_only(4, extra);
    FAIL() << "a positional argument was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected argument 'stray'"), std::string::npos) << e.what();
  }
  Flags h = make();
  h.add_bool("help", "print this help");
  const char* fine[] = {"prog", "--rank", "2"};
  EXPECT_TRUE(h.parse_flags_only(3, fine));
  EXPECT_EQ(h.get_int("rank"), 2);
}

TEST(Flags, DefaultsAndMissing) {
  Flags f = make();
  const char* argv[] = {"prog"};
  f.parse(1, argv);
  EXPECT_EQ(f.get_int("rank"), 0);
  EXPECT_FALSE(f.get_bool("json"));
  EXPECT_THROW(f.get_string("config"), Error);
}

TEST(Flags, UnknownFlagNamesIt) {
  Flags f = make();
  const char* argv[] = {"prog", "--rnak", "2"};
  try {
    f.parse(3, argv);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--rnak"), std::string::npos);
  }
}

TEST(Flags, BadIntegerAndMissingValue) {
  Flags f = make();
  const char* argv[] = {"prog", "--rank", "x1"};
  f.parse(3, argv);
  EXPECT_THROW(f.get_int("rank"), Error);
  Flags g = make();
  const char* argv2[] = {"prog", "--config"};
  EXPECT_THROW(g.parse(2, argv2), Error);
}

}  // namespace
}  // namespace gossip
