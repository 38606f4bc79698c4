// Gradient tracking (DSGT: Pu & Nedić 2020; Koloskova et al. 2021) for non-iid shards, in its
// adapt-then-combine form (ATC-DIGing: Nedić, Olshevsky & Shi 2017). Next to its model every peer
// keeps a tracker y_i of the peers' average gradient, and its optimiser steps along y_i instead of
// its own gradient g_i:
//     y_i ← Σ_j W_ij·(y_j + g_j(t) − g_j(t−1))      (y_j = g_j(t−1) = 0 before the first step)
// The tracker is gossiped like the model (its own tag), one round per step between the backward
// pass and the optimiser step, so for a doubly stochastic W
//     Σ_i y_i = Σ_i g_i(t)   every step,
// whatever the graph: each y_i approaches the average gradient as the peers agree, which is what
// a peer with a skewed shard is missing. Mixing the fresh gradient difference before stepping
// along it (rather than adding it after the mix, y_i ← Σ_j W_ij·y_j + g_i(t) − g_i(t−1)) spreads
// each batch's noise over the neighbours at once; over 8 seeds it closed a little more of
// gossip's gap to all-reduce, within the seeds' noise (docs/benchmarks.md). Twice gossip's
// bytes. Only this arithmetic and the tracker's gossip live here; the hook calls track() between
// the backward pass and the optimiser step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/gossip_step.h"

namespace gossip::peer {

class GradientTracker {
 public:
  GradientTracker(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
                  double max_norm_ratio);
  // g (this step's gradient, host memory) ← y = Σ_j W_ij·(y_j + g_j − g_prev_j): one gossip round
  // of the tracker (round `round`, tag 1). Interrupted (a view change), it leaves g as it was and
  // may be called again for the same round, which sends the same values.
  void track(float* g, uint64_t round);
  // Forgets the tracker (new neighbours, a rejoin): the next track() starts again from y = 0 and
  // g_prev = 0, which keeps Σ y = Σ g when every member resets at the same step.
  void reset();
  // y (the last mixed tracker), g_prev, then 1 when started (2·floats + 1 values) for checkpoints.
  std::vector<float> save_state() const;
  void restore_state(const std::vector<float>& state, const std::string& who);

 private:
  GossipStep gossip_;
  size_t floats_;
  bool started_ = false;
  std::optional<uint64_t> prepared_round_;  // the round whose values send_ holds, until sent
  std::vector<float> send_;     // y + g − g_prev of this round (what the round sends)
  std::vector<float> mixed_;    // y = Σ_j W_ij·send_j of the last round
  std::vector<float> g_prev_;   // last step's gradient
};

}  // namespace gossip::peer
