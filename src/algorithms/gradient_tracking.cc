#include "algorithms/gradient_tracking.h"

#include <algorithm>

#include "algorithms/saved_state.h"

namespace gossip::peer {

GradientTracker::GradientTracker(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                                 double timeout_s, double max_norm_ratio)
    : gossip_(transport, std::move(graph), floats, chunk_floats, timeout_s, max_norm_ratio, Dtype::kF32, 1),
      floats_(floats),
      send_(floats, 0.0f),
      mixed_(floats, 0.0f),
      g_prev_(floats, 0.0f) {}

void GradientTracker::track(float* g, uint64_t round) {
  if (!started_) {
    std::fill(mixed_.begin(), mixed_.end(), 0.0f);
    std::fill(g_prev_.begin(), g_prev_.end(), 0.0f);
    started_ = true;
  }
  if (prepared_round_ != round) {  // a retried round sends what it sent before
    float* __restrict send = send_.data();
    const float* __restrict mixed = mixed_.data();
    float* __restrict prev = g_prev_.data();
    for (size_t i = 0; i < floats_; ++i) {
      send[i] = mixed[i] + (g[i] - prev[i]);
      prev[i] = g[i];
    }
    prepared_round_ = round;
  }
  gossip_.step(round, send_.data(), mixed_.data());
  prepared_round_.reset();
  std::copy(mixed_.begin(), mixed_.end(), g);
}

void GradientTracker::reset() {
  started_ = false;
  prepared_round_.reset();
}

std::vector<float> GradientTracker::save_state() const { return pack_state(mixed_, g_prev_, started_); }

void GradientTracker::restore_state(const std::vector<float>& state, const std::string& who) {
  unpack_state(state, &mixed_, &g_prev_, &started_, who, "gradient tracker");
  prepared_round_.reset();
}

}  // namespace gossip::peer
