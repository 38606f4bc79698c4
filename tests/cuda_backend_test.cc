// CUDA backend checked against the CPU reference; skipped when no device answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_vs_cpu.h"
#include "kernels/backend.h"
#include "kernels/bf16.h"

namespace gossip::kernels {
namespace {

// The CUDA backend is a module loaded only for a GPU; a build with nvcc must be able to load it
// on any machine (its cuBLAS and runtime symbols resolve), so this runs without a device too.
TEST(CudaModule, LoadsWhereverTheBuildHasCuda) {
  std::string why;
  const bool loads = cuda_backend_module_loads(&why);
#ifdef GOSSIP_HAVE_CUDA
  EXPECT_TRUE(loads) << why;
#else
  EXPECT_FALSE(loads);
  GTEST_SKIP() << why;
#endif
}


TEST_F(CudaVsCpu, GemmAllTransposes) {
  const int m = 33, n = 17, k = 65;
  auto a = random(m * k, 1), b = random(k * n, 2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      on_gpu(a);
      float* da = last();
      on_gpu(b);
      float* db = last();
      on_gpu(std::vector<float>(m * n, 0));
      float* dc = last();
      gpu_->gemm(ta, tb, m, n, k, 1.0f, da, db, 0.0f, dc);
      std::vector<float> ref(m * n);
      cpu_->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, ref.data());
      auto got = fetch(dc, m * n);
      for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], ref[i], 1e-3) << ta << tb << i;
    }
}

TEST_F(CudaVsCpu, ElementwiseKernels) {
  const int rows = 37, cols = 13;
  auto y = random(rows * cols, 3), bias = random(cols, 4), g = random(rows * cols, 5);
  on_gpu(y);
  float* dy = last();
  on_gpu(bias);
  float* dbias = last();
  gpu_->bias_act_forward(dy, dbias, rows, cols, true);
  std::vector<float> ref = y;
  cpu_->bias_act_forward(ref.data(), bias.data(), rows, cols, true);
  auto got = fetch(dy, ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6);
  on_gpu(g);
  float* dg = last();
  gpu_->relu_backward(dg, dy, ref.size());
  std::vector<float> gref = g;
  cpu_->relu_backward(gref.data(), ref.data(), ref.size());
  auto ggot = fetch(dg, g.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(ggot[i], gref[i], 1e-6);
  on_gpu(std::vector<float>(cols));
  float* dsum = last();
  gpu_->column_sum(dg, dsum, rows, cols);
  std::vector<float> sref(cols);
  cpu_->column_sum(gref.data(), sref.data(), rows, cols);
  auto sgot = fetch(dsum, cols);
  for (int i = 0; i < cols; ++i) ASSERT_NEAR(sgot[i], sref[i], 1e-4);
}

TEST_F(CudaVsCpu, SoftmaxAndSgd) {
  const int rows = 50, cols = 10;
  auto z = random(rows * cols, 6);
  std::vector<int32_t> labels(rows);
  for (int i = 0; i < rows; ++i) labels[i] = i % cols;
  on_gpu(z);
  float* dz = last();
  on_gpu(std::vector<float>(rows * cols));
  float* dd = last();
  DeviceArray<int32_t> dl(*gpu_, rows);
  gpu_->upload(dl.get(), labels.data(), rows * 4);
  LossResult g = gpu_->softmax_xent(dz, dl.get(), rows, cols, dd, 0.5f, 0.0f);
  std::vector<float> dref(rows * cols);
  LossResult c = cpu_->softmax_xent(z.data(), labels.data(), rows, cols, dref.data(), 0.5f, 0.0f);
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-3);
  EXPECT_EQ(g.correct, c.correct);
  auto dgot = fetch(dd, dref.size());
  for (size_t i = 0; i < dref.size(); ++i) ASSERT_NEAR(dgot[i], dref[i], 1e-5);
  // The same with label smoothing 0.1.
  g = gpu_->softmax_xent(dz, dl.get(), rows, cols, dd, 0.5f, 0.1f);
  c = cpu_->softmax_xent(z.data(), labels.data(), rows, cols, dref.data(), 0.5f, 0.1f);
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-3);
  dgot = fetch(dd, dref.size());
  for (size_t i = 0; i < dref.size(); ++i) ASSERT_NEAR(dgot[i], dref[i], 1e-5);

  auto w = random(1000, 7), grad = random(1000, 8), v = random(1000, 9);
  on_gpu(w);
  float* dw = last();
  on_gpu(grad);
  float* dgr = last();
  on_gpu(v);
  float* dv = last();
  gpu_->sgd_update(dw, dgr, dv, 1000, 0.1f, 0.9f, 1e-4f, true);
  cpu_->sgd_update(w.data(), grad.data(), v.data(), 1000, 0.1f, 0.9f, 1e-4f, true);
  auto wgot = fetch(dw, 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_NEAR(wgot[i], w[i], 1e-5);
  gpu_->axpy(1000, 0.25f, dgr, dw);
  gpu_->scale(1000, 2.0f, dw);
  cpu_->axpy(1000, 0.25f, grad.data(), w.data());
  cpu_->scale(1000, 2.0f, w.data());
  wgot = fetch(dw, 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_NEAR(wgot[i], w[i], 1e-5);
}

TEST_F(CudaVsCpu, AdamWAndNorm) {
  const size_t n = 5000;
  auto w = random(n, 11), grad = random(n, 12), m = random(n, 13), v = random(n, 14);
  for (float& x : v) x = x * x;  // a second moment is never negative
  on_gpu(w);
  float* dw = last();
  on_gpu(grad);
  float* dg = last();
  on_gpu(m);
  float* dm = last();
  on_gpu(v);
  float* dv = last();
  AdamWStep s{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1 - 0.9f * 0.9f * 0.9f, 1 - 0.999f * 0.999f * 0.999f};
  gpu_->adamw_update(dw, dg, dm, dv, n, s);
  cpu_->adamw_update(w.data(), grad.data(), m.data(), v.data(), n, s);
  const auto wgot = fetch(dw, n), mgot = fetch(dm, n), vgot = fetch(dv, n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(mgot[i], m[i], 1e-6) << i;
    ASSERT_NEAR(vgot[i], v[i], 1e-6) << i;
    ASSERT_NEAR(wgot[i], w[i], 1e-5) << i;
  }
  EXPECT_NEAR(gpu_->norm2(dg, n), cpu_->norm2(grad.data(), n), 1e-4 * cpu_->norm2(grad.data(), n));
}

TEST_F(CudaVsCpu, LargeUploadDownloadRoundTrip) {
  // Larger than the pinned staging buffer, so the chunked path is exercised.
  auto big = random(3 << 20, 10);
  on_gpu(big);
  auto back = fetch(last(), big.size());
  EXPECT_EQ(back, big);
}

// The cases the first kernels' tests left out: fill, bias without ReLU, NaN inputs (which must
// stay visible as on the CPU, not be clamped away), softmax over more classes than a warp and
// without a gradient buffer, SGD without Nesterov, and arithmetic on arrays larger than the grid.
TEST_F(CudaVsCpu, FillAndBiasWithoutRelu) {
  on_gpu(std::vector<float>(1000, 0));
  gpu_->fill(last(), 2.5f, 1000);
  EXPECT_EQ(fetch(last(), 1000), std::vector<float>(1000, 2.5f));
  const int rows = 9, cols = 70;
  auto y = random(rows * cols, 20), bias = random(cols, 21);
  on_gpu(y);
  float* dy = last();
  on_gpu(bias);
  gpu_->bias_act_forward(dy, last(), rows, cols, false);
  cpu_->bias_act_forward(y.data(), bias.data(), rows, cols, false);
  const auto got = fetch(dy, y.size());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(got[i], y[i]) << i;
  EXPECT_LT(*std::min_element(got.begin(), got.end()), 0.0f) << "no ReLU: negative values stay";
}

TEST_F(CudaVsCpu, NanInputsStayVisibleAsOnTheCpu) {
  const int rows = 4, cols = 8;
  auto y = random(rows * cols, 22), bias = random(cols, 23), g = random(rows * cols, 24);
  y[3] = std::nanf("");
  y[17] = -std::numeric_limits<float>::infinity();
  on_gpu(y);
  float* dy = last();
  on_gpu(bias);
  gpu_->bias_act_forward(dy, last(), rows, cols, true);
  cpu_->bias_act_forward(y.data(), bias.data(), rows, cols, true);
  const auto got = fetch(dy, y.size());
  ASSERT_TRUE(std::isnan(y[3])) << "the CPU reference keeps a NaN through ReLU";
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(std::isnan(got[i]), std::isnan(y[i])) << i;
    if (!std::isnan(y[i])) {
      ASSERT_FLOAT_EQ(got[i], y[i]) << i;
    }
  }
  on_gpu(g);
  float* dg = last();
  gpu_->relu_backward(dg, dy, g.size());
  cpu_->relu_backward(g.data(), y.data(), g.size());
  EXPECT_EQ(g[3], 0.0f) << "no gradient where y is NaN";
  EXPECT_EQ(fetch(dg, g.size()), g);
}

TEST_F(CudaVsCpu, SoftmaxOverManyClassesAndWithoutGradient) {
  const int rows = 7, cols = 300;  // more classes than one warp's lanes
  auto z = random(rows * cols, 25);
  std::vector<int32_t> labels(rows);
  for (int i = 0; i < rows; ++i) labels[i] = (i * 37) % cols;
  on_gpu(z);
  float* dz = last();
  DeviceArray<int32_t> dl(*gpu_, rows);
  gpu_->upload(dl.get(), labels.data(), rows * 4);
  on_gpu(std::vector<float>(rows * cols));
  float* dd = last();
  std::vector<float> dref(rows * cols);
  const LossResult g = gpu_->softmax_xent(dz, dl.get(), rows, cols, dd, 1.0f, 0.0f);
  const LossResult c = cpu_->softmax_xent(z.data(), labels.data(), rows, cols, dref.data(), 1.0f, 0.0f);
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-4 * c.loss_sum);
  EXPECT_EQ(g.correct, c.correct);
  const auto dgot = fetch(dd, dref.size());
  for (size_t i = 0; i < dref.size(); ++i) ASSERT_NEAR(dgot[i], dref[i], 1e-6) << i;
  const LossResult no_grad = gpu_->softmax_xent(dz, dl.get(), rows, cols, nullptr, 1.0f, 0.0f);
  EXPECT_NEAR(no_grad.loss_sum, c.loss_sum, 1e-4 * c.loss_sum);
  EXPECT_EQ(no_grad.correct, c.correct);
}

TEST_F(CudaVsCpu, SgdWithoutNesterov) {
  auto w = random(3000, 26), grad = random(3000, 27), v = random(3000, 28);
  on_gpu(w);
  float* dw = last();
  on_gpu(grad);
  float* dg = last();
  on_gpu(v);
  float* dv = last();
  gpu_->sgd_update(dw, dg, dv, 3000, 0.05f, 0.9f, 5e-4f, false);
  cpu_->sgd_update(w.data(), grad.data(), v.data(), 3000, 0.05f, 0.9f, 5e-4f, false);
  const auto wgot = fetch(dw, 3000), vgot = fetch(dv, 3000);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_NEAR(wgot[i], w[i], 1e-6) << i;
    ASSERT_NEAR(vgot[i], v[i], 1e-6) << i;
  }
}

TEST_F(CudaVsCpu, ArithmeticOnLargeArrays) {
  const size_t n = (size_t{1} << 25) + 3;  // 33.5 M floats: more elements than one grid pass covers
  auto x = random(n, 29), y = random(n, 30);
  on_gpu(x);
  float* dx = last();
  on_gpu(y);
  float* dy = last();
  gpu_->axpy(n, 0.5f, dx, dy);
  gpu_->scale(n, -2.0f, dy);
  cpu_->axpy(n, 0.5f, x.data(), y.data());
  cpu_->scale(n, -2.0f, y.data());
  const auto got = fetch(dy, n);
  for (size_t i = 0; i < n; i += 997) ASSERT_NEAR(got[i], y[i], 1e-5) << i;
  ASSERT_NEAR(got[n - 1], y[n - 1], 1e-5);
  EXPECT_NEAR(gpu_->norm2(dy, n), cpu_->norm2(y.data(), n), 1e-5 * cpu_->norm2(y.data(), n));
}

// The data path's kernels: gather_rows from bytes and from floats, gather_windows, copy_bytes, and the loss
// tally (the sum of what softmax_xent returns, read once) against the CPU's.
TEST_F(CudaVsCpu, GatherRowsCopyAndLossTallyAgreeWithTheCpu) {
  const int data_rows = 3000, cols = 784, count = 128;
  std::vector<uint8_t> bytes(size_t(data_rows) * cols);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 131 + 7) % 256);
  std::vector<float> table(256), floats = random(size_t(data_rows) * cols, 90);
  for (int v = 0; v < 256; ++v) table[v] = float(v) / 255.0f - 0.286f;
  std::vector<int32_t> labels(data_rows), rows(count);
  for (int r = 0; r < data_rows; ++r) labels[r] = r % 10;
  for (int i = 0; i < count; ++i) rows[i] = (i * 7919) % data_rows;
  DeviceArray<uint8_t> dbytes(*gpu_, bytes.size());
  DeviceArray<int32_t> dlabels(*gpu_, labels.size()), drows(*gpu_, rows.size()), dy(*gpu_, count);
  gpu_->upload(dbytes.get(), bytes.data(), bytes.size());
  gpu_->upload(dlabels.get(), labels.data(), labels.size() * 4);
  gpu_->upload(drows.get(), rows.data(), rows.size() * 4);
  on_gpu(table);
  float* dtable = last();
  on_gpu(floats);
  float* dfloats = last();
  on_gpu(std::vector<float>(size_t(count) * cols));
  float* dx = last();
  for (bool from_bytes : {true, false}) {
    std::vector<float> x(size_t(count) * cols);
    std::vector<int32_t> y(count), got_y(count);
    RowGather g;
    g.bytes = from_bytes ? bytes.data() : nullptr, g.table = table.data(), g.floats = floats.data();
    g.labels = labels.data(), g.cols = cols, g.rows = rows.data(), g.count = count, g.x = x.data(), g.y = y.data();
    cpu_->gather_rows(g);
    g.bytes = from_bytes ? dbytes.get() : nullptr, g.table = dtable, g.floats = dfloats;
    g.labels = dlabels.get(), g.rows = drows.get(), g.x = dx, g.y = dy.get();
    gpu_->gather_rows(g);
    EXPECT_EQ(fetch(dx, x.size()), x) << "from bytes " << from_bytes;
    gpu_->download(got_y.data(), dy.get(), count * 4);
    EXPECT_EQ(got_y, y);
  }
  std::vector<int64_t> starts(count);
  for (int i = 0; i < count; ++i) starts[i] = (int64_t(i) * 104729) % int64_t(bytes.size() - 40);
  DeviceArray<int64_t> dstarts(*gpu_, starts.size());
  DeviceArray<int32_t> dtokens(*gpu_, size_t(count) * 32), dtargets(*gpu_, size_t(count) * 32);
  gpu_->upload(dstarts.get(), starts.data(), starts.size() * 8);
  std::vector<int32_t> tokens(size_t(count) * 32), targets(tokens.size()), got(tokens.size());
  WindowGather w;
  w.text = bytes.data(), w.starts = starts.data(), w.count = count, w.context = 32;
  w.tokens = tokens.data(), w.targets = targets.data();
  cpu_->gather_windows(w);
  w.text = dbytes.get(), w.starts = dstarts.get(), w.tokens = dtokens.get(), w.targets = dtargets.get();
  gpu_->gather_windows(w);
  gpu_->download(got.data(), dtokens.get(), got.size() * 4);
  EXPECT_EQ(got, tokens);
  gpu_->download(got.data(), dtargets.get(), got.size() * 4);
  EXPECT_EQ(got, targets);

  on_gpu(std::vector<float>(size_t(count) * cols));
  gpu_->copy_bytes(last(), dx, size_t(count) * cols * 4);
  EXPECT_EQ(fetch(last(), size_t(count) * cols), fetch(dx, size_t(count) * cols));

  const int classes = 10;
  auto z = random(size_t(count) * classes, 91);
  z[5] = std::numeric_limits<float>::quiet_NaN();
  on_gpu(z);
  float* dz = last();
  on_gpu(std::vector<float>(z.size()));
  float* dd = last();
  std::vector<float> dref(z.size());
  const LossResult one = cpu_->softmax_xent(z.data(), labels.data(), count, classes, dref.data(), 0.5f, 0.0f);
  const LossResult clean = cpu_->softmax_xent(z.data() + classes, labels.data() + 1, count - 1, classes, dref.data(),
                                              0.5f, 0.0f);
  gpu_->take_tally();
  gpu_->tally_softmax_xent(dz + classes, dlabels.get() + 1, count - 1, classes, dd, 0.5f, 0.0f);
  gpu_->tally_softmax_xent(dz + classes, dlabels.get() + 1, count - 1, classes, dd, 0.5f, 0.0f);
  LossTally t = gpu_->take_tally();
  EXPECT_NEAR(t.loss_sum, 2.0 * clean.loss_sum, 1e-4 * std::abs(clean.loss_sum));
  EXPECT_EQ(t.correct, 2 * clean.correct);
  EXPECT_EQ(gpu_->take_tally().correct, 0) << "read once";
  gpu_->tally_softmax_xent(dz, dlabels.get(), count, classes, dd, 0.5f, 0.0f);
  t = gpu_->take_tally();
  EXPECT_TRUE(std::isnan(one.loss_sum));
  EXPECT_TRUE(std::isnan(t.loss_sum)) << "a NaN logit reaches the tally";
}

}  // namespace
}  // namespace gossip::kernels
