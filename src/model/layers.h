// The layers of model::Network. Each holds the ids of the tensors it reads and writes, the
// offsets of its parameters inside the network's one buffer, and whatever it saves for the
// backward pass (pool indices, norm statistics, attention probabilities). The kernels are the
// backend's (kernels/layer_kernels.h).
#pragma once

#include <cstdint>
#include <memory>

#include "model/network.h"

namespace gossip::model {

// A kernel shape at this pass's batch (shapes are built at the largest batch).
template <typename Shape>
Shape at_batch(Shape s, int batch) {
  s.batch = batch;
  return s;
}

// Fills n floats of `host` from `rule` (fan_in for Kaiming: U(±√(6/fan_in)), ReLU gain).
void init_params(float* host, size_t n, const InitRule& rule, int fan_in, std::mt19937_64& rng);

class Linear final : public Layer {
 public:
  // x [.., in] → y [.., out]; weight [out][in] then bias [out] at `offset`.
  Linear(int x, int y, int in, int out, size_t offset, InitRule weight, bool kaiming_bias)
      : x_(x), y_(y), in_(in), out_(out), w_(offset), b_(offset + size_t(in) * out), weight_(weight),
        kaiming_bias_(kaiming_bias) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;
  void init(float* host, std::mt19937_64& rng) const override;

 private:
  int rows(const Pass& p) const;
  int x_, y_, in_, out_;
  size_t w_, b_;
  InitRule weight_;
  bool kaiming_bias_;
};

// Weight standardisation (Qiao et al. 2019, for convolutions followed by GroupNorm): the
// convolution computes with each output channel's weights standardised over its fan-in,
// ŵ = (w − mean)/√(var + ε) — a LayerNorm over the rows of w with γ = 1 and β = 0, whose kernels
// it uses — and the gradient goes back through the standardisation. The parameters stay w.
struct WeightStandardization {
  WeightStandardization(kernels::Backend& backend, int rows, int fan_in);
  kernels::DeviceArray<float> w_hat, d_w_hat;  // [out_c][fan_in]
  kernels::DeviceArray<float> stats;           // mean then rstd, one per output channel
  kernels::DeviceArray<float> ones, zeros;     // γ and β, [fan_in]
  kernels::DeviceArray<float> unused;          // the LayerNorm's dγ and dβ, [2·fan_in]
};

class Conv2d final : public Layer {
 public:
  // weight [out_c][in_c][k][k] then bias [out_c] at `offset`; `shape.batch` is set per pass.
  // `standardize` (may be null): weight standardisation.
  Conv2d(int x, int y, kernels::ConvShape shape, size_t offset, kernels::DeviceArray<float> workspace,
         std::unique_ptr<WeightStandardization> standardize = nullptr)
      : x_(x), y_(y), shape_(shape), w_(offset), b_(offset + size_t(shape.out_c) * shape.in_c * shape.k * shape.k),
        workspace_(std::move(workspace)), ws_(std::move(standardize)) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;
  void init(float* host, std::mt19937_64& rng) const override;

 private:
  int fan_in() const { return shape_.in_c * shape_.k * shape_.k; }
  int x_, y_;
  kernels::ConvShape shape_;
  size_t w_, b_;
  kernels::DeviceArray<float> workspace_;
  std::unique_ptr<WeightStandardization> ws_;
};

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(int x, int y, kernels::PoolShape shape, kernels::DeviceArray<int32_t> argmax)
      : x_(x), y_(y), shape_(shape), argmax_(std::move(argmax)) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  int x_, y_;
  kernels::PoolShape shape_;
  kernels::DeviceArray<int32_t> argmax_;  // [max batch][c][out_h][out_w]
};

class GlobalAvgPool final : public Layer {
 public:
  GlobalAvgPool(int x, int y, int c, int plane) : x_(x), y_(y), c_(c), plane_(plane) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  int x_, y_, c_, plane_;
};

// ReLU or GELU, elementwise.
class Activation final : public Layer {
 public:
  enum Kind { kRelu, kGelu };
  Activation(Kind kind, int x, int y) : kind_(kind), x_(x), y_(y) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  Kind kind_;
  int x_, y_;
};

// y = a + b (a residual connection).
class Add final : public Layer {
 public:
  Add(int a, int b, int y) : a_(a), b_(b), y_(y) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  int a_, b_, y_;
};

// LayerNorm over the last axis (groups = 0), or GroupNorm over [C][plane] samples; gamma [C]
// then beta [C] at `offset`.
class Norm final : public Layer {
 public:
  // γ starts at 1, or at 0 when `zero_gamma` (the layer then outputs β: a residual branch that
  // ends in it starts as the identity).
  Norm(int x, int y, int channels, int plane, int groups, size_t offset, kernels::DeviceArray<float> stats,
       bool zero_gamma = false)
      : x_(x), y_(y), channels_(channels), plane_(plane), groups_(groups), gamma_(offset), beta_(offset + channels),
        zero_gamma_(zero_gamma), stats_(std::move(stats)) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;
  void init(float* host, std::mt19937_64& rng) const override;

 private:
  int x_, y_, channels_, plane_, groups_;
  size_t gamma_, beta_;
  bool zero_gamma_;
  kernels::DeviceArray<float> stats_;  // mean then rstd, one per normalised group
};

// Token and learned position embeddings: wte [vocab][dim] then wpe [context][dim] at `offset`.
class Embedding final : public Layer {
 public:
  Embedding(int y, int vocab, int dim, int context, size_t offset, float std)
      : y_(y), vocab_(vocab), dim_(dim), context_(context), wte_(offset), wpe_(offset + size_t(vocab) * dim), std_(std) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;
  void init(float* host, std::mt19937_64& rng) const override;

 private:
  int y_, vocab_, dim_, context_;
  size_t wte_, wpe_;
  float std_;
};

// Causal multi-head self-attention over qkv [T][3·dim] → [T][dim] (no projections: those are
// Linear layers around it).
class Attention final : public Layer {
 public:
  Attention(int qkv, int y, kernels::AttentionShape shape, kernels::DeviceArray<float> att)
      : qkv_(qkv), y_(y), shape_(shape), att_(std::move(att)) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  int qkv_, y_;
  kernels::AttentionShape shape_;
  kernels::DeviceArray<float> att_;  // [max batch][heads][T][T]
};

// logits [.., vocab] = x [.., dim] · wteᵀ, with the embedding's table at `wte`.
class TiedLogits final : public Layer {
 public:
  TiedLogits(int x, int y, int vocab, int dim, size_t wte) : x_(x), y_(y), vocab_(vocab), dim_(dim), wte_(wte) {}
  void forward(const Pass& p) override;
  void backward(const Pass& p) override;

 private:
  int rows(const Pass& p) const;
  int x_, y_, vocab_, dim_;
  size_t wte_;
};

}  // namespace gossip::model
