#include "peer/gossip_step.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/log.h"

namespace gossip::peer {
namespace {

// dst = self·src + Σ_k w_k·v_k over `span` floats, v_k = current[k]->data + used[k]; the common
// degrees get one fused loop each. A neighbour's chunk with NaN/Inf is not mixed in: our own
// values stand in for it, so its weight goes to self for that span. With kNorm, returns Σ src²
// (taken in the same pass, for the outlier screen; float partial sums per block, added up in
// double).
template <bool kNorm>
double fold_span(float self, const float* __restrict src, float* __restrict dst, size_t span,
                 const std::vector<std::optional<InMessage>>& current, const std::vector<size_t>& used,
                 const std::vector<float>& w) {
  const size_t deg = current.size();
  auto values = [&](size_t k, size_t begin) { return (current[k]->finite ? current[k]->data + used[k] : src) + begin; };
  double total = 0;
  for (size_t begin = 0; begin < span; begin += 4096) {
    const size_t n = std::min(span - begin, size_t(4096));
    const float* __restrict x = src + begin;
    float* __restrict y = dst + begin;
    float sq = 0;
    if (deg == 0) {
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = self * x[j];
        if constexpr (kNorm) sq += x[j] * x[j];
      }
    } else if (deg == 1) {
      const float* __restrict a = values(0, begin);
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = self * x[j] + w[0] * a[j];
        if constexpr (kNorm) sq += x[j] * x[j];
      }
    } else if (deg == 2) {
      const float* __restrict a = values(0, begin);
      const float* __restrict b = values(1, begin);
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = self * x[j] + w[0] * a[j] + w[1] * b[j];
        if constexpr (kNorm) sq += x[j] * x[j];
      }
    } else {
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = self * x[j];
        if constexpr (kNorm) sq += x[j] * x[j];
      }
      for (size_t k = 0; k < deg; ++k) {
        const float* __restrict a = values(k, begin);
        for (size_t j = 0; j < n; ++j) y[j] += w[k] * a[j];
      }
    }
    total += sq;
  }
  return total;
}

}  // namespace

double sum_squares(const float* v, size_t n) {
  double total = 0;
  for (size_t begin = 0; begin < n; begin += 4096) {  // float partial sums, added up in double
    const size_t end = std::min(n, begin + 4096);
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = begin; i < end; ++i) s += v[i] * v[i];
    total += s;
  }
  return total;
}

GossipStep::GossipStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                       double timeout_s, double max_norm_ratio)
    : t_(&transport),
      graph_(std::move(graph)),
      floats_(floats),
      chunk_floats_(chunk_floats),
      timeout_s_(timeout_s),
      max_norm_ratio_(max_norm_ratio) {}

void GossipStep::step(uint64_t round, const float* in, float* out) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  const VectorRef ref{MessageKind::kGossip, round, 0};
  SendGuard guard;
  std::vector<int> out_peers;
  for (const topology::Link& l : nb.out) out_peers.push_back(l.peer);
  send_vector(*t_, out_peers, ref, in, guard.owner(), 0, floats_, floats_, 0, chunk_floats_);
  const float self = static_cast<float>(nb.self_weight);
  // Walk every in-neighbour's vector in step and fold one span of all of them in a single pass,
  // out = self·in + Σ w_k·v_k, so `in` and `out` are touched once per round whatever the degree.
  // No full copy of a neighbour is kept: chunks are released as soon as they are folded.
  const size_t deg = nb.in.size();
  std::vector<ChunkReader> readers;
  std::vector<std::optional<InMessage>> current(deg);
  std::vector<size_t> used(deg, 0);  // floats of current[k] already folded
  std::vector<float> weights(deg);
  for (size_t k = 0; k < deg; ++k) {
    readers.emplace_back(*t_, nb.in[k].peer, ref, 0, floats_, timeout_s_);
    weights[k] = static_cast<float>(nb.in[k].weight);
  }
  std::vector<bool> reported(deg, false);
  // An outlier chunk (norm far beyond ours over the same floats) is treated like a NaN chunk:
  // true when current[k] is one (and then marked so). `ours` = Σ in² over the chunk's floats.
  auto outlier = [&](size_t k, double ours) {
    InMessage& m = *current[k];
    if (max_norm_ratio_ <= 0 || !m.finite || m.count == 0) return false;
    const double theirs = m.sum_squares;
    const double limit = max_norm_ratio_ * max_norm_ratio_ * (ours + 0.01 * double(m.count));
    if (theirs <= limit) return false;
    m.finite = false;
    if (!reported[k]) {
      reported[k] = true;
      log("peer ", t_->rank(), ": ", t_->describe(nb.in[k].peer), " sent values with norm ", std::sqrt(theirs),
          " against this peer's ", std::sqrt(ours), " over the same floats (round ", round, "): an outlier, not mixed in");
    }
    return true;
  };
  size_t pos = 0;
  do {  // at least once: a zero-length vector still arrives as one empty chunk per neighbour
    size_t span = floats_ - pos;
    for (size_t k = 0; k < deg; ++k) {
      while (!current[k] || used[k] == current[k]->count) {
        current[k] = readers[k].next();
        used[k] = 0;
        if (!current[k]) break;  // vector complete (only for the empty vector here)
      }
      span = current[k] ? std::min(span, current[k]->count - used[k]) : 0;
    }
    if (span == 0) break;
    // Usually every neighbour's chunk is exactly this span (the same chunk size everywhere): then
    // our norm over it comes out of the fold itself and an outlier, which is rare, costs a second
    // fold of the span. Otherwise each chunk is screened before its first span is folded.
    bool whole = true;
    for (size_t k = 0; k < deg; ++k) whole = whole && used[k] == 0 && current[k]->count == span;
    if (!whole && max_norm_ratio_ > 0)
      for (size_t k = 0; k < deg; ++k)
        if (used[k] == 0 && current[k]->header.offset + current[k]->count <= floats_)
          outlier(k, sum_squares(in + current[k]->header.offset, current[k]->count));
    if (whole && max_norm_ratio_ > 0) {
      const double ours = fold_span<true>(self, in + pos, out + pos, span, current, used, weights);
      bool refold = false;
      for (size_t k = 0; k < deg; ++k) refold = outlier(k, ours) || refold;
      if (refold) fold_span<false>(self, in + pos, out + pos, span, current, used, weights);
    } else {
      fold_span<false>(self, in + pos, out + pos, span, current, used, weights);
    }
    for (size_t k = 0; k < deg; ++k) used[k] += span;
    pos += span;
  } while (pos < floats_);
  current.clear();  // release the neighbours' chunks before waiting for ours to be released
  guard.wait_released(timeout_s_, "peer " + std::to_string(t_->rank()));
}

}  // namespace gossip::peer
