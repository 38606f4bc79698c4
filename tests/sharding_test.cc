#include "model/sharding.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace gossip::model {
namespace {

class ShardingTest : public ::testing::TestWithParam<int> {};

TEST_P(ShardingTest, IidCoversEveryRowOnce) {
  const int n = GetParam();
  const int64_t rows = 1003;
  std::multiset<int64_t> all;
  for (int r = 0; r < n; ++r) {
    auto s = shard_iid(rows, n, r, 7);
    EXPECT_NEAR(double(s.size()), double(rows) / n, 1.0);
    all.insert(s.begin(), s.end());
  }
  ASSERT_EQ(all.size(), size_t(rows));
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), size_t(rows));
}

TEST_P(ShardingTest, DirichletCoversEveryRowOnce) {
  const int n = GetParam();
  std::vector<int32_t> labels(2000);
  std::mt19937_64 rng(1);
  for (auto& l : labels) l = rng() % 10;
  std::multiset<int64_t> all;
  for (int r = 0; r < n; ++r) {
    auto s = shard_dirichlet(labels, 10, n, r, 0.3, 5);
    all.insert(s.begin(), s.end());
  }
  ASSERT_EQ(all.size(), labels.size());
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), labels.size());
}

INSTANTIATE_TEST_SUITE_P(PeerCounts, ShardingTest, ::testing::Values(1, 2, 3, 8, 16));

TEST(Sharding, SmallAlphaSkewsLabels) {
  std::vector<int32_t> labels(5000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i % 10;
  auto dominant_share = [&](double alpha) {
    double total = 0;
    for (int r = 0; r < 4; ++r) {
      auto s = shard_dirichlet(labels, 10, 4, r, alpha, 3);
      std::vector<int> count(10);
      for (auto i : s) count[labels[i]]++;
      total += s.empty() ? 0 : double(*std::max_element(count.begin(), count.end())) / s.size();
    }
    return total / 4;
  };
  EXPECT_GT(dominant_share(0.05), 0.4);
  EXPECT_LT(dominant_share(1000), 0.15);
}

TEST(Sharding, SameSeedSameSplitAndBadRank) {
  EXPECT_EQ(shard_iid(100, 4, 2, 9), shard_iid(100, 4, 2, 9));
  EXPECT_NE(shard_iid(100, 4, 2, 9), shard_iid(100, 4, 2, 10));
  EXPECT_THROW(shard_iid(100, 4, 4, 9), std::exception);
  EXPECT_THROW(shard_dirichlet({0, 1}, 2, 2, 0, 0.0, 1), std::exception);
}

}  // namespace
}  // namespace gossip::model
