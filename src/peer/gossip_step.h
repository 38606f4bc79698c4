// One round of symmetric / doubly-stochastic gossip (D-PSGD):
//     x_i ← W_ii·x_i + Σ_j W_ij·x_j
// on any graph of the topology library. The constructor fixes everything; step() only sends,
// receives and mixes (after gloo's AllreduceRing).
#pragma once

#include "peer/collectives.h"
#include "topology/topology.h"

namespace gossip::peer {

class GossipStep {
 public:
  GossipStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s);
  // Mixes x[0, floats) in place with this round's neighbours (host memory).
  void step(uint64_t round, float* x);

 private:
  Transport* t_;  // owned by the peer's main, outlives the step
  topology::Graph graph_;
  size_t floats_;
  size_t chunk_floats_;
  double timeout_s_;
  SnapshotPool pool_;
};

}  // namespace gossip::peer
