#include "algorithms/diloco_step.h"

#include <algorithm>

#include "common/error.h"

namespace gossip::peer {

DilocoStep::DilocoStep(size_t floats, float outer_lr, float outer_momentum)
    : floats_(floats), lr_(outer_lr), momentum_(outer_momentum), start_(floats), momentum_buffer_(floats, 0.0f) {}

void DilocoStep::start(const float* x, bool reset_momentum) {
  std::copy(x, x + floats_, start_.begin());
  if (reset_momentum) std::fill(momentum_buffer_.begin(), momentum_buffer_.end(), 0.0f);
  started_ = true;
}

void DilocoStep::pseudo_gradient(const float* x, float* delta) const {
  const float* s = start_.data();
#pragma omp simd
  for (size_t i = 0; i < floats_; ++i) delta[i] = s[i] - x[i];
}

void DilocoStep::outer_step(const float* mean_delta, float* x) {
  float* m = momentum_buffer_.data();
  float* s = start_.data();
  const float mu = momentum_, lr = lr_;
#pragma omp simd
  for (size_t i = 0; i < floats_; ++i) {
    m[i] = mu * m[i] + mean_delta[i];
    s[i] -= lr * (mean_delta[i] + mu * m[i]);
    x[i] = s[i];
  }
}

std::vector<float> DilocoStep::save_state() const {
  std::vector<float> state(start_);
  state.insert(state.end(), momentum_buffer_.begin(), momentum_buffer_.end());
  return state;
}

void DilocoStep::restore_state(const std::vector<float>& state, const std::string& who) {
  if (state.size() != 2 * floats_)
    throw Error(who, "checkpoint's DiLoCo state has " + std::to_string(state.size()) + " floats, expected " +
                         std::to_string(2 * floats_) + " (x_start and the outer momentum)");
  std::copy(state.begin(), state.begin() + floats_, start_.begin());
  std::copy(state.begin() + floats_, state.end(), momentum_buffer_.begin());
  started_ = true;
}

}  // namespace gossip::peer
