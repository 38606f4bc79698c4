#include "model/presets.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "model/mlp.h"
#include "model/network.h"

namespace gossip::model {

namespace {

// conv5×5-32, pool, conv5×5-64, pool, fc-128, fc-classes (ReLU after every hidden layer).
std::unique_ptr<Network> lenet(kernels::Backend& backend, const InputShape& in, int max_batch) {
  NetworkBuilder b(backend, max_batch);
  int x = b.image_input(in.c, in.h, in.w);
  x = b.maxpool2d(b.relu(b.conv2d(x, 32, 5, 1, 2)), 2, 2);
  x = b.maxpool2d(b.relu(b.conv2d(x, 64, 5, 1, 2)), 2, 2);
  x = b.relu(b.linear(b.flatten(x), 128));
  return b.build(b.linear(x, in.classes));
}

// A 3×3 convolution (its weights standardised with c.weight_standardization) and a GroupNorm.
int conv_norm(NetworkBuilder& b, const ModelConfig& c, int x, int channels, int stride, bool zero_gamma = false) {
  return b.group_norm(b.conv2d(x, channels, 3, stride, 1, c.weight_standardization), c.groups, zero_gamma);
}

// Two 3×3 convolutions with GroupNorm and a skip connection around them. With
// c.zero_init_residual the second GroupNorm's γ starts at 0, so the block starts as the identity
// (Goyal et al. 2017; Wu & He's GroupNorm paper initialises its residual nets the same way).
int residual_block(NetworkBuilder& b, const ModelConfig& c, int x, int channels) {
  const int h = conv_norm(b, c, b.relu(conv_norm(b, c, x, channels, 1)), channels, 1, c.zero_init_residual);
  return b.relu(b.add(x, h));
}

// A stem (conv3×3 + GroupNorm + ReLU, then 2×2 max pooling), then three stages of width w, 2w,
// 4w (the last two entered by a stride-2 convolution), each of `blocks` residual blocks; global
// average pooling and a linear classifier. On 28×28 images the stages run at 14×14, 7×7 and 4×4.
std::unique_ptr<Network> resnet(kernels::Backend& backend, const ModelConfig& c, const InputShape& in,
                                int max_batch) {
  if (c.blocks <= 0) throw Error("model", "resnet: blocks (" + std::to_string(c.blocks) + ") must be positive");
  if (c.width <= 0 || c.groups <= 0 || c.width % c.groups)
    throw Error("model", "resnet: groups (" + std::to_string(c.groups) + ") must divide width (" +
                             std::to_string(c.width) + ")");
  NetworkBuilder b(backend, max_batch);
  int x = b.relu(conv_norm(b, c, b.image_input(in.c, in.h, in.w), c.width, 1));
  x = b.maxpool2d(x, 2, 2);
  for (int stage = 0; stage < 3; ++stage) {
    const int channels = c.width << stage;
    if (stage > 0) x = b.relu(conv_norm(b, c, x, channels, 2));
    for (int block = 0; block < c.blocks; ++block) x = residual_block(b, c, x, channels);
  }
  return b.build(b.linear(b.global_avgpool(x), in.classes));
}

// GPT-2's shape: pre-LayerNorm blocks (attention, then a 4× GELU MLP, each added to the residual
// stream), a final LayerNorm and logits through the token embedding (tied). GPT-2's init:
// normal(0, 0.02), the residual projections scaled by 1/√(2·layers).
std::unique_ptr<Network> gpt(kernels::Backend& backend, const ModelConfig& c, int max_batch) {
  if (c.layers <= 0 || c.dim <= 0 || c.context <= 0 || c.heads <= 0 || c.dim % c.heads)
    throw Error("model", "gpt: layers, dim, context and heads must be positive and heads must divide dim (" +
                             std::to_string(c.heads) + " heads, dim " + std::to_string(c.dim) + ")");
  const InitRule weights{InitRule::kNormal, 0.02f};
  const InitRule projection{InitRule::kNormal, 0.02f / std::sqrt(2.0f * c.layers)};
  NetworkBuilder b(backend, max_batch);
  b.token_input(c.context);
  int x = b.embedding(kByteVocab, c.dim, 0.02f);
  for (int l = 0; l < c.layers; ++l) {
    const int att = b.attention(b.linear(b.layer_norm(x), 3 * c.dim, weights), c.heads);
    x = b.add(x, b.linear(att, c.dim, projection));
    const int hidden = b.gelu(b.linear(b.layer_norm(x), 4 * c.dim, weights));
    x = b.add(x, b.linear(hidden, c.dim, projection));
  }
  return b.build(b.tied_logits(b.layer_norm(x)));
}

std::vector<int> mlp_dims(const ModelConfig& c, const InputShape& in) {
  std::vector<int> dims{in.c * in.h * in.w};
  dims.insert(dims.end(), c.hidden.begin(), c.hidden.end());
  dims.push_back(in.classes);
  return dims;
}

}  // namespace

std::unique_ptr<Model> make_model(const ModelConfig& c, kernels::Backend& backend, const InputShape& in,
                                  int max_batch) {
  switch (c.kind) {
    case ModelKind::kMlp:
      return std::make_unique<Mlp>(backend, mlp_dims(c, in), max_batch);
    case ModelKind::kCnn:
      if (in.h < 8 || in.w < 8)
        throw Error("model", "kind cnn needs images of at least 8x8 pixels, the data has " + std::to_string(in.h) +
                                 "x" + std::to_string(in.w));
      if (c.net == CnnNet::kLeNet) return lenet(backend, in, max_batch);
      return resnet(backend, c, in, max_batch);
    case ModelKind::kGpt:
      return gpt(backend, c, max_batch);
  }
  throw Error("model", "unknown model kind");
}

size_t count_model_params(const ModelConfig& c, const InputShape& in) {
  if (c.kind == ModelKind::kMlp) return count_params(mlp_dims(c, in));
  const std::unique_ptr<kernels::Backend> cpu = kernels::make_cpu_backend();
  return make_model(c, *cpu, in, 1)->num_params();
}

std::string describe(const ModelConfig& c) {
  switch (c.kind) {
    case ModelKind::kMlp: {
      std::string s = "mlp";
      for (int h : c.hidden) s += (s == "mlp" ? " " : "-") + std::to_string(h);
      return s;
    }
    case ModelKind::kCnn:
      return c.net == CnnNet::kLeNet ? "cnn lenet"
                                     : "cnn resnet (width " + std::to_string(c.width) + ", " +
                                           std::to_string(c.groups) + " groups" +
                                           (c.blocks == 1 ? "" : ", " + std::to_string(c.blocks) + " blocks") +
                                           (c.weight_standardization ? ", standardised weights" : "") + ")";
    case ModelKind::kGpt:
      return "gpt " + std::to_string(c.layers) + "x" + std::to_string(c.dim) + " (" + std::to_string(c.heads) +
             " heads, context " + std::to_string(c.context) + ")";
  }
  return "?";
}

}  // namespace gossip::model
