#include "algorithms/consensus.h"

#include <algorithm>

namespace gossip::peer {

Consensus consensus_distance(RingAllReduce& allreduce, int peers, const float* x, size_t n, std::vector<float>& scratch) {
  scratch.assign(x, x + n);
  allreduce.average(scratch.data(), n);
  double local = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(x[i]) - scratch[i];
    local += d * d;
    norm += double(scratch[i]) * scratch[i];
  }
  float sum[1] = {static_cast<float>(local)};
  allreduce.sum(sum, 1);
  return {sum[0] / peers, norm};
}

namespace {
// Every peer's `mine` (the same count on each, values exact in a float): each peer fills its own
// slots of a zeroed vector and the all-reduce's sum holds them all, peer p's at p·mine.size().
std::vector<float> gather(RingAllReduce& allreduce, int peers, int rank, const std::vector<float>& mine) {
  std::vector<float> v(size_t(peers) * mine.size(), 0.0f);
  std::copy(mine.begin(), mine.end(), v.begin() + size_t(rank) * mine.size());
  allreduce.sum(v.data(), v.size());
  return v;
}
}  // namespace

int64_t agree_min(RingAllReduce& allreduce, int peers, int rank, int64_t value) {
  // value + 1 > 0, so an empty slot could not pass for a value; exact: value < 2^24.
  const std::vector<float> v = gather(allreduce, peers, rank, {static_cast<float>(value + 1)});
  int64_t m = static_cast<int64_t>(v[0]) - 1;
  for (float f : v) m = std::min(m, static_cast<int64_t>(f) - 1);
  return m;
}

bool all_equal(RingAllReduce& allreduce, int peers, int rank, uint32_t value) {
  // The 16-bit halves, each exact in a float.
  const std::vector<float> v = gather(allreduce, peers, rank,
                                      {static_cast<float>(value >> 16), static_cast<float>(value & 0xffffu)});
  for (int p = 1; p < peers; ++p)
    if (v[2 * size_t(p)] != v[0] || v[2 * size_t(p) + 1] != v[1]) return false;
  return true;
}

}  // namespace gossip::peer
