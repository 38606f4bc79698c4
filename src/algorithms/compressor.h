// Compression operators Q for CHOCO-SGD (Koloskova et al. 2019), one span of a vector at a time,
// and the one encoding they travel in. Pure functions: what a sender adds to its public copy and
// what every receiver decodes are the same floats, bit for bit.
//
// A compressed chunk is a payload of 4-byte little-endian words (wire/wire_format.h's compressed
// dtypes):
//   word 0   span: how many values of the vector it covers, from the header's offset
//   word 1   top-k / random-k: k; sign / int8: the scale (a float)
//   then     top-k:    k ascending indices (< span), then their k float values
//            random-k: k float values at the indices random_k_indices draws from the run's seed
//            sign:     ⌈span/32⌉ words, bit i set when value i is +scale (else −scale)
//            int8:     ⌈span/4⌉ words of int8 (−127..127, value i = scale·b_i)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/wire_format.h"

namespace gossip::peer {

struct Compressor {
  Dtype kind = Dtype::kTopK;  // kTopK, kRandomK, kSign or kInt8
  double ratio = 0.01;        // top-k / random-k: k = ⌈ratio·span⌉
  uint64_t seed = 1;          // the run's seed: random-k's indices, int8's rounding
};

// Who drew a span's random numbers: the same on the sender and every receiver.
struct SpanKey {
  uint64_t round = 0;
  uint32_t sender = 0;  // rank in the current view
  uint64_t offset = 0;  // the span's first value in the vector
};

// k for a span (at least 1 for a non-empty span).
uint32_t compressed_count(const Compressor& c, uint32_t span);
// Words a span's payload takes (its size on the wire / 4).
size_t compressed_words(const Compressor& c, uint32_t span);
// random-k's k distinct indices in [0, span), ascending, from (seed, key).
void random_k_indices(uint64_t seed, const SpanKey& key, uint32_t span, uint32_t k, std::vector<uint32_t>* out);

// Encodes Q(v[0, span)) into `words` (resized) and writes the decoded values into q[0, span).
// `scratch` is reused between calls (top-k's and random-k's indices).
void compress(const Compressor& c, const SpanKey& key, const float* v, uint32_t span, std::vector<uint32_t>* words,
              float* q, std::vector<uint32_t>* scratch);

// A received chunk's payload, checked and ready to add.
class CompressedChunk {
 public:
  // Why `payload` (`words` words of dtype c.kind, starting at `offset` of a vector of `total`
  // values) is malformed, or nullopt when it is well formed. `key` names the sender (random-k).
  std::optional<std::string> parse(const Compressor& c, const SpanKey& key, const uint32_t* payload, size_t words,
                                   uint64_t total);
  uint32_t span() const { return span_; }
  // True when every decoded value is finite; then Σ q_i² too.
  bool finite(double* sum_squares) const;
  // y[i] += a·q_i for the span (y points at the span's first value).
  void add_to(float a, float* y) const;

 private:
  Dtype kind_ = Dtype::kTopK;
  uint32_t span_ = 0, k_ = 0;
  float scale_ = 0;
  const uint32_t* index_ = nullptr;  // top-k: into the payload; random-k: random_index_
  const float* values_ = nullptr;
  const uint32_t* body_ = nullptr;   // sign bits, int8 bytes
  std::vector<uint32_t> random_index_;
};

}  // namespace gossip::peer
