// Gradient tracking (DSGT: Pu & Nedić 2020; Koloskova et al. 2021) for non-iid shards. Next to its
// model every peer keeps a tracker y_i of the peers' average gradient, and its optimiser steps
// along y_i instead of its own gradient g_i:
//     y_i ← Σ_j W_ij·y_j + g_i(t) − g_i(t−1)       (y_i = g_i at the start)
// The tracker is gossiped like the model (its own tag, in the same round), so for a doubly
// stochastic W
//     Σ_i y_i = Σ_i g_i(t)   every step,
// whatever the graph: each y_i approaches the average gradient as the peers agree, which is what
// a peer with a skewed shard is missing. Twice gossip's bytes. Only this arithmetic and the
// tracker's gossip live here; the hook calls track() between the backward pass and the optimiser
// step, and mix() after the model's gossip.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/gossip_step.h"

namespace gossip::peer {

class GradientTracker {
 public:
  GradientTracker(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
                  double max_norm_ratio);
  // g (this step's gradient, host memory) ← y = ȳ + g − g_prev, where ȳ is the tracker as mixed
  // by the last mix() (at the start, or after reset(): y = g).
  void track(float* g);
  // ȳ ← Σ_j W_ij·y_j: one gossip round of the tracker (round `round`, tag 1).
  void mix(uint64_t round);
  // Forgets the tracker (new neighbours, a rejoin): the next track() starts again from y = g,
  // which keeps Σ y = Σ g when every member resets at the same step.
  void reset();
  // ȳ, g_prev, then 1 when started (2·floats + 1 values) for checkpoints.
  std::vector<float> save_state() const;
  void restore_state(const std::vector<float>& state, const std::string& who);

 private:
  GossipStep gossip_;
  size_t floats_;
  bool started_ = false;
  std::vector<float> y_;        // this step's tracker (what mix() sends)
  std::vector<float> mixed_;    // ȳ = Σ_j W_ij·y_j of the last round
  std::vector<float> g_prev_;   // last step's gradient
};

}  // namespace gossip::peer
