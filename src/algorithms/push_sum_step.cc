#include "algorithms/push_sum_step.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

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
      x_(*host_, floats) {
  host_->fill(x_.get(), 0.0f, floats_);
}

void PushSumStep::init(const float* z, kernels::Backend* device) {
  kernels::Backend* where = device && !device->is_host() ? device : host_.get();
  if (where != backend_) {
    backend_ = where;
    x_ = kernels::DeviceArray<float>(*backend_, floats_);
    device_shares_.clear();
    staging_ = on_device() ? kernels::DeviceArray<float>(*backend_, floats_) : kernels::DeviceArray<float>();
  }
  backend_->scale_copy(floats_, 1.0f, z, x_.get());
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

void PushSumStep::set_state(const float* host_x, double w) {
  backend_->upload(x_.get(), host_x, floats_ * sizeof(float));
  w_ = w;
}

std::vector<float> PushSumStep::numerator() const {
  std::vector<float> x(floats_);
  backend_->download(x.data(), x_.get(), floats_ * sizeof(float));
  return x;
}

void PushSumStep::write_model(float* z) { backend_->scale_copy(floats_, static_cast<float>(1.0 / w_), x_.get(), z); }

// Folds one chunk of a message into the numerator (on a device: uploaded into the staging buffer
// first, at its own offset; the stream orders it after the previous chunk's fold).
void PushSumStep::add_chunk(const InMessage& m) {
  const bool bf16 = wire_ == Dtype::kBf16;
  const void* values = m.data;
  if (on_device()) {
    void* stage = reinterpret_cast<char*>(staging_.get()) + m.header.offset * element_bytes(wire_);
    backend_->upload(stage, m.data, m.bytes());
    values = stage;
  }
  backend_->accumulate(x_.get() + m.header.offset, values, m.count, bf16);
}

void PushSumStep::fold(const Expected& e) {
  // A message with NaN/Inf chunks is reported and its bad chunks are left out (their share of
  // mass is lost for those coordinates, which beats poisoning every peer downstream).
  const VectorRef ref{MessageKind::kPushSum, e.round, 0, wire_};
  w_ += receive_vector(*t_, e.sender, ref, 0, floats_, floats_, timeout_s_, [this](const InMessage& m) { add_chunk(m); }).weight;
}

// Applies the local update to the numerator and sends each out-neighbour its share.
void PushSumStep::send_shares(const topology::Neighbours& nb, uint64_t round, const float* z) {
  // The round field: the round, or (asynchronous) this link's message number.
  auto ref = [&](int peer) {
    return VectorRef{MessageKind::kPushSum, asynchronous() ? sent_on_link_[peer]++ : round, 0, wire_};
  };
  // One pass (Backend::push_sum_split): apply the local update to the numerator
  // (x ← x + z' − x/w), and split it into the share each out-neighbour gets and the share this
  // peer keeps. Asynchronous mode scales the update by w (x ← x + w·(z' − x/w)), so the model
  // moves by the local step whatever w is: a peer that has received nothing for a while has a
  // small w, and SGP's plain update would move its model by η/w times the step (which diverged
  // here within 12 steps).
  const bool bf16 = wire_ == Dtype::kBf16;
  const size_t degree = nb.out.size();
  std::vector<Owner> owners(degree);
  std::vector<void*> host(degree), shares(degree);
  std::vector<float> weights(degree);
  if (on_device() && device_shares_.size() < degree) device_shares_.resize(degree);
  for (size_t k = 0; k < degree; ++k) {
    if (bf16) {
      auto b = pool_.bf16_buffer(floats_);
      host[k] = b->data();
      owners[k] = std::move(b);
    } else {
      auto b = pool_.buffer(floats_);
      host[k] = b->data();
      owners[k] = std::move(b);
    }
    // (bf16 uses half of a device share)
    shares[k] = on_device() ? device_shares_[k].at_least(*backend_, floats_) : host[k];
    weights[k] = static_cast<float>(nb.out[k].weight);
  }
  kernels::PushSumSplit split;
  split.n = floats_;
  split.z = z;
  split.x = x_.get();
  split.inv = static_cast<float>(1.0 / w_);
  split.gain = asynchronous() ? static_cast<float>(w_) : 1.0f;
  split.self = static_cast<float>(nb.self_weight);
  split.bf16 = bf16;
  split.degree = degree;
  split.shares = shares.data();
  split.weights = weights.data();
  backend_->push_sum_split(split);
  for (size_t k = 0; k < degree; ++k) {
    if (on_device()) backend_->download(host[k], shares[k], floats_ * element_bytes(wire_));
    const topology::Link& l = nb.out[k];
    send_vector(*t_, l.peer, ref(l.peer), host[k], owners[k], 0, floats_, floats_, l.weight * w_, chunk_floats_);
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
  std::vector<float> s = numerator();
  float halves[2];
  std::memcpy(halves, &w_, sizeof(w_));
  s.insert(s.end(), halves, halves + 2);
  return s;
}

void PushSumStep::check_state(const std::vector<float>& state, const std::string& who) const {
  if (state.size() != floats_ + 2)
    throw Error(who, "checkpoint's push-sum state has " + std::to_string(state.size()) + " floats, expected " +
                         std::to_string(floats_ + 2));
}

void PushSumStep::restore_state(const std::vector<float>& state, const std::string& who) {
  check_state(state, who);
  double w;
  std::memcpy(&w, state.data() + floats_, sizeof(w));
  drain_discard();
  set_state(state.data(), w);
}

}  // namespace gossip::peer
