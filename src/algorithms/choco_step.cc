#include "algorithms/choco_step.h"

#include <algorithm>
#include <cmath>

#include "algorithms/gossip_step.h"
#include "algorithms/saved_state.h"
#include "common/error.h"
#include "common/log.h"

namespace gossip::peer {

ChocoStep::ChocoStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                     double timeout_s, double max_norm_ratio, Compressor compressor, float gamma)
    : t_(&transport),
      graph_(std::move(graph)),
      floats_(floats),
      chunk_floats_(std::max<size_t>(1, chunk_floats)),
      timeout_s_(timeout_s),
      max_norm_ratio_(max_norm_ratio),
      compressor_(compressor),
      gamma_(gamma),
      hat_(floats, 0.0f),
      mix_(floats, 0.0f),
      q_(floats, 0.0f),
      diff_(std::min(floats, chunk_floats_)) {}

void ChocoStep::reset() {
  std::fill(hat_.begin(), hat_.end(), 0.0f);
  std::fill(mix_.begin(), mix_.end(), 0.0f);
  dense_ = true;
}

void ChocoStep::start_from(const float* x) {
  // s = Σ_j W_ij·x̂_j = x: the rows of W sum to 1 and every x̂_j is x.
  std::copy(x, x + floats_, hat_.begin());
  std::copy(x, x + floats_, mix_.begin());
  dense_ = false;
}

// q_i = Q(x − x̂) span by span (uncompressed after a reset), sent as soon as it is ready; x̂ and
// s take q_i as every receiver will.
void ChocoStep::send_own(const topology::Neighbours& nb, uint64_t round, const float* x, SendGuard& guard) {
  std::vector<int> out_peers;
  for (const topology::Link& l : nb.out) out_peers.push_back(l.peer);
  const auto self = static_cast<float>(nb.self_weight);
  encoded_.resize((floats_ + chunk_floats_ - 1) / chunk_floats_ + 1);
  size_t pos = 0, chunk = 0;
  do {
    const size_t span = std::min(chunk_floats_, floats_ - pos);
    float* q = q_.data() + pos;
    if (dense_) {
      for (size_t i = 0; i < span; ++i) q[i] = x[pos + i] - hat_[pos + i];
      send_vector(*t_, out_peers, {MessageKind::kGossip, round, 0, Dtype::kF32}, q, guard.owner(), pos, span, floats_,
                  0, chunk_floats_);
    } else {
      for (size_t i = 0; i < span; ++i) diff_[i] = x[pos + i] - hat_[pos + i];
      std::vector<uint32_t>& words = encoded_[chunk];
      const SpanKey key{round, static_cast<uint32_t>(t_->rank()), pos};
      compress(compressor_, key, diff_.data(), static_cast<uint32_t>(span), &words, q, &scratch_);
      OutMessage m;
      m.header.kind = MessageKind::kGossip;
      m.header.round = round;
      m.header.total_floats = floats_;
      m.header.offset = pos;
      m.header.dtype = compressor_.kind;
      m.data = words.data();
      m.count = words.size();
      m.owner = guard.owner();
      if (!out_peers.empty()) t_->send_to_each(out_peers, m);
    }
    float* hat = hat_.data() + pos;
    float* mix = mix_.data() + pos;
    for (size_t i = 0; i < span; ++i) {
      hat[i] += q[i];
      mix[i] += self * q[i];
    }
    pos += span;
    ++chunk;
  } while (pos < floats_);
}

bool ChocoStep::outlier(double theirs, const float* x, size_t span) const {
  if (max_norm_ratio_ <= 0) return false;
  const double ours = sum_squares(x, span);
  return theirs > max_norm_ratio_ * max_norm_ratio_ * (ours + 0.01 * double(span));
}

size_t ChocoStep::fold(const InMessage& m, const topology::Link& from, uint64_t round, size_t pos, const float* x) {
  const Dtype expected = dense_ ? Dtype::kF32 : compressor_.kind;
  const std::string me = "peer " + std::to_string(t_->rank());
  if (m.header.dtype != expected)
    throw Error(me, t_->describe(from.peer) + " sends gossip values as " + dtype_name(m.header.dtype) +
                        " but this peer expects " + dtype_name(expected) + " in round " + std::to_string(round) +
                        ": the peers' algorithm settings (kind, compressor) differ");
  size_t span = 0;
  double theirs = 0;
  bool finite = true;
  if (expected == Dtype::kF32) {
    span = m.count;
    if (span > floats_ - pos || (span == 0 && floats_ > 0)) {
      log(me, ": dropped a chunk [", pos, ", +", span, ") from ", t_->describe(from.peer), ": outside the vector");
      return 0;
    }
    const FloatScan scan = float_scan(m.data, span);
    finite = scan.finite;
    theirs = scan.sum_squares;
  } else {
    const SpanKey key{round, static_cast<uint32_t>(from.peer), pos};
    const auto* words = reinterpret_cast<const uint32_t*>(m.data);
    if (auto problem = chunk_.parse(compressor_, key, words, m.count, floats_)) {
      log(me, ": dropped a gossip chunk from ", t_->describe(from.peer), " (round ", round, "): ", *problem);
      return 0;
    }
    span = chunk_.span();
    if (span == 0 && floats_ > 0) return 0;
    finite = chunk_.finite(&theirs);
  }
  if (!finite) {
    log(me, ": ", t_->describe(from.peer), " sent NaN or Inf values in its gossip message of round ", round,
        ": not mixed in");
    return span;
  }
  if (outlier(theirs, x + pos, span)) {
    log(me, ": ", t_->describe(from.peer), " sent values with norm ", std::sqrt(theirs), " against this peer's ",
        std::sqrt(sum_squares(x + pos, span)), " over the same floats (round ", round, "): an outlier, not mixed in");
    return span;
  }
  const auto w = static_cast<float>(from.weight);
  float* mix = mix_.data() + pos;
  if (expected == Dtype::kF32) {
    for (size_t i = 0; i < span; ++i) mix[i] += w * m.data[i];
  } else {
    chunk_.add_to(w, mix);
  }
  return span;
}

void ChocoStep::receive_from(const topology::Link& from, uint64_t round, const float* x) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  const MatchKey key{MessageKind::kGossip, from.peer, round, 0};
  size_t pos = 0;
  do {
    std::optional<InMessage> m = t_->receive(key, deadline);
    if (!m) throw no_message_from(*t_, MessageKind::kGossip, from.peer, round, timeout_s_);
    if (!m->verified && !checksum_matches(m->header, m->data, m->bytes())) {
      log("peer ", t_->rank(), ": dropped a gossip chunk claiming to be from ", t_->describe(from.peer),
          ": checksum mismatch");
      continue;
    }
    if (m->header.total_floats != floats_)
      throw vector_of_another_length(*t_, from.peer, MessageKind::kGossip, m->header.total_floats, floats_);
    if (m->header.offset != pos) {
      log("peer ", t_->rank(), ": dropped a chunk at ", m->header.offset, " of a vector of ", m->header.total_floats,
          " claiming to be from ", t_->describe(from.peer), ": expected one at ", pos, " of ", floats_);
      continue;
    }
    pos += fold(*m, from, round, pos, x);
    if (floats_ == 0) break;
  } while (pos < floats_);
}

void ChocoStep::step(uint64_t round, float* x) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  SendGuard guard;
  send_own(nb, round, x, guard);
  for (const topology::Link& from : nb.in) receive_from(from, round, x);
  const float gamma = gamma_;
  const float* __restrict mix = mix_.data();
  const float* __restrict hat = hat_.data();
#pragma omp simd
  for (size_t i = 0; i < floats_; ++i) x[i] += gamma * (mix[i] - hat[i]);
  guard.wait_released(timeout_s_, "peer " + std::to_string(t_->rank()));
  dense_ = false;
}

std::vector<float> ChocoStep::save_state() const { return pack_state(hat_, mix_, dense_); }

void ChocoStep::restore_state(const std::vector<float>& state, const std::string& who) {
  unpack_state(state, &hat_, &mix_, &dense_, who, "CHOCO state");
}

}  // namespace gossip::peer
