// CHOCO-SGD's gossip (Koloskova, Stich & Jaggi 2019, Algorithm 2): every peer keeps a public copy
// x̂_i of its model that it and its neighbours update alike, and sends only the compressed
// difference
//     q_i = Q(x_i − x̂_i);   x̂_j ← x̂_j + q_j  for j = i and every neighbour;
//     x_i ← x_i + γ·Σ_j W_ij·(x̂_j − x̂_i).
// Error feedback lives in x̂: what Q dropped this round is still in x_i − x̂_i next round. Instead
// of one copy per neighbour each peer keeps x̂_i and s_i = Σ_j W_ij·x̂_j (self included), which
// the q's update the same way (Koloskova et al. 2020), so memory is two vectors whatever the
// degree. For a doubly stochastic W the average of the x_i is kept (up to float rounding).
//
// The copies start at 0 and the first round after reset() sends the values themselves (f32, no
// compression), so every x̂ is exact from there; the hook resets at a view change (the graph
// changes with n), a rejoin and a join, on every member at the same round. When every peer
// holds the very same model (a run's start with `init: same`), start_from() sets the copies to
// it instead and that round is compressed too. Needs a static graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/compressor.h"
#include "topology/topology.h"

namespace gossip::peer {

class ChocoStep {
 public:
  // gamma: the consensus step size γ. max_norm_ratio > 0: a neighbour's decoded q whose norm
  // exceeds that many times this peer's own values over the same span (plus a small floor) is an
  // outlier, reported and not added (as a NaN one is: that neighbour's copy here then lags).
  ChocoStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
            double max_norm_ratio, Compressor compressor, float gamma);
  // One round on x (host memory, in place): send q_i, add the neighbours' q_j, move x.
  void step(uint64_t round, float* x);
  // Forgets every public copy (x̂ = s = 0); the next round sends uncompressed values.
  void reset();
  bool dense_next() const { return dense_; }
  // x̂ = s = x, the next round compressed. Every peer must call it with the same x, at the same
  // round (the caller checks that they hold the same model).
  void start_from(const float* x);
  // x̂, s, then 1 when the next round is uncompressed (2·floats + 1 values) for checkpoints.
  std::vector<float> save_state() const;
  void restore_state(const std::vector<float>& state, const std::string& who);

 private:
  void send_own(const topology::Neighbours& nb, uint64_t round, const float* x, SendGuard& guard);
  void receive_from(const topology::Link& from, uint64_t round, const float* x);
  // Adds a verified chunk of `from` at `pos` to s; returns the span it covered (0: dropped).
  size_t fold(const InMessage& m, const topology::Link& from, uint64_t round, size_t pos, const float* x);
  bool outlier(double theirs, const float* x, size_t span) const;

  Transport* t_;  // owned by the peer's Node (or a test), outlives the step
  topology::Graph graph_;
  size_t floats_, chunk_floats_;
  double timeout_s_, max_norm_ratio_;
  Compressor compressor_;
  float gamma_;
  bool dense_ = true;
  std::vector<float> hat_;  // x̂_i
  std::vector<float> mix_;  // s_i = Σ_j W_ij·x̂_j
  std::vector<float> q_;    // this round's decoded q_i (dense)
  std::vector<float> diff_;  // x − x̂ over one span
  std::vector<std::vector<uint32_t>> encoded_;  // this round's chunks, sent zero-copy
  std::vector<uint32_t> scratch_;
  CompressedChunk chunk_;
};

}  // namespace gossip::peer
