#include "algorithms/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/random.h"

namespace gossip::peer {
namespace {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The state a span's random stream starts from: the run's seed, the round, the sender and the
// span's place, each mixed in.
uint64_t span_state(uint64_t seed, const SpanKey& key) {
  uint64_t s = splitmix64_hash(seed);
  s = splitmix64_hash(s ^ key.round);
  s = splitmix64_hash(s ^ (uint64_t(key.sender) << 40) ^ key.offset);
  return s;
}

size_t sign_words(uint32_t span) { return (size_t(span) + 31) / 32; }
size_t int8_words(uint32_t span) { return (size_t(span) + 3) / 4; }

inline float sign_value(const uint32_t* bits, uint32_t i, float scale) {
  return (bits[i / 32] >> (i % 32)) & 1u ? scale : -scale;
}

inline float int8_value(const uint32_t* body, uint32_t i, float scale) {
  const auto b = static_cast<int8_t>(reinterpret_cast<const uint8_t*>(body)[i]);
  return scale * static_cast<float>(b);
}

// Sparse kinds: words = [span, k, indices (top-k only), values]; q = v at the indices, else 0.
void encode_sparse(bool with_indices, const float* v, uint32_t span, const std::vector<uint32_t>& index,
                   std::vector<uint32_t>* words, float* q) {
  const auto k = static_cast<uint32_t>(index.size());
  words->assign(2 + (with_indices ? 2 * size_t(k) : k), 0);
  (*words)[0] = span;
  (*words)[1] = k;
  uint32_t* values = words->data() + 2 + (with_indices ? k : 0);
  std::fill(q, q + span, 0.0f);
  for (uint32_t i = 0; i < k; ++i) {
    if (with_indices) (*words)[2 + i] = index[i];
    values[i] = float_bits(v[index[i]]);
    q[index[i]] = v[index[i]];
  }
}

void top_k_indices(const float* v, uint32_t span, uint32_t k, std::vector<uint32_t>* index) {
  index->resize(span);
  for (uint32_t i = 0; i < span; ++i) (*index)[i] = i;
  // NaN counts as the largest magnitude (a strict weak order, and the receivers see it and screen).
  auto magnitude = [v](uint32_t i) { return std::isnan(v[i]) ? INFINITY : std::fabs(v[i]); };
  auto larger = [&magnitude](uint32_t a, uint32_t b) {
    const float fa = magnitude(a), fb = magnitude(b);
    return fa > fb || (fa == fb && a < b);
  };
  if (k < span) std::nth_element(index->begin(), index->begin() + k, index->end(), larger);
  index->resize(k);
  std::sort(index->begin(), index->end());
}

void encode_sign(const float* v, uint32_t span, std::vector<uint32_t>* words, float* q) {
  double l1 = 0;
  for (uint32_t i = 0; i < span; ++i) l1 += std::fabs(v[i]);
  const float scale = span ? static_cast<float>(l1 / span) : 0.0f;
  words->assign(2 + sign_words(span), 0);
  (*words)[0] = span;
  (*words)[1] = float_bits(scale);
  uint32_t* bits = words->data() + 2;
  for (uint32_t i = 0; i < span; ++i)
    if (v[i] >= 0) bits[i / 32] |= 1u << (i % 32);
  for (uint32_t i = 0; i < span; ++i) q[i] = sign_value(bits, i, scale);
}

// b_i = ⌊v_i/scale + u_i⌋ with u_i uniform in [0, 1): unbiased, E[scale·b_i] = v_i.
void encode_int8(uint64_t state, const float* v, uint32_t span, std::vector<uint32_t>* words, float* q) {
  float top = 0;
  for (uint32_t i = 0; i < span; ++i) top = std::max(top, std::fabs(v[i]));
  const float scale = top / 127.0f;
  words->assign(2 + int8_words(span), 0);
  (*words)[0] = span;
  (*words)[1] = float_bits(scale);
  auto* bytes = reinterpret_cast<uint8_t*>(words->data() + 2);
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (uint32_t i = 0; i < span; ++i) {
    const float r = std::floor(v[i] * inv + unit_float(splitmix64(state)));
    const float clamped = std::isfinite(r) ? std::min(127.0f, std::max(-127.0f, r)) : 0.0f;
    bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(clamped));
  }
  for (uint32_t i = 0; i < span; ++i) q[i] = int8_value(words->data() + 2, i, scale);
}

}  // namespace

uint32_t compressed_count(const Compressor& c, uint32_t span) {
  if (span == 0) return 0;
  const double k = std::ceil(c.ratio * span - 1e-9);
  return static_cast<uint32_t>(std::min<double>(span, std::max(1.0, k)));
}

size_t compressed_words(const Compressor& c, uint32_t span) {
  switch (c.kind) {
    case Dtype::kTopK: return 2 + 2 * size_t(compressed_count(c, span));
    case Dtype::kRandomK: return 2 + compressed_count(c, span);
    case Dtype::kSign: return 2 + sign_words(span);
    case Dtype::kInt8: return 2 + int8_words(span);
    default: throw Error("compressor", dtype_name(c.kind) + " is no compressor");
  }
}

// Floyd's sampling of k distinct values of [0, span) into a bitmap, read back in order.
void random_k_indices(uint64_t seed, const SpanKey& key, uint32_t span, uint32_t k, std::vector<uint32_t>* out) {
  std::vector<uint64_t> chosen((size_t(span) + 63) / 64, 0);
  auto taken = [&](uint32_t i) { return (chosen[i / 64] >> (i % 64)) & 1u; };
  auto take = [&](uint32_t i) { chosen[i / 64] |= uint64_t(1) << (i % 64); };
  uint64_t state = span_state(seed, key);
  for (uint32_t j = span - k; j < span; ++j) {
    const auto t = static_cast<uint32_t>(splitmix64(state) % (uint64_t(j) + 1));
    take(taken(t) ? j : t);
  }
  out->clear();
  for (size_t w = 0; w < chosen.size(); ++w)
    for (uint64_t bits = chosen[w]; bits; bits &= bits - 1)
      out->push_back(static_cast<uint32_t>(w * 64 + __builtin_ctzll(bits)));
}

void compress(const Compressor& c, const SpanKey& key, const float* v, uint32_t span, std::vector<uint32_t>* words,
              float* q, std::vector<uint32_t>* scratch) {
  switch (c.kind) {
    case Dtype::kTopK:
      top_k_indices(v, span, compressed_count(c, span), scratch);
      encode_sparse(true, v, span, *scratch, words, q);
      return;
    case Dtype::kRandomK:
      random_k_indices(c.seed, key, span, compressed_count(c, span), scratch);
      encode_sparse(false, v, span, *scratch, words, q);
      return;
    case Dtype::kSign: encode_sign(v, span, words, q); return;
    case Dtype::kInt8: encode_int8(span_state(c.seed, key), v, span, words, q); return;
    default: throw Error("compressor", dtype_name(c.kind) + " is no compressor");
  }
}

std::optional<std::string> CompressedChunk::parse(const Compressor& c, const SpanKey& key, const uint32_t* payload,
                                                  size_t words, uint64_t total) {
  if (words < 2) return "a " + dtype_name(c.kind) + " chunk of " + std::to_string(words) + " words (at least 2)";
  kind_ = c.kind;
  span_ = payload[0];
  if (key.offset > total || span_ > total - key.offset)
    return "span [" + std::to_string(key.offset) + ", +" + std::to_string(span_) + ") outside a vector of " +
           std::to_string(total);
  const std::string what = dtype_name(c.kind) + " chunk of span " + std::to_string(span_) + ": ";
  const size_t expected = compressed_words(c, span_);
  if (c.kind == Dtype::kTopK || c.kind == Dtype::kRandomK) {
    k_ = payload[1];
    if (k_ != compressed_count(c, span_))
      return what + "k = " + std::to_string(k_) + " but this peer's ratio gives " +
             std::to_string(compressed_count(c, span_)) + " (do the peers' algorithm.ratio differ?)";
  } else {
    scale_ = bits_float(payload[1]);
  }
  if (words != expected)
    return what + std::to_string(words) + " words where " + std::to_string(expected) + " were expected";
  if (c.kind == Dtype::kTopK) {
    index_ = payload + 2;
    values_ = reinterpret_cast<const float*>(payload + 2 + k_);
    for (uint32_t i = 0; i < k_; ++i)
      if (index_[i] >= span_ || (i > 0 && index_[i] <= index_[i - 1]))
        return what + "index " + std::to_string(index_[i]) + " at place " + std::to_string(i) +
               " is not ascending inside the span";
  } else if (c.kind == Dtype::kRandomK) {
    random_k_indices(c.seed, key, span_, k_, &random_index_);
    index_ = random_index_.data();
    values_ = reinterpret_cast<const float*>(payload + 2);
  } else {
    body_ = payload + 2;
    if (c.kind == Dtype::kInt8)
      for (uint32_t i = 0; i < span_; ++i)
        if (reinterpret_cast<const uint8_t*>(body_)[i] == 0x80) return what + "int8 value -128 (outside -127..127)";
  }
  return std::nullopt;
}

bool CompressedChunk::finite(double* sum_squares) const {
  double sum = 0;
  if (kind_ == Dtype::kTopK || kind_ == Dtype::kRandomK) {
    for (uint32_t i = 0; i < k_; ++i) sum += double(values_[i]) * values_[i];
  } else if (kind_ == Dtype::kSign) {
    sum = double(span_) * scale_ * scale_;
  } else {
    for (uint32_t i = 0; i < span_; ++i) sum += double(int8_value(body_, i, scale_)) * int8_value(body_, i, scale_);
  }
  *sum_squares = sum;
  return std::isfinite(sum) && std::isfinite(scale_);
}

void CompressedChunk::add_to(float a, float* y) const {
  if (kind_ == Dtype::kTopK || kind_ == Dtype::kRandomK) {
    for (uint32_t i = 0; i < k_; ++i) y[index_[i]] += a * values_[i];
  } else if (kind_ == Dtype::kSign) {
    for (uint32_t i = 0; i < span_; ++i) y[i] += a * sign_value(body_, i, scale_);
  } else {
    for (uint32_t i = 0; i < span_; ++i) y[i] += a * int8_value(body_, i, scale_);
  }
}

}  // namespace gossip::peer
