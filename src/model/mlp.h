// Multi-layer perceptron: Linear + ReLU hidden layers, a Linear output and softmax cross-entropy.
// All parameters live in ONE contiguous backend buffer (and gradients in another of the same
// layout), so the gossip layer can send and mix the model as a single frame.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"

namespace gossip::model {

struct LayerView {
  float* w;  // [out][in], row-major, inside the contiguous parameter buffer
  float* b;  // [out]
  int in;
  int out;
};

// Weights and biases of an MLP with these layer widths (input first, classes last).
size_t count_params(const std::vector<int>& dims);

class Mlp final : public Model {
 public:
  // dims = {input, hidden..., classes}; max_batch bounds the activation buffers.
  Mlp(kernels::Backend& backend, std::vector<int> dims, int max_batch);

  size_t num_params() const override { return params_.size(); }
  const std::vector<int>& dims() const { return dims_; }
  float* params() override { return params_.get(); }
  float* grads() override { return grads_.get(); }
  int max_rows() const override { return max_batch_; }
  const LayerView& layer(size_t i) const { return param_views_[i]; }
  const LayerView& grad_layer(size_t i) const { return grad_views_[i]; }
  size_t num_layers() const { return param_views_.size(); }

  // Kaiming-uniform weights and zero biases from `seed`, identical on every backend.
  void init(uint64_t seed) override;

  // Forward + backward on host rows x[batch][input] with labels y; writes the mean-loss gradient
  // into grads().
  BatchStats train_batch(const float* host_x, const int32_t* host_y, int batch);
  // Forward only.
  BatchStats evaluate(const float* host_x, const int32_t* host_y, int batch);
  BatchStats train_batch(const Batch& b) override { return forward(b, true); }
  BatchStats evaluate(const Batch& b) override { return forward(b, false); }

  // Exchanges the parameter buffer with `other` (same backend, num_params() floats) in O(1): a
  // gossip step mixes into a second buffer and then adopts it, instead of copying it back.
  void swap_params(kernels::DeviceArray<float>& other) override;

  // Host copies of the whole parameter buffer.
  std::vector<float> download_params() const override;
  void upload_params(const std::vector<float>& host) override;

  kernels::Backend& backend() override { return *backend_; }

 private:
  BatchStats forward(const Batch& b, bool backward);
  static std::vector<LayerView> make_views(float* base, const std::vector<int>& dims);

  kernels::Backend* backend_;  // owned by the caller, outlives the model
  std::vector<int> dims_;
  int max_batch_;
  kernels::DeviceArray<float> params_;
  kernels::DeviceArray<float> grads_;
  std::vector<LayerView> param_views_;
  std::vector<LayerView> grad_views_;
  std::vector<kernels::DeviceArray<float>> acts_;  // acts_[l]: [max_batch][dims_[l]]
  kernels::DeviceArray<float> delta_a_;            // two ping-pong [max_batch][max dim] buffers
  kernels::DeviceArray<float> delta_b_;
  kernels::DeviceArray<int32_t> labels_;
};

}  // namespace gossip::model
