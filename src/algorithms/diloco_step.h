// Decentralized DiLoCo (Douillard et al. 2023; OpenDiLoCo) with no coordinator. Each peer takes H
// inner steps with its own optimiser from x_start; then every peer's pseudo-gradient
//     Δ_i = x_start − x_i
// is averaged among the peers by the caller (the peers' ring all-reduce, or gossip rounds on the
// topology), and an outer Nesterov step (PyTorch's SGD convention) moves the start:
//     m ← μ·m + Δ̄;   x ← x_start − lr·(Δ̄ + μ·m);   x_start ← x.
// With an exact average (all-reduce) every peer that shares x_start and m ends the outer step with
// the same model. Only this arithmetic lives here; the hook runs the collective.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gossip::peer {

class DilocoStep {
 public:
  DilocoStep(size_t floats, float outer_lr, float outer_momentum);
  // x_start ← x; `reset_momentum`: m ← 0 too (a joiner, a peer that took another's model).
  void start(const float* x, bool reset_momentum);
  bool started() const { return started_; }
  // delta ← x_start − x.
  void pseudo_gradient(const float* x, float* delta) const;
  // The outer step with the peers' averaged pseudo-gradient: m, x and x_start as above.
  void outer_step(const float* mean_delta, float* x);
  // x_start, then m (2·floats values) for checkpoints.
  std::vector<float> save_state() const;
  void restore_state(const std::vector<float>& state, const std::string& who);

 private:
  size_t floats_;
  float lr_, momentum_;
  bool started_ = false;
  std::vector<float> start_;     // x_start
  std::vector<float> momentum_buffer_;  // m
};

}  // namespace gossip::peer
