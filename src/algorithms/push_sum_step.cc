#include "algorithms/push_sum_step.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "kernels/bf16.h"

namespace gossip::peer {

PushSumStep::PushSumStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                         double timeout_s, bool overlap, int max_staleness, Dtype wire)
    : t_(&transport),
      graph_(std::move(graph)),
      floats_(floats),
      chunk_floats_(chunk_floats),
      timeout_s_(timeout_s),
      overlap_(overlap),
      max_staleness_(max_staleness),
      wire_(wire),
      x_(floats, 0.0f) {}

void PushSumStep::init(const float* z) {
  std::copy(z, z + floats_, x_.begin());
  w_ = 1.0;
  drain_discard();
}

void PushSumStep::drain_discard() {
  outstanding_.clear();
  sent_on_link_.clear();
  folded_from_.clear();
  finished_.clear();
  started_ = false;
}

const std::map<int, uint64_t>& PushSumStep::link_totals() {
  const int n = t_->size();
  if (totals_for_n_ != n || totals_from_ != first_round_) {
    link_totals_.clear();
    for (uint64_t r = first_round_; r < total_rounds_; ++r)
      for (const topology::Link& l : topology::neighbours(graph_, n, t_->rank(), static_cast<int64_t>(r)).in)
        ++link_totals_[l.peer];
    totals_for_n_ = n;
    totals_from_ = first_round_;
  }
  return link_totals_;
}

void PushSumStep::fold_arrived() {
  for (auto [sender, total] : link_totals())
    for (uint64_t& next = folded_from_[sender];
         next < total && t_->ready(MatchKey{MessageKind::kPushSum, sender, next, 0}); ++next)
      fold({next, sender});
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
  // A message with NaN/Inf chunks is reported and its bad chunks are left out (their share of
  // mass is lost for those coordinates, which beats poisoning every peer downstream).
  const VectorRef ref{MessageKind::kPushSum, e.round, 0, wire_};
  w_ += receive_vector(*t_, e.sender, ref, 0, floats_, timeout_s_, [this](const InMessage& m) {
          float* __restrict dst = x_.data() + m.header.offset;
          if (wire_ == Dtype::kBf16) {
            const uint16_t* __restrict v = m.bf16();
            for (size_t k = 0; k < m.count; ++k) dst[k] += kernels::from_bf16(v[k]);
          } else {
            const float* __restrict v = m.data;
            for (size_t k = 0; k < m.count; ++k) dst[k] += v[k];
          }
        }).weight;
}

// Applies the local update to the numerator and sends each out-neighbour its share.
void PushSumStep::send_shares(const topology::Neighbours& nb, uint64_t round, const float* z) {
  // The round field: the round, or (asynchronous) this link's message number.
  auto ref = [&](int peer) {
    return VectorRef{MessageKind::kPushSum, asynchronous() ? sent_on_link_[peer]++ : round, 0, wire_};
  };
  // One pass: apply the local update to the numerator (x ← x + z' − x/w), and split it into the
  // share each out-neighbour gets and the share this peer keeps. Asynchronous mode scales the
  // update by w (x ← x + w·(z' − x/w)), so the model moves by the local step whatever w is: a
  // peer that has received nothing for a while has a small w, and SGP's plain update would move
  // its model by η/w times the step (which diverged here within 12 steps).
  const float inv = static_cast<float>(1.0 / w_);
  const float gain = asynchronous() ? static_cast<float>(w_) : 1.0f;
  const float self = static_cast<float>(nb.self_weight);
  const bool bf16 = wire_ == Dtype::kBf16;
  if (nb.out.size() == 1 && !bf16) {
    const float p = static_cast<float>(nb.out[0].weight);
    auto share = pool_.buffer(floats_);
    float* s = share->data();
    for (size_t i = 0; i < floats_; ++i) {
      const float x = x_[i] + gain * (z[i] - x_[i] * inv);  // the update first: exact when z = x/w
      s[i] = p * x;
      x_[i] = self * x;
    }
    send_vector(*t_, nb.out[0].peer, ref(nb.out[0].peer), s, share, 0, floats_, floats_, nb.out[0].weight * w_,
                chunk_floats_);
  } else if (nb.out.size() == 1) {  // bf16: what rounding takes off the share stays here
    const float p = static_cast<float>(nb.out[0].weight);
    auto share = pool_.bf16_buffer(floats_);
    uint16_t* s = share->data();
    for (size_t i = 0; i < floats_; ++i) {
      const float x = x_[i] + gain * (z[i] - x_[i] * inv);
      const float sent = p * x;
      s[i] = kernels::to_bf16(sent);
      x_[i] = self * x + (sent - kernels::from_bf16(s[i]));
    }
    send_vector(*t_, nb.out[0].peer, ref(nb.out[0].peer), s, share, 0, floats_, floats_, nb.out[0].weight * w_,
                chunk_floats_);
  } else {
    for (size_t i = 0; i < floats_; ++i) x_[i] += gain * (z[i] - x_[i] * inv);  // the update first: exact when z = x/w
    if (bf16) residual_.assign(floats_, 0.0f);
    for (const topology::Link& l : nb.out) {
      const float p = static_cast<float>(l.weight);
      if (bf16) {
        auto share = pool_.bf16_buffer(floats_);
        uint16_t* s = share->data();
        for (size_t i = 0; i < floats_; ++i) {
          const float sent = p * x_[i];
          s[i] = kernels::to_bf16(sent);
          residual_[i] += sent - kernels::from_bf16(s[i]);
        }
        send_vector(*t_, l.peer, ref(l.peer), s, share, 0, floats_, floats_, l.weight * w_, chunk_floats_);
      } else {
        auto share = pool_.copy(x_.data(), floats_, p);
        send_vector(*t_, l.peer, ref(l.peer), share->data(), share, 0, floats_, floats_, l.weight * w_, chunk_floats_);
      }
    }
    for (size_t i = 0; i < floats_; ++i) x_[i] *= self;
    if (bf16)
      for (size_t i = 0; i < floats_; ++i) x_[i] += residual_[i];
  }
}

void PushSumStep::step(uint64_t round, float* z) {
  topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  if (!started_) {
    started_ = true;
    first_round_ = round;
  }
  if (asynchronous()) {
    // An out-neighbour that said it has finished its rounds gets a message without mass (its
    // share stays here), so that the numbering of every link still adds up.
    for (topology::Link& l : nb.out) {
      if (!finished_.count(l.peer) && t_->ready(MatchKey{MessageKind::kPushSum, l.peer, 0, kDoneTag}))
        finished_.insert(l.peer);
      if (finished_.count(l.peer)) {
        nb.self_weight += l.weight;
        l.weight = 0;
      }
    }
  }
  send_shares(nb, round, z);
  w_ *= nb.self_weight;
  if (asynchronous()) {  // whatever has arrived on each link, in order; never wait
    fold_arrived();
    write_model(z);
    return;
  }
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
  if (asynchronous() && started_) {
    // Tell every peer that pushes to this one that it has finished (an empty vector with
    // kDoneTag), then fold what is still on its way.
    for (auto [sender, total] : link_totals())
      if (total > 0) {
        static const float kNothing = 0;
        send_vector(*t_, sender, {MessageKind::kPushSum, 0, kDoneTag}, &kNothing, nullptr, 0, 0, 0, 0, chunk_floats_);
      }
    for (auto [sender, total] : link_totals())
      for (uint64_t& next = folded_from_[sender]; next < total; ++next) fold({next, sender});
  }
  while (!outstanding_.empty()) {
    fold(outstanding_.front());
    outstanding_.pop_front();
  }
  write_model(z);
}

std::vector<float> PushSumStep::save_state() const {
  std::vector<float> s = x_;
  float halves[2];
  std::memcpy(halves, &w_, sizeof(w_));
  s.insert(s.end(), halves, halves + 2);
  return s;
}

void PushSumStep::restore_state(const std::vector<float>& state, const std::string& who) {
  if (state.size() != floats_ + 2)
    throw Error(who, "checkpoint's push-sum state has " + std::to_string(state.size()) + " floats, expected " +
                         std::to_string(floats_ + 2));
  double w;
  std::memcpy(&w, state.data() + floats_, sizeof(w));
  init(state.data());
  set_state(state.data(), w);
}

}  // namespace gossip::peer
