#include "algorithms/consensus.h"

#include <algorithm>
#include <bit>

#include "wire/wire_format.h"

namespace gossip::peer {

uint64_t model_fingerprint(const float* x, size_t n) {
  uint32_t weighted = 0;  // Σ word_i·(2i + 1) mod 2³²: odd factors, so any single changed word shows
  for (size_t i = 0; i < n; ++i) weighted += std::bit_cast<uint32_t>(x[i]) * static_cast<uint32_t>(2 * i + 1);
  return (uint64_t{crc32c(x, n * sizeof(float))} << 32) | weighted;
}

Consensus consensus_distance(RingAllReduce& allreduce, int peers, int rank, const float* x, size_t n,
                             std::vector<float>& scratch) {
  scratch.assign(x, x + n);
  double xi = 0;  // stays 0, and x̄ = x, when every peer holds these very bytes
  if (!all_equal(allreduce, peers, rank, model_fingerprint(x, n))) {
    allreduce.average(scratch.data(), n);
    double local = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = double(x[i]) - scratch[i];
      local += d * d;
    }
    float sum[1] = {static_cast<float>(local)};
    allreduce.sum(sum, 1);
    xi = sum[0] / peers;
  }
  double norm = 0;
  for (size_t i = 0; i < n; ++i) norm += double(scratch[i]) * scratch[i];
  return {xi, norm};
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

bool all_equal(RingAllReduce& allreduce, int peers, int rank, uint64_t value) {
  std::vector<float> mine;  // the 16-bit quarters, each exact in a float
  for (int shift = 48; shift >= 0; shift -= 16) mine.push_back(static_cast<float>((value >> shift) & 0xffffu));
  const std::vector<float> v = gather(allreduce, peers, rank, mine);
  for (int p = 1; p < peers; ++p)  // against peer 0's slots, which every peer sees alike
    if (!std::equal(v.begin(), v.begin() + mine.size(), v.begin() + size_t(p) * mine.size())) return false;
  return true;
}

}  // namespace gossip::peer
