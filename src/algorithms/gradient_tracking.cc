#include "algorithms/gradient_tracking.h"

#include <algorithm>

#include "algorithms/saved_state.h"

namespace gossip::peer {

GradientTracker::GradientTracker(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                                 double timeout_s, double max_norm_ratio)
    : gossip_(transport, std::move(graph), floats, chunk_floats, timeout_s, max_norm_ratio, Dtype::kF32, 1),
      floats_(floats),
      y_(floats, 0.0f),
      mixed_(floats, 0.0f),
      g_prev_(floats, 0.0f) {}

void GradientTracker::track(float* g) {
  if (!started_) {
    std::fill(mixed_.begin(), mixed_.end(), 0.0f);
    std::fill(g_prev_.begin(), g_prev_.end(), 0.0f);
    started_ = true;
  }
  float* __restrict y = y_.data();
  const float* __restrict mixed = mixed_.data();
  float* __restrict prev = g_prev_.data();
  for (size_t i = 0; i < floats_; ++i) {
    y[i] = mixed[i] + (g[i] - prev[i]);
    prev[i] = g[i];
    g[i] = y[i];
  }
}

void GradientTracker::mix(uint64_t round) { gossip_.step(round, y_.data(), mixed_.data()); }

void GradientTracker::reset() { started_ = false; }

std::vector<float> GradientTracker::save_state() const { return pack_state(mixed_, g_prev_, started_); }

void GradientTracker::restore_state(const std::vector<float>& state, const std::string& who) {
  unpack_state(state, &mixed_, &g_prev_, &started_, who, "gradient tracker");
}

}  // namespace gossip::peer
