// Random-projection sketches for estimating consensus distance without moving whole models.
// A count sketch with k buckets: coordinate i goes to bucket h(i) with sign s(i), both from a
// hash of (seed, i), so every peer computes the same projection S with no shared matrix. S is
// linear, so S(x_i − x̄) = S·x_i − mean_j S·x_j, and E‖S·v‖² = ‖v‖² with relative standard error
// about sqrt(2/k) for one vector (8.8 % at k = 256); the error of Ξ, a mean over n peers,
// shrinks towards sqrt(2/(k·n)) as the peers' deviations decorrelate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gossip::peer {

std::vector<float> count_sketch(const float* x, size_t n, int k, uint64_t seed);

// Consensus distance Ξ = (1/n) Σ‖x_i − x̄‖² of equally long vectors (exact in double), with
// each peer's ‖x_i − x̄‖² and ‖x̄‖².
struct ConsensusFigures {
  double xi = 0;
  double mean_norm2 = 0;
  std::vector<double> distance;  // per peer
  double relative() const { return mean_norm2 > 0 ? xi / mean_norm2 : 0; }
};
ConsensusFigures consensus_figures(const std::vector<std::vector<float>>& x);

}  // namespace gossip::peer
