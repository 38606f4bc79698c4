#include "control/sketch.h"

#include "common/error.h"
#include "common/random.h"

namespace gossip::peer {
namespace {
uint64_t mix(uint64_t z) { return splitmix64_hash(z); }
}  // namespace

std::vector<float> count_sketch(const float* x, size_t n, int k, uint64_t seed) {
  if (k <= 0) throw Error("sketch", "k must be positive");
  std::vector<double> acc(k, 0.0);
  const uint64_t key = mix(seed);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = mix(key ^ i);
    const double v = x[i];
    acc[h % static_cast<uint64_t>(k)] += (h >> 63) ? v : -v;
  }
  return {acc.begin(), acc.end()};
}

ConsensusFigures consensus_figures(const std::vector<std::vector<float>>& x) {
  ConsensusFigures f;
  const size_t n = x.size();
  if (n == 0) return f;
  const size_t d = x[0].size();
  for (const auto& v : x)
    if (v.size() != d) throw Error("consensus", "peers sent vectors of different lengths (another model shape?)");
  std::vector<double> mean(d, 0.0);
  for (const auto& v : x)
    for (size_t i = 0; i < d; ++i) mean[i] += v[i];
  for (double& m : mean) m /= static_cast<double>(n);
  for (double m : mean) f.mean_norm2 += m * m;
  for (const auto& v : x) {
    double s = 0;
    for (size_t i = 0; i < d; ++i) s += (v[i] - mean[i]) * (v[i] - mean[i]);
    f.distance.push_back(s);
    f.xi += s / static_cast<double>(n);
  }
  return f;
}

}  // namespace gossip::peer
