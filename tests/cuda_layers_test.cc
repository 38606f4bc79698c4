// The CUDA layer kernels against the CPU reference, kernel by kernel, forward and backward (the
// backward kernels add into gradients that start non-zero, so the "add" is checked too). Twice:
// on a CUDA device (skipped when none answers), and with the same kernels compiled as C++ and run
// serially on the CPU (emulated_cuda_layers.h), which runs everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "emulated_cuda_layers.h"

namespace gossip::kernels {
namespace {

std::vector<float> randn(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One array twice: a host copy the CPU kernels work on and a device copy the CUDA kernels work on.
template <typename T>
class Twin {
 public:
  Twin(Backend& gpu, std::vector<T> host) : gpu_(gpu), host_(std::move(host)), dev_(gpu, host_.size()) {
    gpu.upload(dev_.get(), host_.data(), host_.size() * sizeof(T));
  }
  T* cpu() { return host_.data(); }
  T* gpu() { return dev_.get(); }
  // Every device value within `tol` (absolute + relative) of the host value.
  void expect_close(float tol, const std::string& what) {
    std::vector<T> got(host_.size());
    gpu_.download(got.data(), dev_.get(), got.size() * sizeof(T));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(double(got[i]), double(host_[i]), tol * (1 + std::fabs(double(host_[i])))) << what << " at " << i;
  }

 private:
  Backend& gpu_;
  std::vector<T> host_;
  DeviceArray<T> dev_;
};

// Param "cuda": the CUDA backend's kernels on a device; "emulated": the same kernels on the CPU.
class CudaLayersVsCpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cpu_ = make_backend("cpu");
    c_ = cpu_->layers();
    if (GetParam() == "emulated") {
      gpu_ = make_backend("cpu");
      emulated_ = std::make_unique<emulated::EmulatedCudaLayers>(*gpu_);
      g_ = emulated_.get();
      return;
    }
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << why;
    gpu_ = make_backend("cuda");
    g_ = gpu_->layers();
    ASSERT_NE(g_, nullptr);
  }
  Twin<float> twin(size_t n, uint64_t seed) { return Twin<float>(*gpu_, randn(n, seed)); }
  Twin<float> zeros(size_t n) { return Twin<float>(*gpu_, std::vector<float>(n, 0.0f)); }
  std::unique_ptr<Backend> gpu_, cpu_;
  std::unique_ptr<emulated::EmulatedCudaLayers> emulated_;
  LayerKernels* g_ = nullptr;
  LayerKernels* c_ = nullptr;
};

TEST_P(CudaLayersVsCpu, Conv2dForwardAndBackward) {
  for (const ConvShape s : {ConvShape{3, 3, 9, 7, 5, 3, 2, 1}, ConvShape{2, 4, 12, 12, 6, 5, 1, 2},
                            ConvShape{2, 8, 5, 5, 4, 1, 1, 0}}) {
    const size_t xn = size_t(s.batch) * s.in_c * s.h * s.w, yn = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
    auto x = twin(xn, 1), w = twin(size_t(s.out_c) * s.in_c * s.k * s.k, 2), b = twin(s.out_c, 3);
    auto y = zeros(yn), dy = twin(yn, 4), dx = twin(xn, 5), dw = twin(size_t(s.out_c) * s.in_c * s.k * s.k, 6),
         db = twin(s.out_c, 7);
    const size_t ws = c_->conv2d_workspace(s);
    ASSERT_EQ(g_->conv2d_workspace(s), ws);
    auto wsp = zeros(ws + 1);
    c_->conv2d_forward(s, x.cpu(), w.cpu(), b.cpu(), y.cpu(), wsp.cpu());
    g_->conv2d_forward(s, x.gpu(), w.gpu(), b.gpu(), y.gpu(), wsp.gpu());
    y.expect_close(1e-4f, "conv y k=" + std::to_string(s.k));
    c_->conv2d_backward(s, x.cpu(), w.cpu(), dy.cpu(), dx.cpu(), dw.cpu(), db.cpu(), wsp.cpu());
    g_->conv2d_backward(s, x.gpu(), w.gpu(), dy.gpu(), dx.gpu(), dw.gpu(), db.gpu(), wsp.gpu());
    dx.expect_close(1e-4f, "conv dx");
    dw.expect_close(1e-4f, "conv dw");
    db.expect_close(1e-4f, "conv db");
  }
}

TEST_P(CudaLayersVsCpu, Pools) {
  for (const PoolShape s : {PoolShape{2, 3, 8, 6, 2, 2}, PoolShape{2, 3, 9, 9, 3, 2}}) {  // the second overlaps
    const size_t xn = size_t(s.batch) * s.c * s.h * s.w, yn = size_t(s.batch) * s.c * s.out_h() * s.out_w();
    auto x = twin(xn, 1), y = zeros(yn), dy = twin(yn, 2), dx = twin(xn, 3);
    Twin<int32_t> arg(*gpu_, std::vector<int32_t>(yn, 0));
    c_->maxpool2d_forward(s, x.cpu(), y.cpu(), arg.cpu());
    g_->maxpool2d_forward(s, x.gpu(), y.gpu(), arg.gpu());
    y.expect_close(0, "maxpool y");
    arg.expect_close(0, "maxpool argmax");
    c_->maxpool2d_backward(s, dy.cpu(), arg.cpu(), dx.cpu());
    g_->maxpool2d_backward(s, dy.gpu(), arg.gpu(), dx.gpu());
    dx.expect_close(1e-5f, "maxpool dx");
  }
  auto x = twin(2 * 5 * 49, 4), y = zeros(10), dy = twin(10, 5), dx = twin(2 * 5 * 49, 6);
  c_->global_avgpool_forward(x.cpu(), y.cpu(), 2, 5, 49);
  g_->global_avgpool_forward(x.gpu(), y.gpu(), 2, 5, 49);
  y.expect_close(1e-5f, "avgpool y");
  c_->global_avgpool_backward(dy.cpu(), dx.cpu(), 2, 5, 49);
  g_->global_avgpool_backward(dy.gpu(), dx.gpu(), 2, 5, 49);
  dx.expect_close(1e-5f, "avgpool dx");
}

TEST_P(CudaLayersVsCpu, PointwiseAndColumnSums) {
  const size_t n = 1000;
  auto x = twin(n, 1), b = twin(n, 2), dy = twin(n, 3), y = zeros(n), dx = twin(n, 4);
  c_->relu_forward(x.cpu(), y.cpu(), n);
  g_->relu_forward(x.gpu(), y.gpu(), n);
  y.expect_close(0, "relu y");
  c_->relu_backward_add(y.cpu(), dy.cpu(), dx.cpu(), n);
  g_->relu_backward_add(y.gpu(), dy.gpu(), dx.gpu(), n);
  dx.expect_close(1e-6f, "relu dx");
  c_->gelu_forward(x.cpu(), y.cpu(), n);
  g_->gelu_forward(x.gpu(), y.gpu(), n);
  y.expect_close(1e-5f, "gelu y");
  c_->gelu_backward_add(x.cpu(), dy.cpu(), dx.cpu(), n);
  g_->gelu_backward_add(x.gpu(), dy.gpu(), dx.gpu(), n);
  dx.expect_close(1e-5f, "gelu dx");
  c_->add_forward(x.cpu(), b.cpu(), y.cpu(), n);
  g_->add_forward(x.gpu(), b.gpu(), y.gpu(), n);
  y.expect_close(0, "add");
  auto db = twin(40, 5);
  c_->column_sum_add(x.cpu(), db.cpu(), 25, 40);
  g_->column_sum_add(x.gpu(), db.gpu(), 25, 40);
  db.expect_close(1e-5f, "column sums");
}

TEST_P(CudaLayersVsCpu, LayerNormAndGroupNorm) {
  const int rows = 37, cols = 48;
  auto x = twin(size_t(rows) * cols, 1), gamma = twin(cols, 2), beta = twin(cols, 3), y = zeros(size_t(rows) * cols);
  auto mean = zeros(rows), rstd = zeros(rows), dy = twin(size_t(rows) * cols, 4), dx = twin(size_t(rows) * cols, 5);
  auto dg = twin(cols, 6), dbeta = twin(cols, 7);
  c_->layernorm_forward(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), mean.cpu(), rstd.cpu(), rows, cols);
  g_->layernorm_forward(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), mean.gpu(), rstd.gpu(), rows, cols);
  y.expect_close(1e-5f, "layernorm y");
  rstd.expect_close(1e-5f, "layernorm rstd");
  c_->layernorm_backward(x.cpu(), gamma.cpu(), mean.cpu(), rstd.cpu(), dy.cpu(), dx.cpu(), dg.cpu(), dbeta.cpu(),
                         rows, cols);
  g_->layernorm_backward(x.gpu(), gamma.gpu(), mean.gpu(), rstd.gpu(), dy.gpu(), dx.gpu(), dg.gpu(), dbeta.gpu(),
                         rows, cols);
  dx.expect_close(1e-4f, "layernorm dx");
  dg.expect_close(1e-4f, "layernorm dgamma");
  dbeta.expect_close(1e-4f, "layernorm dbeta");

  const int batch = 3, c = 16, plane = 25, groups = 4;
  const size_t n = size_t(batch) * c * plane;
  auto gx = twin(n, 8), gg = twin(c, 9), gb = twin(c, 10), gy = zeros(n), gm = zeros(batch * groups),
       gr = zeros(batch * groups), gdy = twin(n, 11), gdx = twin(n, 12), gdg = twin(c, 13), gdb = twin(c, 14);
  c_->groupnorm_forward(gx.cpu(), gg.cpu(), gb.cpu(), gy.cpu(), gm.cpu(), gr.cpu(), batch, c, plane, groups);
  g_->groupnorm_forward(gx.gpu(), gg.gpu(), gb.gpu(), gy.gpu(), gm.gpu(), gr.gpu(), batch, c, plane, groups);
  gy.expect_close(1e-5f, "groupnorm y");
  c_->groupnorm_backward(gx.cpu(), gg.cpu(), gm.cpu(), gr.cpu(), gdy.cpu(), gdx.cpu(), gdg.cpu(), gdb.cpu(), batch, c,
                         plane, groups);
  g_->groupnorm_backward(gx.gpu(), gg.gpu(), gm.gpu(), gr.gpu(), gdy.gpu(), gdx.gpu(), gdg.gpu(), gdb.gpu(), batch, c,
                         plane, groups);
  gdx.expect_close(1e-4f, "groupnorm dx");
  gdg.expect_close(1e-4f, "groupnorm dgamma");
  gdb.expect_close(1e-4f, "groupnorm dbeta");
}

TEST_P(CudaLayersVsCpu, Embeddings) {
  const int batch = 3, t = 10, dim = 16, vocab = 7;  // few tokens, so rows of wte repeat
  std::vector<int32_t> tokens;
  for (int i = 0; i < batch * t; ++i) tokens.push_back((i * 5 + 3) % vocab);
  Twin<int32_t> tok(*gpu_, tokens);
  auto wte = twin(size_t(vocab) * dim, 1), wpe = twin(size_t(t) * dim, 2), y = zeros(size_t(batch) * t * dim);
  auto dy = twin(size_t(batch) * t * dim, 3), dwte = twin(size_t(vocab) * dim, 4), dwpe = twin(size_t(t) * dim, 5);
  c_->embedding_forward(tok.cpu(), wte.cpu(), wpe.cpu(), y.cpu(), batch, t, dim);
  g_->embedding_forward(tok.gpu(), wte.gpu(), wpe.gpu(), y.gpu(), batch, t, dim);
  y.expect_close(0, "embedding y");
  c_->embedding_backward(tok.cpu(), dy.cpu(), dwte.cpu(), dwpe.cpu(), batch, t, dim);
  g_->embedding_backward(tok.gpu(), dy.gpu(), dwte.gpu(), dwpe.gpu(), batch, t, dim);
  dwte.expect_close(1e-5f, "embedding dwte");
  dwpe.expect_close(1e-5f, "embedding dwpe");
}

TEST_P(CudaLayersVsCpu, CausalAttention) {
  const AttentionShape s{2, 19, 24, 3};
  const size_t qkv_n = size_t(s.batch) * s.t * 3 * s.dim, out_n = size_t(s.batch) * s.t * s.dim;
  auto qkv = twin(qkv_n, 1), out = zeros(out_n), att = zeros(size_t(s.batch) * s.heads * s.t * s.t);
  auto dout = twin(out_n, 2), dqkv = twin(qkv_n, 3);
  c_->attention_forward(s, qkv.cpu(), out.cpu(), att.cpu());
  g_->attention_forward(s, qkv.gpu(), out.gpu(), att.gpu());
  att.expect_close(1e-5f, "attention probabilities");
  out.expect_close(1e-4f, "attention out");
  c_->attention_backward(s, qkv.cpu(), att.cpu(), dout.cpu(), dqkv.cpu());
  g_->attention_backward(s, qkv.gpu(), att.gpu(), dout.gpu(), dqkv.gpu());
  dqkv.expect_close(1e-4f, "attention dqkv");
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaLayersVsCpu, ::testing::Values("cuda", "emulated"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace gossip::kernels
