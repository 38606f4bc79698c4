// Splitting a training set across peers. Every peer computes the same split from the same seed, so
// no coordinator hands out shards.
#pragma once

#include <cstdint>
#include <vector>

namespace gossip::model {

// iid: a seeded shuffle cut into n near-equal parts. Returns shard `rank` (row indices).
std::vector<int64_t> shard_iid(int64_t rows, int n, int rank, uint64_t seed);

// non-iid: for each class, proportions over the n peers drawn from Dirichlet(alpha); smaller
// alpha means more skew. Returns shard `rank`.
std::vector<int64_t> shard_dirichlet(const std::vector<int32_t>& labels, int classes, int n, int rank,
                                     double alpha, uint64_t seed);

}  // namespace gossip::model
