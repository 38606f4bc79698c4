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

int64_t agree_min(RingAllReduce& allreduce, int peers, int rank, int64_t value) {
  std::vector<float> v(peers, 0.0f);
  v[rank] = static_cast<float>(value + 1);  // exact: value < 2^24
  allreduce.sum(v.data(), v.size());
  int64_t m = static_cast<int64_t>(v[0]) - 1;
  for (float f : v) m = std::min(m, static_cast<int64_t>(f) - 1);
  return m;
}

bool all_equal(RingAllReduce& allreduce, int peers, int rank, uint32_t value) {
  // Each peer fills its own two slots with the 16-bit halves (exact in a float); the sum then
  // holds every peer's value.
  std::vector<float> v(2 * size_t(peers), 0.0f);
  v[2 * size_t(rank)] = static_cast<float>(value >> 16);
  v[2 * size_t(rank) + 1] = static_cast<float>(value & 0xffffu);
  allreduce.sum(v.data(), v.size());
  for (int p = 1; p < peers; ++p)
    if (v[2 * size_t(p)] != v[0] || v[2 * size_t(p) + 1] != v[1]) return false;
  return true;
}

}  // namespace gossip::peer
