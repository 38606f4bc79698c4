#include "model/sharding.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace gossip::model {
namespace {
void check(int n, int rank) {
  if (n <= 0 || rank < 0 || rank >= n)
    throw Error("sharding", "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(n - 1));
}
}  // namespace

std::vector<int64_t> shard_iid(int64_t rows, int n, int rank, uint64_t seed) {
  check(n, rank);
  std::vector<int64_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  const int64_t begin = rows * rank / n, end = rows * (rank + 1) / n;
  return {all.begin() + begin, all.begin() + end};
}

std::vector<int64_t> shard_dirichlet(const std::vector<int32_t>& labels, int classes, int n, int rank,
                                     double alpha, uint64_t seed) {
  check(n, rank);
  if (!(alpha > 0)) throw Error("sharding", "dirichlet_alpha must be > 0");
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> by_class(classes);
  for (size_t i = 0; i < labels.size(); ++i) by_class.at(labels[i]).push_back(static_cast<int64_t>(i));
  std::vector<int64_t> mine;
  std::gamma_distribution<double> gamma(alpha, 1.0);
  for (auto& idx : by_class) {
    std::shuffle(idx.begin(), idx.end(), rng);
    std::vector<double> p(n);
    double sum = 0;
    for (double& v : p) sum += (v = gamma(rng));
    if (sum <= 0) p.assign(n, 1.0), sum = n;
    // Cumulative cut points, so the parts cover every row exactly once.
    double acc = 0;
    int64_t begin = 0;
    for (int k = 0; k < n; ++k) {
      acc += p[k] / sum;
      const int64_t end = k + 1 == n ? static_cast<int64_t>(idx.size())
                                     : static_cast<int64_t>(acc * static_cast<double>(idx.size()));
      if (k == rank) mine.insert(mine.end(), idx.begin() + begin, idx.begin() + std::max(begin, end));
      begin = std::max(begin, end);
    }
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

}  // namespace gossip::model
