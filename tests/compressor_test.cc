// CHOCO's compression operators: what each keeps of a span, that the receiver decodes exactly
// what the sender added to its own public copy, random-k's shared indices, int8's unbiased
// rounding, and a clear reason for every malformed payload.
#include "algorithms/compressor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace gossip::peer {
namespace {

std::vector<float> sample(uint32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Encoded {
  std::vector<uint32_t> words;
  std::vector<float> q;
};

Encoded encode(const Compressor& c, const SpanKey& key, const std::vector<float>& v) {
  Encoded e;
  e.q.assign(v.size(), -99.0f);
  std::vector<uint32_t> scratch;
  compress(c, key, v.data(), static_cast<uint32_t>(v.size()), &e.words, e.q.data(), &scratch);
  return e;
}

TEST(Compressor, TopKKeepsTheLargestMagnitudes) {
  const std::vector<float> v = sample(1000, 1);
  const Compressor c{Dtype::kTopK, 0.05, 1};
  const Encoded e = encode(c, {3, 0, 0}, v);
  ASSERT_EQ(compressed_count(c, 1000), 50u);
  ASSERT_EQ(e.words.size(), 2u + 2 * 50);
  EXPECT_EQ(e.words.size(), compressed_words(c, 1000));
  std::vector<float> magnitudes;
  for (float x : v) magnitudes.push_back(std::fabs(x));
  std::sort(magnitudes.rbegin(), magnitudes.rend());
  int kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (e.q[i] != 0.0f) {
      ++kept;
      EXPECT_EQ(e.q[i], v[i]);
      EXPECT_GE(std::fabs(v[i]), magnitudes[49]);
    } else {
      EXPECT_LE(std::fabs(v[i]), magnitudes[49]);
    }
  }
  EXPECT_EQ(kept, 50);
}

TEST(Compressor, RandomKIndicesAreSharedAndUniform) {
  const uint32_t span = 200, k = 10;
  std::vector<uint32_t> a, b;
  random_k_indices(5, {7, 2, 400}, span, k, &a);
  random_k_indices(5, {7, 2, 400}, span, k, &b);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), k);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
  random_k_indices(5, {8, 2, 400}, span, k, &b);
  EXPECT_NE(a, b) << "another round draws other indices";
  random_k_indices(5, {7, 3, 400}, span, k, &b);
  EXPECT_NE(a, b) << "another sender draws other indices";
  // Every index is drawn k/span of the time: 20000 draws of 10 give 1000 per index, σ ≈ 31.
  std::vector<int> hits(span, 0);
  for (uint64_t round = 0; round < 20000; ++round) {
    random_k_indices(5, {round, 0, 0}, span, k, &a);
    for (uint32_t i : a) ++hits[i];
  }
  for (uint32_t i = 0; i < span; ++i) EXPECT_NEAR(hits[i], 1000, 160) << "index " << i;
  random_k_indices(5, {1, 0, 0}, span, span, &a);  // k = span: every index once
  for (uint32_t i = 0; i < span; ++i) EXPECT_EQ(a[i], i);
}

TEST(Compressor, SignSendsOneBitAndTheMeanMagnitude) {
  const std::vector<float> v = sample(100, 2);
  const Encoded e = encode({Dtype::kSign, 0, 1}, {0, 0, 0}, v);
  EXPECT_EQ(e.words.size(), 2u + 4);  // 100 bits in 4 words
  double l1 = 0;
  for (float x : v) l1 += std::fabs(x);
  const float scale = static_cast<float>(l1 / 100);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(e.q[i], v[i] >= 0 ? scale : -scale) << i;
}

TEST(Compressor, Int8RoundsStochasticallyWithoutBias) {
  const std::vector<float> v = sample(64, 3);
  float top = 0;
  for (float x : v) top = std::max(top, std::fabs(x));
  const float scale = top / 127.0f;
  std::vector<double> mean(v.size(), 0.0);
  const int draws = 4000;
  for (int round = 0; round < draws; ++round) {
    const Encoded e = encode({Dtype::kInt8, 0, 9}, {uint64_t(round), 1, 0}, v);
    ASSERT_EQ(e.words.size(), 2u + 16);
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_LT(std::fabs(e.q[i] - v[i]), scale * 1.0001f) << "one step of the grid at most";
      mean[i] += e.q[i] / draws;
    }
  }
  // Each draw's error is within ±scale: the mean of 4000 is within ~4σ = 4·scale/(2·√4000).
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(mean[i], v[i], 0.04 * scale) << i;
}

// The receiver's decode adds exactly the sender's q (what it added to its own public copy).
TEST(Compressor, ReceiversDecodeWhatTheSenderKeptBitForBit) {
  const std::vector<float> v = sample(777, 4);
  for (Dtype kind : {Dtype::kTopK, Dtype::kRandomK, Dtype::kSign, Dtype::kInt8}) {
    const Compressor c{kind, 0.1, 11};
    const SpanKey key{5, 3, 1000};
    const Encoded e = encode(c, key, v);
    ASSERT_EQ(e.words.size(), compressed_words(c, 777)) << dtype_name(kind);
    CompressedChunk chunk;
    ASSERT_EQ(chunk.parse(c, key, e.words.data(), e.words.size(), 1777), std::nullopt) << dtype_name(kind);
    EXPECT_EQ(chunk.span(), 777u);
    std::vector<float> y(777, 0.0f);
    chunk.add_to(1.0f, y.data());
    EXPECT_EQ(std::memcmp(y.data(), e.q.data(), y.size() * 4), 0) << dtype_name(kind);
    double sum = 0, expected = 0;
    for (float q : e.q) expected += double(q) * q;
    EXPECT_TRUE(chunk.finite(&sum));
    EXPECT_NEAR(sum, expected, 1e-9 * expected) << dtype_name(kind);
  }
}

TEST(Compressor, NaNValuesAreSeenAfterDecoding) {
  std::vector<float> v = sample(40, 5);
  v[7] = std::nanf("");
  for (Dtype kind : {Dtype::kTopK, Dtype::kSign, Dtype::kInt8}) {
    const Compressor c{kind, 0.5, 1};
    const Encoded e = encode(c, {0, 0, 0}, v);
    CompressedChunk chunk;
    ASSERT_EQ(chunk.parse(c, {0, 0, 0}, e.words.data(), e.words.size(), 40), std::nullopt);
    double sum = 0;
    if (kind != Dtype::kInt8) {
      EXPECT_FALSE(chunk.finite(&sum)) << dtype_name(kind);
    } else {  // a byte cannot hold a NaN: it goes as 0 (the sender's own model keeps it)
      EXPECT_TRUE(chunk.finite(&sum));
      EXPECT_EQ(e.q[7], 0.0f);
    }
  }
}

std::string problem(const Compressor& c, std::vector<uint32_t> words, uint64_t offset = 0, uint64_t total = 100) {
  CompressedChunk chunk;
  return chunk.parse(c, {0, 0, offset}, words.data(), words.size(), total).value_or("accepted");
}

TEST(Compressor, MalformedPayloadsAreRefusedWithTheReason) {
  const Compressor top{Dtype::kTopK, 0.02, 1}, sign{Dtype::kSign, 0, 1}, int8{Dtype::kInt8, 0, 1},
      random{Dtype::kRandomK, 0.02, 1};
  EXPECT_EQ(problem(top, {100, 2, 3, 9, 0, 0}), "accepted");
  EXPECT_EQ(problem(top, {100}), "a top-k chunk of 1 words (at least 2)");
  EXPECT_EQ(problem(top, {100, 2, 3, 9, 0, 0}, 50), "span [50, +100) outside a vector of 100");
  EXPECT_NE(problem(top, {100, 3, 1, 2, 3, 0, 0, 0}).find("k = 3 but this peer's ratio gives 2"), std::string::npos);
  EXPECT_NE(problem(top, {100, 2, 9, 3, 0, 0}).find("not ascending"), std::string::npos);
  EXPECT_NE(problem(top, {100, 2, 3, 100, 0, 0}).find("index 100 at place 1"), std::string::npos);
  EXPECT_NE(problem(top, {100, 2, 3, 9, 0}).find("5 words where 6 were expected"), std::string::npos);
  EXPECT_NE(problem(random, {100, 2, 0}).find("3 words where 4 were expected"), std::string::npos);
  EXPECT_EQ(problem(sign, {40, 0x3f800000, 0, 0}), "accepted");
  EXPECT_NE(problem(sign, {40, 0x3f800000, 0}).find("3 words where 4 were expected"), std::string::npos);
  EXPECT_EQ(problem(int8, {5, 0x3f800000, 0x7f7f7f7f, 0x01}), "accepted");
  EXPECT_NE(problem(int8, {5, 0x3f800000, 0x7f807f7f, 0x01}).find("int8 value -128"), std::string::npos);
}

// Whatever the words, parse either refuses them or yields a chunk that stays inside its span
// (the fuzz target does the same with the fuzzer's inputs; ASan watches both).
TEST(Compressor, RandomWordsNeverReachOutsideTheSpan) {
  std::mt19937 rng(6);
  for (Dtype kind : {Dtype::kTopK, Dtype::kRandomK, Dtype::kSign, Dtype::kInt8})
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<uint32_t> words(rng() % 12);
      for (uint32_t& w : words) w = rng() % 4 == 0 ? rng() : rng() % 40;
      const Compressor c{kind, 0.1, 1};
      CompressedChunk chunk;
      if (chunk.parse(c, {0, 0, 10}, words.data(), words.size(), 50)) continue;
      ASSERT_LE(10 + chunk.span(), 50u);
      std::vector<float> y(chunk.span());
      chunk.add_to(1.0f, y.data());
    }
}

}  // namespace
}  // namespace gossip::peer
