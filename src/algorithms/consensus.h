// Collectives over the ring all-reduce that measure or agree rather than mix: the consensus
// distance Ξ = (1/n)·Σ‖x_i − x̄‖², the smallest of every peer's value and whether every peer holds
// the same value. Every peer must call them at the same point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/collectives.h"

namespace gossip::peer {

struct Consensus {
  double distance = 0;     // Ξ
  double mean_norm2 = 0;   // ‖x̄‖²
  double relative() const { return mean_norm2 > 0 ? distance / mean_norm2 : 0; }
};

// Ξ of this peer's x (n values) and the others'; `scratch` holds x̄ afterwards. The peers first
// compare their models' fingerprints (4 floats per peer): when every peer holds the same model
// (after an exact global average, DiLoCo's outer step with an all-reduce) Ξ is 0 and x̄ = x with
// no model all-reduce.
Consensus consensus_distance(RingAllReduce& allreduce, int peers, int rank, const float* x, size_t n,
                             std::vector<float>& scratch);

// 64 bits that tell models apart: CRC32C of the bytes and a position-weighted sum of the words.
uint64_t model_fingerprint(const float* x, size_t n);

// The smallest of every peer's `value` (−1 ≤ value < 2^24, exact in a float), e.g. the newest
// checkpoint step every peer has.
int64_t agree_min(RingAllReduce& allreduce, int peers, int rank, int64_t value);

// Whether every peer passed the same `value` (e.g. a model's fingerprint); the same answer on
// every peer. Sends 4·peers floats through the all-reduce.
bool all_equal(RingAllReduce& allreduce, int peers, int rank, uint64_t value);

}  // namespace gossip::peer
