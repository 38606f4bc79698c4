#include "algorithms/gossip_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "common/cpu_features.h"
#include "common/log.h"
#include "kernels/bf16.h"

namespace gossip::peer {
namespace {

template <typename Value>
inline float widen(Value v) {
  if constexpr (std::is_same_v<Value, uint16_t>) return kernels::from_bf16(v);
  else return v;
}

// What stays of our own value: self·x, or (bf16) x − rest·Q(x), Q(x) taken again here (the same
// rounding as what we sent) rather than read back.
template <bool kBf16>
inline float own_share(float self, float rest, float x) {
  if constexpr (kBf16) return x - rest * kernels::from_bf16(kernels::to_bf16(x));
  else return self * x;
}

// fold_span: dst = self·src + Σ_k w_k·v_k over `span` floats, v_k = current[k]->data + used[k];
// the common degrees get one fused loop each. A neighbour's chunk with NaN/Inf is not mixed in:
// our own values stand in for it, so its weight goes to self for that span. With kNorm, returns
// Σ src² (taken in the same pass, for the outlier screen; float partial sums per block, added up
// in double). With kCheck, also scans every v_k in that pass (into theirs[k]: Σ v_k² and whether
// one is NaN/Inf): the single read of a chunk that needed no checksum (ChunkReader::defer_scan).
// kBf16: the chunks hold bf16 values and dst = src − rest·Q(src) + Σ_k w_k·v_k, where rest =
// Σ_k w_k; a chunk not mixed in stands in as `own` = Q(src), so its term w_k·(own − own) vanishes.
struct Fold {
  float self, rest;         // rest = Σ_k w_k (bf16 only)
  const float* src;         // our values
  const uint16_t* own;      // bf16: Q(src), what we sent (stands in for a chunk not mixed in)
  float* dst;
  size_t span;
  const std::vector<std::optional<InMessage>>* current;
  const std::vector<size_t>* used;  // floats of current[k] before this span
  const std::vector<float>* w;
  FloatScan* theirs;  // kCheck: one per neighbour, added to
};

// Bit 31 of the result is set exactly when v is NaN or ±Inf (its exponent bits plus one exponent
// unit carry out of them only when they were all ones); OR-ed over a block, as in the wire scan.
inline uint32_t nonfinite_bit(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return (bits & 0x7F800000u) + 0x00800000u;
}

// One neighbour's block sums, added to its FloatScan.
inline void add_block(FloatScan& scan, float sq, uint32_t bad) {
  scan.sum_squares += sq;
  if (bad & 0x80000000u) scan.finite = false;
}

template <bool kNorm, bool kCheck, bool kBf16>
__attribute__((always_inline)) inline double fold_span_body(const Fold& f) {
  using Value = std::conditional_t<kBf16, uint16_t, float>;
  const auto& current = *f.current;
  const auto& used = *f.used;
  const auto& w = *f.w;
  const float self = f.self, rest = f.rest;
  const size_t deg = current.size();
  auto values = [&](size_t k, size_t begin) -> const Value* {
    if constexpr (kBf16) return (current[k]->finite ? current[k]->bf16() + used[k] : f.own) + begin;
    else return (current[k]->finite ? current[k]->data + used[k] : f.src) + begin;
  };
  double total = 0;
  for (size_t begin = 0; begin < f.span; begin += 4096) {
    const size_t n = std::min(f.span - begin, size_t(4096));
    const float* __restrict x = f.src + begin;
    float* __restrict y = f.dst + begin;
    float sq = 0, sq0 = 0, sq1 = 0;
    uint32_t bad0 = 0, bad1 = 0;
    if (deg == 1) {
      const Value* __restrict a = values(0, begin);
      const float w0 = w[0];
#pragma omp simd reduction(+ : sq, sq0) reduction(| : bad0)
      for (size_t j = 0; j < n; ++j) {
        const float a0 = widen(a[j]);
        y[j] = own_share<kBf16>(self, rest, x[j]) + w0 * a0;
        if constexpr (kNorm) sq += x[j] * x[j];
        if constexpr (kCheck) sq0 += a0 * a0, bad0 |= nonfinite_bit(a0);
      }
      if constexpr (kCheck) add_block(f.theirs[0], sq0, bad0);
    } else if (deg == 2) {
      const Value* __restrict a = values(0, begin);
      const Value* __restrict b = values(1, begin);
      const float w0 = w[0], w1 = w[1];
#pragma omp simd reduction(+ : sq, sq0, sq1) reduction(| : bad0, bad1)
      for (size_t j = 0; j < n; ++j) {
        const float a0 = widen(a[j]), b0 = widen(b[j]);
        y[j] = own_share<kBf16>(self, rest, x[j]) + w0 * a0 + w1 * b0;
        if constexpr (kNorm) sq += x[j] * x[j];
        if constexpr (kCheck) sq0 += a0 * a0, sq1 += b0 * b0, bad0 |= nonfinite_bit(a0), bad1 |= nonfinite_bit(b0);
      }
      if constexpr (kCheck) add_block(f.theirs[0], sq0, bad0), add_block(f.theirs[1], sq1, bad1);
    } else {
#pragma omp simd reduction(+ : sq)
      for (size_t j = 0; j < n; ++j) {
        y[j] = own_share<kBf16>(self, rest, x[j]);
        if constexpr (kNorm) sq += x[j] * x[j];
      }
      for (size_t k = 0; k < deg; ++k) {
        const Value* __restrict a = values(k, begin);
        const float wk = w[k];
        sq0 = 0, bad0 = 0;
#pragma omp simd reduction(+ : sq0) reduction(| : bad0)
        for (size_t j = 0; j < n; ++j) {
          const float a0 = widen(a[j]);
          y[j] += wk * a0;
          if constexpr (kCheck) sq0 += a0 * a0, bad0 |= nonfinite_bit(a0);
        }
        if constexpr (kCheck) add_block(f.theirs[k], sq0, bad0);
      }
    }
    total += sq;
  }
  return total;
}

// AVX2 where the CPU has it (common/cpu_features.h): about 8 % off a bf16 round. Without FMA in
// the target, every value comes out as in the baseline build.
#if defined(__x86_64__)
template <bool kNorm, bool kCheck, bool kBf16>
GOSSIP_TARGET_AVX2 double fold_span_avx2(const Fold& f) {
  return fold_span_body<kNorm, kCheck, kBf16>(f);
}
#endif

template <bool kNorm, bool kCheck, bool kBf16>
double fold_span(const Fold& f) {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return fold_span_avx2<kNorm, kCheck, kBf16>(f);
#endif
  return fold_span_body<kNorm, kCheck, kBf16>(f);
}

// The fold with the flags chosen at run time.
double fold_span(const Fold& f, bool norm, bool check, bool bf16) {
  if (check) return bf16 ? fold_span<true, true, true>(f) : fold_span<true, true, false>(f);
  if (bf16) return norm ? fold_span<true, false, true>(f) : fold_span<false, false, true>(f);
  return norm ? fold_span<true, false, false>(f) : fold_span<false, false, false>(f);
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
                       double timeout_s, double max_norm_ratio, Dtype wire, uint32_t tag)
    : t_(&transport),
      graph_(std::move(graph)),
      floats_(floats),
      chunk_floats_(chunk_floats),
      timeout_s_(timeout_s),
      max_norm_ratio_(max_norm_ratio),
      wire_(wire),
      tag_(tag) {}

// Sends `in` to every out-neighbour (bf16: rounded chunk by chunk, each sent as soon as it is
// ready; released, like `in`, before step() returns through the guard, so the buffer is reused
// every round).
void GossipStep::send_own(const topology::Neighbours& nb, const VectorRef& ref, const float* in, SendGuard& guard) {
  std::vector<int> out_peers;
  for (const topology::Link& l : nb.out) out_peers.push_back(l.peer);
  if (wire_ != Dtype::kBf16) {
    send_vector(*t_, out_peers, ref, in, guard.owner(), 0, floats_, floats_, 0, chunk_floats_);
    return;
  }
  rounded_.resize(floats_);
  size_t done = 0;
  do {
    const size_t c = std::min(chunk_floats_, floats_ - done);
    kernels::to_bf16(in + done, rounded_.data() + done, c);
    send_vector(*t_, out_peers, ref, rounded_.data() + done, guard.owner(), done, c, floats_, 0, chunk_floats_);
    done += c;
  } while (done < floats_);
}

// One round's in-neighbours as the fold walks them: each one's reader, the chunk being folded
// and how much of it is, its weight, its scan in the current pass and whether its outlier was
// reported.
struct GossipStep::InFlight {
  const topology::Neighbours* nb = nullptr;
  uint64_t round = 0;
  float self = 0, rest = 0;
  std::vector<ChunkReader> readers;
  std::vector<std::optional<InMessage>> current;
  std::vector<size_t> used;  // floats of current[k] already folded
  std::vector<float> weights;
  std::vector<FloatScan> theirs;
  std::vector<bool> reported;
};

void GossipStep::step(uint64_t round, const float* in, float* out) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  const VectorRef ref{MessageKind::kGossip, round, tag_, wire_};
  SendGuard guard;
  send_own(nb, ref, in, guard);
  // Walk every in-neighbour's vector in step and fold one span of all of them in a single pass,
  // out = self·in + Σ w_k·v_k, so `in` and `out` are touched once per round whatever the degree.
  // No full copy of a neighbour is kept: chunks are released as soon as they are folded.
  const size_t deg = nb.in.size();
  InFlight s;
  s.nb = &nb;
  s.round = round;
  s.self = static_cast<float>(nb.self_weight);
  double in_weight = 0;
  for (const topology::Link& l : nb.in) in_weight += l.weight;
  s.rest = static_cast<float>(in_weight);
  s.current.resize(deg);
  s.used.assign(deg, 0);
  s.theirs.resize(deg);
  s.reported.assign(deg, false);
  for (size_t k = 0; k < deg; ++k) {
    s.readers.emplace_back(*t_, nb.in[k].peer, ref, 0, floats_, timeout_s_);
    s.readers.back().defer_scan();  // a chunk without a checksum is scanned in the fold's own pass
    s.weights.push_back(static_cast<float>(nb.in[k].weight));
  }
  size_t pos = 0;
  do {  // at least once: a zero-length vector still arrives as one empty chunk per neighbour
    size_t span = floats_ - pos;
    for (size_t k = 0; k < deg; ++k) {
      while (!s.current[k] || s.used[k] == s.current[k]->count) {
        s.current[k] = s.readers[k].next();
        s.used[k] = 0;
        if (!s.current[k]) break;  // vector complete (only for the empty vector here)
      }
      span = s.current[k] ? std::min(span, s.current[k]->count - s.used[k]) : 0;
    }
    if (span == 0) break;
    fold_next_span(s, pos, span, in, out);
    for (size_t k = 0; k < deg; ++k) s.used[k] += span;
    pos += span;
  } while (pos < floats_);
  s.current.clear();  // release the neighbours' chunks before waiting for ours to be released
  guard.wait_released(timeout_s_, "peer " + std::to_string(t_->rank()));
}

// An outlier chunk (norm far beyond ours over the same floats) is treated like a NaN chunk: true
// when current[k] is one (and then marked so). `ours` = Σ in² over the chunk's floats.
bool GossipStep::outlier(InFlight& s, size_t k, double ours) {
  InMessage& m = *s.current[k];
  if (max_norm_ratio_ <= 0 || !m.finite || m.count == 0) return false;
  const double theirs = m.sum_squares;
  const double limit = max_norm_ratio_ * max_norm_ratio_ * (ours + 0.01 * double(m.count));
  if (theirs <= limit) return false;
  m.finite = false;
  if (!s.reported[k]) {
    s.reported[k] = true;
    log("peer ", t_->rank(), ": ", t_->describe(s.nb->in[k].peer), " sent values with norm ", std::sqrt(theirs),
        " against this peer's ", std::sqrt(ours), " over the same floats (round ", s.round,
        "): an outlier, not mixed in");
  }
  return true;
}

// Folds [pos, pos + span) of every neighbour's current chunk into out. Usually every neighbour's
// chunk is exactly this span (the same chunk size everywhere): then our norm over it comes out of
// the fold itself and an outlier, which is rare, costs a second fold of the span. Otherwise each
// chunk is screened before its first span is folded. A chunk that came without a checksum (lent,
// in-process) is scanned in the fold's pass too, and the span folded again without it when it
// turns out not finite.
void GossipStep::fold_next_span(InFlight& s, size_t pos, size_t span, const float* in, float* out) {
  const size_t deg = s.current.size();
  const bool bf16 = wire_ == Dtype::kBf16;
  auto& current = s.current;
  bool whole = true, unscanned = false;
  for (size_t k = 0; k < deg; ++k) {
    whole = whole && s.used[k] == 0 && current[k]->count == span;
    unscanned = unscanned || !current[k]->scanned;
  }
  if (!whole)
    for (size_t k = 0; k < deg; ++k)
      if (!current[k]->scanned) {
        privatize(*current[k]);  // scanned here and folded later: they must not change between
        s.readers[k].settle(*current[k], payload_scan(current[k]->data, current[k]->bytes(), wire_));
      }
  if (!whole && max_norm_ratio_ > 0)
    for (size_t k = 0; k < deg; ++k)
      if (s.used[k] == 0 && current[k]->header.offset + current[k]->count <= floats_)
        outlier(s, k, sum_squares(in + current[k]->header.offset, current[k]->count));
  auto fold = [&](bool norm, bool check) {
    const uint16_t* own = bf16 ? rounded_.data() + pos : nullptr;
    const Fold f{s.self, s.rest, in + pos, own, out + pos, span, &current, &s.used, &s.weights, s.theirs.data()};
    return fold_span(f, norm, check, bf16);
  };
  if (!whole || (max_norm_ratio_ <= 0 && !unscanned)) {
    fold(false, false);
    return;
  }
  std::fill(s.theirs.begin(), s.theirs.end(), FloatScan{});
  const double ours = fold(true, unscanned);
  bool refold = false, shared = false;
  for (size_t k = 0; k < deg; ++k) {
    if (!current[k]->scanned) {
      s.readers[k].settle(*current[k], s.theirs[k]);
      refold = refold || !current[k]->finite;
    }
    refold = outlier(s, k, ours) || refold;
    shared = shared || current[k]->shared;
  }
  // Values in a neighbour's shared region may have changed since the first pass: each refold
  // checks again what it reads, and leaves out a chunk no longer fit to mix (at most deg times).
  while (refold && shared) {
    std::fill(s.theirs.begin(), s.theirs.end(), FloatScan{});
    fold(true, true);
    refold = false;
    for (size_t k = 0; k < deg; ++k)
      if (current[k]->shared && current[k]->finite) {
        s.readers[k].settle(*current[k], s.theirs[k]);
        refold = !current[k]->finite || outlier(s, k, ours) || refold;
      }
  }
  if (refold) fold(false, false);
}

}  // namespace gossip::peer
