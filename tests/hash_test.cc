// FNV-1a against the published 64-bit test vectors.
#include "common/hash.h"

#include <gtest/gtest.h>

namespace gossip {
namespace {

TEST(Fnv1a, MatchesThePublishedVectors) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(fnv1a("ab"), fnv1a("ba"));
}

}  // namespace
}  // namespace gossip
