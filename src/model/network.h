// A model as a graph of layers over ONE contiguous parameter buffer (llm.c's
// malloc_and_point_parameters): each layer owns a range of it (and the same range of the gradient
// buffer), so the gossip layer keeps sending and mixing a single buffer whatever the model.
// Activations are tensors with a per-sample shape; a layer reads tensors made by earlier layers,
// so residual branches and tied embeddings are plain reads. Built by NetworkBuilder (presets.h
// builds the CNNs and the GPT from the YAML).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/layer_kernels.h"
#include "model/model.h"

namespace gossip::model {

class Network;

// An activation: [max batch][per-sample shape] values and gradients in backend memory.
struct Tensor {
  std::vector<int> shape;                // per sample, e.g. {C, H, W} or {T, D}
  size_t per_sample = 0;                 // product of shape
  int storage = -1;                      // a reshape (flatten) reads this tensor's buffers
  kernels::DeviceArray<float> value;
  kernels::DeviceArray<float> grad;      // empty for the input
};

// What a layer sees during one pass.
struct Pass {
  kernels::Backend& backend;
  kernels::LayerKernels& k;
  int batch;
  float* params;  // the network's parameter buffer
  float* grads;   // its gradient buffer (backward only)
  const int32_t* tokens;  // backend memory, [batch][context], for a language model's embedding
  Network& net;
  float* value(int tensor) const;
  float* grad(int tensor) const;  // null for the input
  const Tensor& tensor(int id) const;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual void forward(const Pass& p) = 0;
  virtual void backward(const Pass& p) = 0;  // adds into input and parameter gradients
  // Writes this layer's initial parameters into the whole host parameter buffer.
  virtual void init(float* /*host_params*/, std::mt19937_64& /*rng*/) const {}
};

class Network final : public Model {
 public:
  size_t num_params() const override { return params_.size(); }
  float* params() override { return params_.get(); }
  float* grads() override { return grads_.get(); }
  void init(uint64_t seed) override;
  BatchStats train_batch(const Batch& b) override { return run(b, true); }
  BatchStats evaluate(const Batch& b) override { return run(b, false); }
  void swap_params(kernels::DeviceArray<float>& other) override;
  std::vector<float> download_params() const override;
  void upload_params(const std::vector<float>& host) override;
  kernels::Backend& backend() override { return *backend_; }
  int max_rows() const override { return max_batch_; }

  const Tensor& tensor(int id) const { return tensors_[resolve(id)]; }
  size_t num_layers() const { return layers_.size(); }
  bool takes_tokens() const { return context_ > 0; }
  int context() const { return context_; }        // tokens per row (language models)
  size_t input_features() const { return tensors_[0].per_sample; }  // floats per row (others)
  int classes() const { return classes_; }

 private:
  friend class NetworkBuilder;
  friend struct Pass;
  Network() = default;
  int resolve(int id) const { return tensors_[id].storage < 0 ? id : tensors_[id].storage; }
  BatchStats run(const Batch& b, bool backward);

  kernels::Backend* backend_ = nullptr;  // owned by the caller, outlives the network
  kernels::LayerKernels* kernels_ = nullptr;  // the backend's
  int max_batch_ = 0;
  int context_ = 0;  // > 0: the input is [batch][context] tokens
  int classes_ = 0;
  int logits_ = -1;  // the tensor the loss reads: [rows][positions][classes]
  std::vector<Tensor> tensors_;  // tensors_[0] is the input
  std::vector<std::unique_ptr<Layer>> layers_;
  kernels::DeviceArray<float> params_, grads_;
  kernels::DeviceArray<int32_t> tokens_, labels_;
};

// Parameter initialisation rules (PyTorch's names).
struct InitRule {
  enum Kind { kKaimingUniform, kNormal, kZero, kOne } kind = kKaimingUniform;
  float std = 0.02f;  // kNormal
};

// Builds a Network layer by layer; each call returns the id of the tensor the layer makes.
class NetworkBuilder {
 public:
  // `backend` must offer layer kernels (Backend::layers()); throws gossip::Error naming it when not.
  NetworkBuilder(kernels::Backend& backend, int max_batch);

  int image_input(int c, int h, int w);  // float rows of c·h·w values
  int token_input(int context);          // int rows of `context` bytes
  // Over the last axis of x; bias_init applies to the bias (kZero or PyTorch's uniform).
  int linear(int x, int out, InitRule weight = {}, bool kaiming_bias = false);
  // `standardize`: weight standardisation (layers.h), for a convolution that a GroupNorm follows.
  int conv2d(int x, int out_c, int k, int stride, int pad, bool standardize = false);
  int maxpool2d(int x, int k, int stride);
  int global_avgpool(int x);
  int flatten(int x);
  int relu(int x);
  int gelu(int x);
  int add(int a, int b);
  int layer_norm(int x);
  int group_norm(int x, int groups, bool zero_gamma = false);  // γ starts at 0 when zero_gamma
  // Token + learned position embeddings of the token input, normal(0, std) initialised.
  int embedding(int vocab, int dim, float std);
  int attention(int qkv, int heads);
  // x · wteᵀ with the embedding's table (tied input and output embeddings).
  int tied_logits(int x);

  // The finished network; `logits` is the tensor the softmax cross-entropy reads (its last axis
  // is the classes, every other position a prediction).
  std::unique_ptr<Network> build(int logits);

  // For the layers: registers `n` parameters and returns their offset in the buffer.
  size_t add_params(size_t n) { offset_ += n; return offset_ - n; }
  int add_tensor(std::vector<int> shape, bool with_grad = true);
  const Tensor& tensor(int id) const { return net_->tensors_.at(id); }
  kernels::Backend& backend() { return *net_->backend_; }
  int max_batch() const { return net_->max_batch_; }

 private:
  void need(bool ok, const std::string& what) const;  // throws gossip::Error("model", what) when !ok
  std::unique_ptr<Network> net_;
  size_t offset_ = 0;
  size_t wte_offset_ = 0;  // the embedding's table, for tied_logits
  int vocab_ = 0, dim_ = 0;
};

}  // namespace gossip::model
