#include "model/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.h"

namespace gossip::model {

size_t count_params(const std::vector<int>& dims) {
  size_t n = 0;
  for (size_t l = 0; l + 1 < dims.size(); ++l) n += size_t(dims[l]) * dims[l + 1] + dims[l + 1];
  return n;
}

Mlp::Mlp(kernels::Backend& backend, std::vector<int> dims, int max_batch)
    : backend_(&backend), dims_(std::move(dims)), max_batch_(max_batch) {
  if (dims_.size() < 2) throw Error("model", "an MLP needs at least an input and an output size");
  for (int d : dims_)
    if (d <= 0) throw Error("model", "layer sizes must be positive, got " + std::to_string(d));
  if (max_batch_ <= 0) throw Error("model", "batch size must be positive");
  const size_t n = count_params(dims_);
  params_ = kernels::DeviceArray<float>(backend, n);
  grads_ = kernels::DeviceArray<float>(backend, n);
  param_views_ = make_views(params_.get(), dims_);
  grad_views_ = make_views(grads_.get(), dims_);
  for (int d : dims_) acts_.emplace_back(backend, size_t(max_batch_) * d);
  const int widest = *std::max_element(dims_.begin(), dims_.end());
  delta_a_ = kernels::DeviceArray<float>(backend, size_t(max_batch_) * widest);
  delta_b_ = kernels::DeviceArray<float>(backend, size_t(max_batch_) * widest);
  labels_ = kernels::DeviceArray<int32_t>(backend, max_batch_);
  backend.fill(grads_.get(), 0.0f, n);
}

std::vector<LayerView> Mlp::make_views(float* base, const std::vector<int>& dims) {
  std::vector<LayerView> views;
  float* p = base;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    LayerView v{p, p + size_t(dims[l]) * dims[l + 1], dims[l], dims[l + 1]};
    p = v.b + dims[l + 1];
    views.push_back(v);
  }
  return views;
}

void Mlp::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> host(num_params(), 0.0f);
  size_t offset = 0;
  for (size_t l = 0; l + 1 < dims_.size(); ++l) {
    const int in = dims_[l], out = dims_[l + 1];
    // Kaiming uniform for ReLU: U(-sqrt(6/in), sqrt(6/in)); biases start at zero.
    std::uniform_real_distribution<float> dist(-std::sqrt(6.0f / in), std::sqrt(6.0f / in));
    for (size_t i = 0; i < size_t(in) * out; ++i) host[offset + i] = dist(rng);
    offset += size_t(in) * out + out;
  }
  upload_params(host);
}

void Mlp::swap_params(kernels::DeviceArray<float>& other) {
  if (other.size() != num_params())
    throw Error("model", "swap_params needs " + std::to_string(num_params()) + " floats, got " + std::to_string(other.size()));
  std::swap(params_, other);
  param_views_ = make_views(params_.get(), dims_);
}

std::vector<float> Mlp::download_params() const {
  return download_buffer(*backend_, params_.get(), num_params());
}

void Mlp::upload_params(const std::vector<float>& host) {
  upload_buffer(*backend_, params_.get(), num_params(), host);
}

BatchStats Mlp::train_batch(const float* host_x, const int32_t* host_y, int batch) {
  return forward({host_x, nullptr, host_y, batch}, true);
}

BatchStats Mlp::evaluate(const float* host_x, const int32_t* host_y, int batch) {
  return forward({host_x, nullptr, host_y, batch}, false);
}

BatchStats Mlp::forward(const Batch& b, bool backward) {
  const int batch = b.rows;
  if (batch <= 0 || batch > max_batch_)
    throw Error("model", "batch of " + std::to_string(batch) + " rows exceeds the model's " +
                             std::to_string(max_batch_));
  kernels::Backend& be = *backend_;
  place(be, b, acts_[0].get(), b.x, size_t(batch) * dims_[0] * sizeof(float));
  place(be, b, labels_.get(), b.labels, size_t(batch) * sizeof(int32_t));
  const size_t layers = param_views_.size();
  for (size_t l = 0; l < layers; ++l) {
    const LayerView& v = param_views_[l];
    // act[l+1] = act[l] · Wᵀ + b
    be.gemm(false, true, batch, v.out, v.in, 1.0f, acts_[l].get(), v.w, 0.0f, acts_[l + 1].get());
    be.bias_act_forward(acts_[l + 1].get(), v.b, batch, v.out, l + 1 < layers);
  }
  float* delta = backward ? delta_a_.get() : nullptr;
  const BatchStats stats = score(be, acts_[layers].get(), labels_.get(), batch, dims_.back(), delta);
  if (!backward) return stats;

  float* other = delta_b_.get();
  for (size_t l = layers; l-- > 0;) {
    const LayerView& v = param_views_[l];
    const LayerView& g = grad_views_[l];
    // dW = δᵀ · act[l], db = Σ rows δ, δ_prev = δ · W (masked by ReLU of act[l]).
    be.gemm(true, false, v.out, v.in, batch, 1.0f, delta, acts_[l].get(), 0.0f, g.w);
    be.column_sum(delta, g.b, batch, v.out);
    if (l == 0) break;
    be.gemm(false, false, batch, v.in, v.out, 1.0f, delta, v.w, 0.0f, other);
    be.relu_backward(other, acts_[l].get(), size_t(batch) * v.in);
    std::swap(delta, other);
  }
  return stats;
}

}  // namespace gossip::model
