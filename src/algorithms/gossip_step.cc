#include "algorithms/gossip_step.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "kernels/bf16.h"

namespace gossip::peer {
namespace {

// A chunk's scan as the transport's readers take it.
FloatScan as_float_scan(const kernels::ValueScan& v) { return FloatScan{v.finite, v.sum_squares}; }

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
// ready, or, with `in` null, rounded_ as it is; released, like `in`, before step() returns
// through the guard, so the buffer is reused every round).
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
    if (in) kernels::to_bf16(in + done, rounded_.data() + done, c);
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
  const OnDevice* device = nullptr;  // null: the mix runs on host memory
  std::vector<ChunkReader> readers;
  std::vector<std::optional<InMessage>> current;
  std::vector<size_t> used;  // floats of current[k] already folded
  std::vector<float> weights;
  std::vector<kernels::ValueScan> theirs;
  std::vector<const void*> values;  // the mix's view of each current chunk (null: left out)
  std::vector<bool> reported;
};

void GossipStep::step(uint64_t round, const float* in, float* out) { run(round, in, out, nullptr); }

void GossipStep::step(uint64_t round, const float* in, const OnDevice& device) {
  if (!device.backend || device.backend->is_host()) throw Error("gossip", "OnDevice needs a device backend");
  if (!in && wire_ != Dtype::kBf16) throw Error("gossip", "a device step without the host's values needs the bf16 wire");
  if (!in) {  // Q(x) rounded on the device; only it comes down
    const size_t words = (floats_ + 1) / 2;  // two bf16 values per float of the buffer
    if (device_rounded_.size() != words) device_rounded_ = kernels::DeviceArray<float>(*device.backend, words);
    uint16_t* packed = reinterpret_cast<uint16_t*>(device_rounded_.get());
    device.backend->pack_bf16(device.in, packed, floats_);
    rounded_.resize(floats_);
    device.backend->download(rounded_.data(), packed, floats_ * sizeof(uint16_t));
  }
  run(round, in, nullptr, &device);
}

// `out` is host memory, or null with `device`.
void GossipStep::run(uint64_t round, const float* in, float* out, const OnDevice* device) {
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
  s.device = device;
  s.self = static_cast<float>(nb.self_weight);
  double in_weight = 0;
  for (const topology::Link& l : nb.in) in_weight += l.weight;
  s.rest = static_cast<float>(in_weight);
  s.current.resize(deg);
  s.used.assign(deg, 0);
  s.theirs.resize(deg);
  s.values.resize(deg);
  s.reported.assign(deg, false);
  if (device && staging_.size() < deg) staging_.resize(deg);
  for (size_t k = 0; k < deg; ++k) {
    s.readers.emplace_back(*t_, nb.in[k].peer, ref, 0, floats_, floats_, timeout_s_);
    // A chunk without a checksum is scanned in the fold's own pass on the host; for a device,
    // where the chunk lands, as it is taken.
    if (!device) s.readers.back().defer_scan();
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

// Σ of our values² over [offset, offset + count): from `in`, or, for a device that sent only
// Q(x) down, from those.
double GossipStep::own_sum_squares(const float* in, size_t offset, size_t count) const {
  if (in) return sum_squares(in + offset, count);
  return payload_scan(rounded_.data() + offset, count * sizeof(uint16_t), Dtype::kBf16).sum_squares;
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
// the fold itself and an outlier, which is rare, costs a second fold of the span. Otherwise, and
// for a device (whose chunks are screened on the host as they arrive), each chunk is screened
// before its first span is folded. A chunk that came without a checksum (lent, in-process) is
// scanned in the fold's pass too, and the span folded again without it when it turns out not finite.
void GossipStep::fold_next_span(InFlight& s, size_t pos, size_t span, const float* in, float* out) {
  const size_t deg = s.current.size();
  auto& current = s.current;
  bool whole = !s.device, unscanned = false;
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
        outlier(s, k, own_sum_squares(in, current[k]->header.offset, current[k]->count));
  if (!whole || (max_norm_ratio_ <= 0 && !unscanned)) {
    mix(s, pos, span, in, out, false, false);
    return;
  }
  std::fill(s.theirs.begin(), s.theirs.end(), kernels::ValueScan{});
  const double ours = mix(s, pos, span, in, out, true, unscanned);
  bool refold = false, shared = false;
  for (size_t k = 0; k < deg; ++k) {
    if (!current[k]->scanned) {
      s.readers[k].settle(*current[k], as_float_scan(s.theirs[k]));
      refold = refold || !current[k]->finite;
    }
    refold = outlier(s, k, ours) || refold;
    shared = shared || current[k]->shared;
  }
  // Values in a neighbour's shared region may have changed since the first pass: each refold
  // checks again what it reads, and leaves out a chunk no longer fit to mix (at most deg times).
  while (refold && shared) {
    std::fill(s.theirs.begin(), s.theirs.end(), kernels::ValueScan{});
    mix(s, pos, span, in, out, true, true);
    refold = false;
    for (size_t k = 0; k < deg; ++k)
      if (current[k]->shared && current[k]->finite) {
        s.readers[k].settle(*current[k], as_float_scan(s.theirs[k]));
        refold = !current[k]->finite || outlier(s, k, ours) || refold;
      }
  }
  if (refold) mix(s, pos, span, in, out, false, false);
}

// One pass of the backend's mix over [pos, pos + span): every chunk still fit to mix at its
// place, the others left out. `check`: scan the chunks in the same pass (host memory only: a
// device's chunks were scanned as they arrived). Returns Σ in² over the span when `norm`.
double GossipStep::mix(InFlight& s, size_t pos, size_t span, const float* in, float* out, bool norm, bool check) {
  const bool bf16 = wire_ == Dtype::kBf16;
  for (size_t k = 0; k < s.current.size(); ++k) {
    const InMessage& m = *s.current[k];
    const size_t at = s.used[k] * element_bytes(wire_);
    s.values[k] = !m.finite ? nullptr : s.device ? device_copy(s, k, span) : reinterpret_cast<const char*>(m.data) + at;
  }
  kernels::MixSpan m;
  m.n = span;
  m.self = s.self;
  m.rest = s.rest;
  m.bf16 = bf16;
  m.own = bf16 ? rounded_.data() + pos : nullptr;
  m.degree = s.current.size();
  m.values = s.values.data();
  m.weights = s.weights.data();
  m.scans = check ? s.theirs.data() : nullptr;
  m.norm = norm;
  for (const auto& c : s.current) m.snapshot = m.snapshot || (check && c->shared);
  if (!s.device) {
    m.src = in + pos;
    m.dst = out + pos;
    return host_->mix_span(m);
  }
  m.src = s.device->in + pos;
  m.dst = s.device->out + pos;
  return s.device->backend->mix_span(m);
}

// current[k]'s next `span` values uploaded into the device's staging buffer for neighbour k.
const void* GossipStep::device_copy(InFlight& s, size_t k, size_t span) {
  const InMessage& m = *s.current[k];
  const size_t value_bytes = element_bytes(wire_);
  const size_t floats = (span * value_bytes + sizeof(float) - 1) / sizeof(float);
  float* staged = staging_[k].at_least(*s.device->backend, floats);
  s.device->backend->upload(staged, reinterpret_cast<const char*>(m.data) + s.used[k] * value_bytes, span * value_bytes);
  return staged;
}

}  // namespace gossip::peer
