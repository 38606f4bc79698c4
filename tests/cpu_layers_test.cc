// Forward values of the CPU layer kernels against direct computations (their gradients are
// checked by finite differences in network_test.cc).
#include "kernels/cpu_layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gossip::kernels {
namespace {

std::vector<float> randn(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(CpuLayers, ConvMatchesTheDefinition) {
  CpuLayers k;
  const ConvShape s{2, 3, 7, 5, 4, 3, 2, 1};  // batch 2, 3×7×5 in, 4 out, 3×3, stride 2, pad 1
  const auto x = randn(size_t(s.batch) * s.in_c * s.h * s.w, 1);
  const auto w = randn(size_t(s.out_c) * s.in_c * 9, 2), b = randn(s.out_c, 3);
  std::vector<float> y(size_t(s.batch) * s.out_c * s.out_h() * s.out_w()), ws(k.conv2d_workspace(s));
  k.conv2d_forward(s, x.data(), w.data(), b.data(), y.data(), ws.data());
  ASSERT_EQ(s.out_h(), 4);
  ASSERT_EQ(s.out_w(), 3);
  for (int n = 0; n < s.batch; ++n)
    for (int o = 0; o < s.out_c; ++o)
      for (int i = 0; i < s.out_h(); ++i)
        for (int j = 0; j < s.out_w(); ++j) {
          double sum = b[o];
          for (int c = 0; c < s.in_c; ++c)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int h = i * 2 - 1 + ki, v = j * 2 - 1 + kj;
                if (h < 0 || h >= s.h || v < 0 || v >= s.w) continue;
                sum += double(w[((o * s.in_c + c) * 3 + ki) * 3 + kj]) * x[((n * s.in_c + c) * s.h + h) * s.w + v];
              }
          EXPECT_NEAR(y[((n * s.out_c + o) * s.out_h() + i) * s.out_w() + j], sum, 1e-4);
        }
}

TEST(CpuLayers, AttentionMatchesTheDefinitionAndIsCausal) {
  CpuLayers k;
  const AttentionShape s{2, 5, 6, 2};  // batch 2, T 5, dim 6, 2 heads of 3
  auto qkv = randn(size_t(s.batch) * s.t * 3 * s.dim, 4);
  std::vector<float> out(size_t(s.batch) * s.t * s.dim), att(size_t(s.batch) * s.heads * s.t * s.t);
  k.attention_forward(s, qkv.data(), out.data(), att.data());
  const int hs = 3;
  auto at = [&](int n, int t, int part, int h, int i) { return double(qkv[(n * s.t + t) * 18 + part * 6 + h * hs + i]); };
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h)
      for (int t = 0; t < s.t; ++t) {
        std::vector<double> score(t + 1);
        double top = -1e300, sum = 0;
        for (int u = 0; u <= t; ++u) {
          for (int i = 0; i < hs; ++i) score[u] += at(n, t, 0, h, i) * at(n, u, 1, h, i) / std::sqrt(3.0);
          top = std::max(top, score[u]);
        }
        for (double& v : score) sum += (v = std::exp(v - top));
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int u = 0; u <= t; ++u) o += score[u] / sum * at(n, u, 2, h, i);
          EXPECT_NEAR(out[(n * s.t + t) * 6 + h * hs + i], o, 1e-5);
        }
      }
  // Changing the last position's keys and values leaves every earlier output as it was.
  std::vector<float> before = out;
  for (int n = 0; n < s.batch; ++n)
    for (int i = 6; i < 18; ++i) qkv[(n * s.t + s.t - 1) * 18 + i] += 1.0f;
  k.attention_forward(s, qkv.data(), out.data(), att.data());
  for (int n = 0; n < s.batch; ++n)
    for (int t = 0; t + 1 < s.t; ++t)
      for (int i = 0; i < 6; ++i) EXPECT_EQ(out[(n * s.t + t) * 6 + i], before[(n * s.t + t) * 6 + i]);
}

TEST(CpuLayers, NormsNormalise) {
  CpuLayers k;
  const int rows = 3, cols = 16;
  auto x = randn(rows * cols, 5);
  for (float& v : x) v = 3 * v + 7;
  std::vector<float> gamma(cols, 2.0f), beta(cols, 0.5f), y(rows * cols), mean(rows), rstd(rows);
  k.layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < cols; ++c) m += y[r * cols + c];
    m /= cols;
    for (int c = 0; c < cols; ++c) v += (y[r * cols + c] - m) * (y[r * cols + c] - m);
    EXPECT_NEAR(m, 0.5, 1e-5);
    EXPECT_NEAR(std::sqrt(v / cols), 2.0, 1e-3);
  }
  // GroupNorm: 2 samples, 4 channels in 2 groups of 2, planes of 9.
  const int batch = 2, ch = 4, plane = 9, groups = 2;
  auto g = randn(batch * ch * plane, 6);
  std::vector<float> ones(ch, 1.0f), zeros(ch, 0.0f), gy(g.size()), gm(batch * groups), gr(batch * groups);
  k.groupnorm_forward(g.data(), ones.data(), zeros.data(), gy.data(), gm.data(), gr.data(), batch, ch, plane, groups);
  for (int n = 0; n < batch; ++n)
    for (int gi = 0; gi < groups; ++gi) {
      double m = 0, v = 0;
      const float* p = gy.data() + (n * ch + gi * 2) * plane;
      for (int i = 0; i < 2 * plane; ++i) m += p[i];
      for (int i = 0; i < 2 * plane; ++i) v += p[i] * p[i];
      EXPECT_NEAR(m / (2 * plane), 0.0, 1e-5);
      EXPECT_NEAR(v / (2 * plane), 1.0, 1e-3);
    }
}

TEST(CpuLayers, ActivationsPoolsAndEmbeddings) {
  CpuLayers k;
  const float x[4] = {1.0f, -1.0f, 0.0f, NAN};
  float y[4];
  k.gelu_forward(x, y, 3);
  EXPECT_NEAR(y[0], 0.841192f, 1e-5);  // tanh-form GELU(1)
  EXPECT_NEAR(y[1], -0.158808f, 1e-5);
  EXPECT_EQ(y[2], 0.0f);
  k.relu_forward(x, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[3])) << "ReLU must not hide a NaN";

  const PoolShape s{1, 1, 4, 4, 2, 2};
  const float img[16] = {1, 2, 0, 0, 3, 4, 0, 9, 0, 0, 5, 0, 0, NAN, 0, 0};
  float pooled[4];
  int32_t arg[4];
  k.maxpool2d_forward(s, img, pooled, arg);
  EXPECT_EQ(pooled[0], 4.0f);
  EXPECT_EQ(arg[0], 5);
  EXPECT_EQ(pooled[1], 9.0f);
  EXPECT_TRUE(std::isnan(pooled[2])) << "max pooling must not hide a NaN";
  EXPECT_EQ(pooled[3], 5.0f);
  float avg[1];
  k.global_avgpool_forward(img, avg, 1, 1, 8);
  EXPECT_FLOAT_EQ(avg[0], 19.0f / 8);

  const int32_t tokens[2] = {2, 0};
  const float wte[6] = {1, 2, 3, 4, 5, 6}, wpe[4] = {10, 20, 30, 40};
  float e[4];
  k.embedding_forward(tokens, wte, wpe, e, 1, 2, 2);
  EXPECT_EQ(std::vector<float>(e, e + 4), (std::vector<float>{15, 26, 31, 42}));
}

// Max pooling against a plain reference (NaN wins, the first of equals stays) on planes whose
// widths exercise the 2×2 path's four-wide steps and its tail, with ties and NaNs, and on a 3×3
// stride-2 window (the general loop).
TEST(CpuLayers, MaxPoolMatchesAPlainReference) {
  CpuLayers k;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(0, 5);  // few distinct values: many ties
  for (const PoolShape& s : {PoolShape{2, 3, 19, 21, 2, 2}, PoolShape{1, 2, 28, 28, 2, 2},
                             PoolShape{1, 2, 9, 11, 3, 2}}) {
    std::vector<float> x(size_t(s.batch) * s.c * s.h * s.w);
    for (float& v : x) v = small(rng) == 0 && rng() % 7 == 0 ? NAN : float(small(rng));
    const size_t out = size_t(s.batch) * s.c * s.out_h() * s.out_w();
    std::vector<float> y(out);
    std::vector<int32_t> arg(out);
    k.maxpool2d_forward(s, x.data(), y.data(), arg.data());
    size_t o = 0, nans = 0;
    for (int p = 0; p < s.batch * s.c; ++p)
      for (int oh = 0; oh < s.out_h(); ++oh)
        for (int ow = 0; ow < s.out_w(); ++ow, ++o) {
          const float* in = x.data() + size_t(p) * s.h * s.w;
          int best = oh * s.stride * s.w + ow * s.stride;
          for (int i = 0; i < s.k; ++i)
            for (int j = 0; j < s.k; ++j) {
              const int at = (oh * s.stride + i) * s.w + ow * s.stride + j;
              if (in[at] > in[best] || std::isnan(in[at])) best = at;
            }
          ASSERT_EQ(arg[o], best) << "output " << o << " of " << s.h << "x" << s.w;
          nans += std::isnan(y[o]);
          if (!std::isnan(in[best])) {
            ASSERT_EQ(y[o], in[best]);
          }
        }
    EXPECT_GT(nans, 0u) << "the data must contain NaNs for the test to mean anything";
  }
}

}  // namespace
}  // namespace gossip::kernels
