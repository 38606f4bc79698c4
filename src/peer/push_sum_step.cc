#include "peer/push_sum_step.h"

#include <algorithm>

namespace gossip::peer {

PushSumStep::PushSumStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                         double timeout_s, bool overlap, int max_staleness)
    : t_(&transport),
      graph_(std::move(graph)),
      floats_(floats),
      chunk_floats_(chunk_floats),
      timeout_s_(timeout_s),
      overlap_(overlap),
      max_staleness_(max_staleness),
      x_(floats, 0.0f) {}

void PushSumStep::init(const float* z) {
  std::copy(z, z + floats_, x_.begin());
  w_ = 1.0;
}

void PushSumStep::set_state(const float* x, double w) {
  std::copy(x, x + floats_, x_.begin());
  w_ = w;
}

void PushSumStep::write_model(float* z) const {
  const float inv = static_cast<float>(1.0 / w_);
  for (size_t i = 0; i < floats_; ++i) z[i] = x_[i] * inv;
}

void PushSumStep::fold(const Expected& e) {
  const VectorRef ref{MessageKind::kPushSum, e.round, 0};
  float* x = x_.data();
  // A message with NaN/Inf chunks is reported and its bad chunks are left out (their share of
  // mass is lost for those coordinates, which beats poisoning every peer downstream).
  w_ += receive_vector(*t_, e.sender, ref, 0, floats_, timeout_s_, [x](size_t i, const float* v, size_t c) {
          float* dst = x + i;
          for (size_t k = 0; k < c; ++k) dst[k] += v[k];
        }).weight;
}

void PushSumStep::step(uint64_t round, float* z) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  const VectorRef ref{MessageKind::kPushSum, round, 0};
  // One pass: apply the local update to the numerator (x ← x + z' − x/w), and split it into the
  // share each out-neighbour gets and the share this peer keeps.
  const float inv = static_cast<float>(1.0 / w_);
  const float self = static_cast<float>(nb.self_weight);
  if (nb.out.size() == 1) {
    const float p = static_cast<float>(nb.out[0].weight);
    auto share = pool_.buffer(floats_);
    float* s = share->data();
    for (size_t i = 0; i < floats_; ++i) {
      const float x = x_[i] + (z[i] - x_[i] * inv);  // the update first: exact when z = x/w
      s[i] = p * x;
      x_[i] = self * x;
    }
    send_vector(*t_, nb.out[0].peer, ref, s, share, 0, floats_, floats_, nb.out[0].weight * w_, chunk_floats_);
  } else {
    for (size_t i = 0; i < floats_; ++i) x_[i] += z[i] - x_[i] * inv;  // the update first: exact when z = x/w
    for (const topology::Link& l : nb.out) {
      auto share = pool_.copy(x_.data(), floats_, static_cast<float>(l.weight));
      send_vector(*t_, l.peer, ref, share->data(), share, 0, floats_, floats_, l.weight * w_, chunk_floats_);
    }
    for (size_t i = 0; i < floats_; ++i) x_[i] *= self;
  }
  w_ *= nb.self_weight;
  for (const topology::Link& l : nb.in) outstanding_.push_back({round, l.peer});

  // Fold what is due (or, with overlap, what is already here).
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    const bool due = !overlap_ || it->round + static_cast<uint64_t>(max_staleness_) <= round;
    if (due || t_->ready(MatchKey{MessageKind::kPushSum, it->sender, it->round, 0})) {
      fold(*it);
      it = outstanding_.erase(it);
    } else {
      ++it;
    }
  }
  write_model(z);
}

void PushSumStep::drain(float* z) {
  while (!outstanding_.empty()) {
    fold(outstanding_.front());
    outstanding_.pop_front();
  }
  write_model(z);
}

}  // namespace gossip::peer
