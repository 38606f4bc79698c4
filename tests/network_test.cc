// The layer graph: finite-difference gradient checks of every layer (through whole small
// networks, so each layer's input gradient is checked by the parameters before it), the presets'
// shapes and parameter counts, one contiguous buffer, determinism and learning.
#include "model/network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "common/error.h"
#include "model/optimizer.h"
#include "model/presets.h"

namespace gossip::model {
namespace {

struct HostBatch {
  std::vector<float> x;
  std::vector<int32_t> tokens, labels;
  int rows = 0;
  Batch view() const { return {x.empty() ? nullptr : x.data(), tokens.empty() ? nullptr : tokens.data(), labels.data(), rows}; }
};

HostBatch image_batch(int rows, int features, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  HostBatch b;
  b.rows = rows;
  b.x.resize(size_t(rows) * features);
  for (float& v : b.x) v = d(rng);
  for (int r = 0; r < rows; ++r) b.labels.push_back(int32_t(rng() % classes));
  return b;
}

HostBatch token_batch(int rows, int context, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostBatch b;
  b.rows = rows;
  for (int i = 0; i < rows * context; ++i) {
    b.tokens.push_back(int32_t(rng() % vocab));
    b.labels.push_back(int32_t(rng() % vocab));
  }
  return b;
}

// Perturbs the initial parameters (norm gains and biases away from 1 and 0, so that their
// gradients are exercised), then compares the analytic gradient of every parameter (or every
// `stride`-th) with central differences of the mean loss. Networks with ReLU and max pooling take
// a small step, so that it rarely crosses a kink (where the two sides differ by design).
void expect_gradients_match(Model& m, const HostBatch& b, uint64_t seed, size_t stride = 1, float eps = 1e-2f) {
  std::vector<float> p = m.download_params();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (float& v : p) v += u(rng);
  m.upload_params(p);
  const BatchStats trained = m.train_batch(b.view());
  std::vector<float> analytic(m.num_params());
  m.backend().download(analytic.data(), m.grads(), analytic.size() * sizeof(float));
  auto loss_at = [&](const std::vector<float>& params) {
    m.upload_params(params);
    const BatchStats s = m.evaluate(b.view());
    return s.loss_sum / double(s.count);
  };
  EXPECT_NEAR(loss_at(p), trained.loss_sum / double(trained.count), 1e-6) << "evaluate and train_batch disagree";
  size_t checked = 0, nonzero = 0;
  for (size_t i = 0; i < p.size(); i += stride) {
    std::vector<float> plus = p, minus = p;
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 3e-2 * std::abs(numeric)) << "parameter " << i;
    ++checked;
    nonzero += std::abs(analytic[i]) > 1e-6f;
  }
  EXPECT_GT(checked, 0u);
  EXPECT_GT(nonzero, checked / 2) << "most gradients are zero: the check would not see a wrong one";
}

ModelConfig gpt_config(int layers, int heads, int dim, int context) {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.layers = layers;
  c.heads = heads;
  c.dim = dim;
  c.context = context;
  return c;
}

TEST(Network, ConvReluMaxPoolLinearGradients) {
  auto be = kernels::make_cpu_backend();
  NetworkBuilder nb(*be, 3);
  int x = nb.image_input(2, 7, 6);
  x = nb.relu(nb.conv2d(x, 3, 3, 2, 1));   // 3×4×3, strided and padded
  x = nb.maxpool2d(nb.conv2d(x, 4, 2, 1, 0), 2, 1);  // 4×3×2 → 4×2×1, overlapping windows
  x = nb.conv2d(x, 2, 1, 1, 0);            // pointwise (no im2col)
  auto net = nb.build(nb.linear(nb.flatten(x), 5));
  net->init(1);
  expect_gradients_match(*net, image_batch(3, 2 * 7 * 6, 5, 2), 3, 1, 1e-3f);
}

TEST(Network, GroupNormResidualAvgPoolGradients) {
  auto be = kernels::make_cpu_backend();
  NetworkBuilder nb(*be, 2);
  const int in = nb.image_input(1, 5, 5);
  const int c = nb.conv2d(in, 4, 3, 1, 1);
  const int h = nb.group_norm(nb.conv2d(nb.relu(nb.group_norm(c, 2)), 4, 3, 1, 1), 2);
  auto net = nb.build(nb.linear(nb.global_avgpool(nb.relu(nb.add(c, h))), 3));
  net->init(4);
  expect_gradients_match(*net, image_batch(2, 25, 3, 5), 6, 1, 1e-3f);
}

// Weight standardisation: the gradient through ŵ = (w − mean)/√(var + ε) per output channel, and
// a forward pass that equals a plain convolution given ŵ computed here.
TEST(Network, StandardizedConvolutionGradientsAndValues) {
  auto be = kernels::make_cpu_backend();
  auto build = [&](bool standardize) {
    NetworkBuilder nb(*be, 2);
    const int in = nb.image_input(2, 5, 5);
    const int c = nb.group_norm(nb.conv2d(in, 4, 3, 1, 1, standardize), 2);
    const int h = nb.group_norm(nb.conv2d(nb.relu(c), 4, 3, 2, 1, standardize), 2);
    return nb.build(nb.linear(nb.global_avgpool(nb.relu(h)), 3));
  };
  auto ws = build(true);
  ws->init(4);
  const HostBatch b = image_batch(2, 50, 3, 5);
  expect_gradients_match(*ws, b, 6, 1, 1e-3f);
  // The same parameters with each convolution's weight rows standardised by hand, in a plain net.
  std::vector<float> p = ws->download_params();
  std::vector<float> q = p;
  size_t at = 0;
  for (int fan_in : {2 * 9, 4 * 9}) {
    for (int row = 0; row < 4; ++row, at += fan_in) {
      double mean = 0, var = 0;
      for (int i = 0; i < fan_in; ++i) mean += p[at + i] / double(fan_in);
      for (int i = 0; i < fan_in; ++i) var += (p[at + i] - mean) * (p[at + i] - mean) / fan_in;
      for (int i = 0; i < fan_in; ++i) q[at + i] = float((p[at + i] - mean) / std::sqrt(var + 1e-5));
    }
    at += 4 + 2 * 4;  // the bias, then the GroupNorm's γ and β
  }
  auto plain = build(false);
  plain->upload_params(q);
  const BatchStats a = ws->evaluate(b.view()), c = plain->evaluate(b.view());
  EXPECT_NEAR(a.loss_sum, c.loss_sum, 1e-5 * std::abs(c.loss_sum));
  EXPECT_GT(std::abs(a.loss_sum - [&] { plain->upload_params(p); return plain->evaluate(b.view()).loss_sum; }()), 1e-4)
      << "standardising changed nothing: the check would not see it missing";
}

TEST(Network, GptBlockGradients) {  // embeddings, LayerNorm, attention, GELU, residuals, tied logits
  auto be = kernels::make_cpu_backend();
  auto m = make_model(gpt_config(2, 2, 8, 5), *be, {}, 2);
  m->init(7);
  // Vocabulary 256 × dim 8 is most of the buffer; every 3rd parameter keeps the test fast and
  // still visits every tensor. Tokens cover a few bytes so their embedding rows get gradients.
  expect_gradients_match(*m, token_batch(2, 5, 256, 8), 9, 3);
}

TEST(Network, PresetsHaveTheirParameterCounts) {
  auto be = kernels::make_cpu_backend();
  ModelConfig lenet;
  lenet.kind = ModelKind::kCnn;
  const InputShape fmnist{1, 28, 28, 10};
  const size_t lenet_params = (32 * 25 + 32) + (64 * 32 * 25 + 64) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10);
  EXPECT_EQ(make_model(lenet, *be, fmnist, 4)->num_params(), lenet_params);
  EXPECT_EQ(count_model_params(lenet, fmnist), lenet_params);

  ModelConfig gpt;
  gpt.kind = ModelKind::kGpt;  // 4 layers, 4 heads, dim 128, context 128
  const size_t d = 128, block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (4 * d * d + 4 * d) + (4 * d * d + d);
  EXPECT_EQ(count_model_params(gpt, {}), 256 * d + 128 * d + 4 * block + 2 * d);

  ModelConfig resnet;
  resnet.kind = ModelKind::kCnn;
  resnet.net = CnnNet::kResNet;
  auto r = make_model(resnet, *be, fmnist, 2);
  EXPECT_EQ(r->num_params(), 482826u);  // as bench/torch_models.py's twin counts it
  EXPECT_EQ(r->num_params(), count_model_params(resnet, fmnist));
  // Each further block per stage: two 3×3 convolutions and two GroupNorms of c channels.
  resnet.blocks = 2;
  size_t extra = 0;
  for (size_t c : {32, 64, 128}) extra += 2 * (9 * c * c + c) + 2 * (2 * c);
  EXPECT_EQ(count_model_params(resnet, fmnist), 482826u + extra);
  resnet.blocks = 0;
  EXPECT_THROW(count_model_params(resnet, fmnist), Error);
}

// zero_init_residual starts the second GroupNorm of every residual block at γ = 0:
// exactly 32 + 64 + 128 more zero parameters per block per stage than without it.
TEST(Network, ResNetZeroInitStartsEachBlocksLastNormAtZero) {
  auto be = kernels::make_cpu_backend();
  ModelConfig resnet;
  resnet.kind = ModelKind::kCnn;
  resnet.net = CnnNet::kResNet;
  resnet.blocks = 2;
  EXPECT_FALSE(resnet.zero_init_residual);  // off unless asked for
  const auto zeros = [&](bool zero_init) {
    resnet.zero_init_residual = zero_init;
    auto m = make_model(resnet, *be, {1, 28, 28, 10}, 2);
    m->init(5);
    const std::vector<float> p = m->download_params();
    return std::count(p.begin(), p.end(), 0.0f);
  };
  EXPECT_EQ(zeros(true) - zeros(false), 2 * (32 + 64 + 128));
}

TEST(Network, ParametersAreOneBufferThatSwapsWhole) {
  auto be = kernels::make_cpu_backend();
  ModelConfig c;
  c.kind = ModelKind::kCnn;
  auto m = make_model(c, *be, {1, 12, 12, 3}, 2);
  m->init(1);
  const HostBatch b = image_batch(2, 144, 3, 1);
  const double before = m->evaluate(b.view()).loss_sum;
  kernels::DeviceArray<float> other(*be, m->num_params());
  be->fill(other.get(), 0.0f, m->num_params());
  m->swap_params(other);  // all-zero weights: every logit 0, loss ln 3 per row
  EXPECT_NEAR(m->evaluate(b.view()).loss_sum, 2 * std::log(3.0), 1e-5);
  m->swap_params(other);
  EXPECT_EQ(m->evaluate(b.view()).loss_sum, before);
  kernels::DeviceArray<float> wrong(*be, 5);
  EXPECT_THROW(m->swap_params(wrong), Error);
}

TEST(Network, TrainingIsDeterministicGivenSeed) {
  auto run = [] {
    auto be = kernels::make_cpu_backend();
    auto m = make_model(gpt_config(1, 2, 16, 8), *be, {}, 4);
    m->init(11);
    OptimizerConfig oc;
    oc.kind = OptimizerKind::kAdamW;
    auto opt = make_optimizer(*m, oc);
    for (int s = 0; s < 5; ++s) {
      m->train_batch(token_batch(4, 8, 256, 100 + s).view());
      opt->step(1e-3);
    }
    return m->download_params();
  };
  EXPECT_EQ(run(), run());
}

// Ten optimiser steps of each preset on the CUDA backend land where the CPU reference does, and
// twice on CUDA give identical weights (no atomics in the kernels). Skipped without a device.
TEST(Network, CudaTrainingMatchesCpuAndIsDeterministic) {
  std::string why;
  if (!kernels::cuda_device_available(&why)) GTEST_SKIP() << why;
  ModelConfig lenet, resnet, gpt = gpt_config(2, 2, 16, 8);
  lenet.kind = resnet.kind = ModelKind::kCnn;
  resnet.net = CnnNet::kResNet;
  resnet.width = 8;
  resnet.groups = 4;
  ModelConfig standardized = resnet;
  standardized.weight_standardization = true;
  const InputShape images{1, 16, 16, 4};
  for (const ModelConfig& c : {lenet, resnet, standardized, gpt}) {
    auto run = [&](const std::string& device) {
      auto be = kernels::make_backend(device);
      auto m = make_model(c, *be, images, 8);
      m->init(3);
      OptimizerConfig oc;
      if (c.kind == ModelKind::kGpt) oc.kind = OptimizerKind::kAdamW;
      auto opt = make_optimizer(*m, oc);
      for (int s = 0; s < 10; ++s) {
        const HostBatch b = c.kind == ModelKind::kGpt ? token_batch(8, 8, 256, 50 + s) : image_batch(8, 256, 4, 50 + s);
        m->train_batch(b.view());
        opt->step(c.kind == ModelKind::kGpt ? 1e-3 : 0.05);
      }
      return m->download_params();
    };
    const std::vector<float> cpu = run("cpu"), gpu = run("cuda");
    for (size_t i = 0; i < cpu.size(); ++i)
      ASSERT_NEAR(gpu[i], cpu[i], 1e-3 * (1 + std::abs(cpu[i]))) << describe(c) << " parameter " << i;
    EXPECT_EQ(run("cuda"), gpu) << describe(c) << " is not deterministic on CUDA";
  }
}

TEST(Network, LenetLearnsASimplePattern) {
  // Class = which quadrant of a 12×12 image is bright; a few SGD steps must get it right.
  auto be = kernels::make_cpu_backend();
  ModelConfig c;
  c.kind = ModelKind::kCnn;
  auto m = make_model(c, *be, {1, 12, 12, 4}, 32);
  m->init(2);
  OptimizerConfig oc;
  auto opt = make_optimizer(*m, oc);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  auto batch = [&] {
    HostBatch b;
    b.rows = 32;
    for (int r = 0; r < 32; ++r) {
      const int q = int(rng() % 4);
      b.labels.push_back(q);
      for (int i = 0; i < 12; ++i)
        for (int j = 0; j < 12; ++j) b.x.push_back(noise(rng) + ((i / 6) * 2 + j / 6 == q ? 1.0f : 0.0f));
    }
    return b;
  };
  for (int s = 0; s < 60; ++s) {
    m->train_batch(batch().view());
    opt->step(0.02);
  }
  const BatchStats s = m->evaluate(batch().view());
  EXPECT_GE(s.correct, 30) << "of 32";
}

TEST(Network, RejectsBadShapesAndBatches) {
  auto be = kernels::make_cpu_backend();
  {
    NetworkBuilder nb(*be, 2);
    const int x = nb.image_input(1, 4, 4);
    EXPECT_THROW(nb.conv2d(x, 2, 5, 1, 0), Error);  // kernel larger than the image
    EXPECT_THROW(nb.group_norm(nb.conv2d(x, 3, 3, 1, 1), 2), Error);  // 2 groups, 3 channels
    EXPECT_THROW(nb.tied_logits(x), Error);  // no embedding
  }
  EXPECT_THROW(make_model(gpt_config(4, 3, 128, 128), *be, {}, 1), Error);  // 3 heads do not divide 128
  auto m = make_model(gpt_config(1, 4, 8, 4), *be, {}, 2);
  EXPECT_THROW(m->train_batch(token_batch(3, 4, 256, 1).view()), Error);  // 3 rows > 2
  HostBatch images = image_batch(1, 4, 256, 1);
  EXPECT_THROW(m->train_batch(images.view()), Error);  // floats for a token model
}

}  // namespace
}  // namespace gossip::model
