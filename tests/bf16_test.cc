#include "kernels/bf16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace gossip::kernels {
namespace {

TEST(Bf16, RoundsToNearestTiesToEven) {
  const float ulp = std::ldexp(1.0f, -7);  // bf16's spacing in [1, 2)
  EXPECT_EQ(from_bf16(to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + ulp)), 1.0f + ulp);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 0.5f * ulp)), 1.0f) << "a tie goes to the even neighbour (down)";
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 1.5f * ulp)), 1.0f + 2 * ulp) << "a tie goes to the even neighbour (up)";
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 0.51f * ulp)), 1.0f + ulp);
  EXPECT_EQ(from_bf16(to_bf16(-1.0f - 0.49f * ulp)), -1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(from_bf16(to_bf16(-0.0f))), std::bit_cast<uint32_t>(-0.0f));
}

TEST(Bf16, NonFiniteValuesStayNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(from_bf16(to_bf16(inf)), inf);
  EXPECT_EQ(from_bf16(to_bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  // A NaN whose payload sits only in the low 16 bits must not round into ±Inf.
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::bit_cast<float>(0xFF80FFFFu)))));
  EXPECT_EQ(from_bf16(to_bf16(std::numeric_limits<float>::max())), inf) << "beyond bf16's largest: IEEE overflow";
}

TEST(Bf16, RelativeErrorIsAtMostHalfAnUlp) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = normal(rng);
    EXPECT_LE(std::fabs(from_bf16(to_bf16(x)) - x), std::ldexp(std::fabs(x), -8)) << x;
  }
}

// The array form (vectorised, AVX2 where the CPU has it) agrees with the scalar one, tails too.
TEST(Bf16, ArrayMatchesScalar) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (size_t n : {0, 1, 7, 8, 9, 33, 1000}) {
    std::vector<float> x(n);
    for (float& v : x) v = std::bit_cast<float>(bits(rng));  // every class: NaN, Inf, subnormal
    std::vector<uint16_t> out(n + 1, 0xABCD);
    to_bf16(x.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], to_bf16(x[i])) << "n " << n << " i " << i;
    EXPECT_EQ(out[n], 0xABCD) << "wrote past the end";
  }
}

}  // namespace
}  // namespace gossip::kernels
