#include "model/network.h"

#include <algorithm>

#include "common/error.h"
#include "model/layers.h"

namespace gossip::model {

float* Pass::value(int id) const { return net.tensors_[net.resolve(id)].value.get(); }
float* Pass::grad(int id) const { return net.tensors_[net.resolve(id)].grad.get(); }
const Tensor& Pass::tensor(int id) const { return net.tensors_[id]; }

void Network::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> host(num_params(), 0.0f);
  for (const auto& layer : layers_) layer->init(host.data(), rng);
  upload_params(host);
}

void Network::swap_params(kernels::DeviceArray<float>& other) {
  if (other.size() != num_params())
    throw Error("model", "swap_params needs " + std::to_string(num_params()) + " floats, got " +
                             std::to_string(other.size()));
  std::swap(params_, other);  // layers hold offsets, not pointers: nothing else to update
}

std::vector<float> Network::download_params() const {
  return download_buffer(*backend_, params_.get(), num_params());
}

void Network::upload_params(const std::vector<float>& host) {
  upload_buffer(*backend_, params_.get(), num_params(), host);
}

BatchStats Network::run(const Batch& b, bool backward) {
  if (b.rows <= 0 || b.rows > max_batch_)
    throw Error("model", "batch of " + std::to_string(b.rows) + " rows, the network takes 1.." +
                             std::to_string(max_batch_));
  if (takes_tokens() ? !b.tokens : !b.x)
    throw Error("model", std::string("this network reads ") + (takes_tokens() ? "tokens" : "float rows") +
                             ", the batch has none");
  kernels::Backend& be = *backend_;
  if (takes_tokens())
    place(be, b, tokens_.get(), b.tokens, size_t(b.rows) * context_ * sizeof(int32_t));
  else
    place(be, b, tensors_[0].value.get(), b.x, size_t(b.rows) * tensors_[0].per_sample * sizeof(float));
  const int predictions = b.rows * int(tensors_[logits_].per_sample / classes_);
  place(be, b, labels_.get(), b.labels, size_t(predictions) * sizeof(int32_t));

  const Pass pass{be, *kernels_, b.rows, params_.get(), grads_.get(), tokens_.get(), *this};
  for (const auto& layer : layers_) layer->forward(pass);
  float* dlogits = backward ? pass.grad(logits_) : nullptr;
  const BatchStats stats = score(be, pass.value(logits_), labels_.get(), predictions, classes_, dlogits);
  if (backward) {
    be.fill(grads_.get(), 0.0f, grads_.size());
    for (size_t id = 0; id < tensors_.size(); ++id) {
      Tensor& t = tensors_[id];
      if (t.grad.size() && int(id) != resolve(logits_)) be.fill(t.grad.get(), 0.0f, size_t(b.rows) * t.per_sample);
    }
    for (size_t l = layers_.size(); l-- > 0;) layers_[l]->backward(pass);
  }
  return stats;
}

NetworkBuilder::NetworkBuilder(kernels::Backend& backend, int max_batch) : net_(new Network) {
  net_->backend_ = &backend;
  net_->kernels_ = backend.layers();
  net_->max_batch_ = max_batch;
  if (!net_->kernels_)
    throw Error("model", "the " + backend.name() +
                             " backend has no kernels for convolutional or transformer layers yet (only the MLP "
                             "runs on it); use device: cpu");
  need(max_batch > 0, "batch size must be positive");
}

void NetworkBuilder::need(bool ok, const std::string& what) const {
  if (!ok) throw Error("model", what);
}

int NetworkBuilder::add_tensor(std::vector<int> shape, bool with_grad) {
  Tensor t;
  t.per_sample = 1;
  for (int d : shape) {
    need(d > 0, "a layer's output would have an empty axis");
    t.per_sample *= size_t(d);
  }
  t.shape = std::move(shape);
  kernels::Backend& be = *net_->backend_;
  t.value = kernels::DeviceArray<float>(be, size_t(max_batch()) * t.per_sample);
  if (with_grad) t.grad = kernels::DeviceArray<float>(be, size_t(max_batch()) * t.per_sample);
  net_->tensors_.push_back(std::move(t));
  return int(net_->tensors_.size()) - 1;
}

int NetworkBuilder::image_input(int c, int h, int w) {
  need(net_->tensors_.empty(), "the input must be the first tensor");
  return add_tensor({c, h, w}, false);
}

int NetworkBuilder::token_input(int context) {
  need(net_->tensors_.empty(), "the input must be the first tensor");
  need(context > 0, "context must be positive");
  net_->context_ = context;
  net_->tokens_ = kernels::DeviceArray<int32_t>(*net_->backend_, size_t(max_batch()) * context);
  Tensor t;  // the tokens live in tokens_; this tensor only carries the shape
  t.shape = {context};
  t.per_sample = size_t(context);
  net_->tensors_.push_back(std::move(t));
  return 0;
}

int NetworkBuilder::linear(int x, int out, InitRule weight, bool kaiming_bias) {
  std::vector<int> shape = tensor(x).shape;
  const int in = shape.back();
  shape.back() = out;
  const int y = add_tensor(shape);
  const size_t offset = add_params(size_t(in) * out + out);
  net_->layers_.push_back(std::make_unique<Linear>(x, y, in, out, offset, weight, kaiming_bias));
  return y;
}

int NetworkBuilder::conv2d(int x, int out_c, int k, int stride, int pad, bool standardize) {
  const std::vector<int> in = tensor(x).shape;
  need(in.size() == 3, "conv2d needs a [C][H][W] input");
  kernels::ConvShape s{max_batch(), in[0], in[1], in[2], out_c, k, stride, pad};
  need(k > 0 && stride > 0 && pad >= 0 && s.out_h() > 0 && s.out_w() > 0,
       "conv2d " + std::to_string(k) + "x" + std::to_string(k) + " does not fit a " + std::to_string(in[1]) + "x" +
           std::to_string(in[2]) + " input");
  need(!standardize || in[0] * k * k > 1, "conv2d: weight standardisation needs a fan-in above 1");
  const int y = add_tensor({out_c, s.out_h(), s.out_w()});
  const size_t offset = add_params(size_t(out_c) * in[0] * k * k + out_c);
  kernels::DeviceArray<float> workspace(*net_->backend_, net_->kernels_->conv2d_workspace(s));
  auto ws = standardize ? std::make_unique<WeightStandardization>(*net_->backend_, out_c, in[0] * k * k) : nullptr;
  net_->layers_.push_back(std::make_unique<Conv2d>(x, y, s, offset, std::move(workspace), std::move(ws)));
  return y;
}

int NetworkBuilder::maxpool2d(int x, int k, int stride) {
  const std::vector<int> in = tensor(x).shape;
  need(in.size() == 3, "maxpool2d needs a [C][H][W] input");
  kernels::PoolShape s{max_batch(), in[0], in[1], in[2], k, stride};
  need(k > 0 && stride > 0 && k <= in[1] && k <= in[2], "maxpool2d window larger than its input");
  const int y = add_tensor({in[0], s.out_h(), s.out_w()});
  kernels::DeviceArray<int32_t> argmax(*net_->backend_, size_t(max_batch()) * tensor(y).per_sample);
  net_->layers_.push_back(std::make_unique<MaxPool2d>(x, y, s, std::move(argmax)));
  return y;
}

int NetworkBuilder::global_avgpool(int x) {
  const std::vector<int> in = tensor(x).shape;
  need(in.size() == 3, "global_avgpool needs a [C][H][W] input");
  const int y = add_tensor({in[0]});
  net_->layers_.push_back(std::make_unique<GlobalAvgPool>(x, y, in[0], in[1] * in[2]));
  return y;
}

int NetworkBuilder::flatten(int x) {
  Tensor t;
  t.per_sample = tensor(x).per_sample;
  t.shape = {int(t.per_sample)};
  t.storage = net_->resolve(x);
  net_->tensors_.push_back(std::move(t));
  return int(net_->tensors_.size()) - 1;
}

int NetworkBuilder::relu(int x) {
  const int y = add_tensor(tensor(x).shape);
  net_->layers_.push_back(std::make_unique<Activation>(Activation::kRelu, x, y));
  return y;
}

int NetworkBuilder::gelu(int x) {
  const int y = add_tensor(tensor(x).shape);
  net_->layers_.push_back(std::make_unique<Activation>(Activation::kGelu, x, y));
  return y;
}

int NetworkBuilder::add(int a, int b) {
  need(tensor(a).shape == tensor(b).shape, "add needs two tensors of one shape");
  const int y = add_tensor(tensor(a).shape);
  net_->layers_.push_back(std::make_unique<Add>(a, b, y));
  return y;
}

int NetworkBuilder::layer_norm(int x) {
  const std::vector<int> shape = tensor(x).shape;
  const int channels = shape.back(), plane = int(tensor(x).per_sample / channels);
  const int y = add_tensor(shape);
  const size_t offset = add_params(2 * size_t(channels));
  kernels::DeviceArray<float> stats(*net_->backend_, 2 * size_t(max_batch()) * plane);
  net_->layers_.push_back(std::make_unique<Norm>(x, y, channels, plane, 0, offset, std::move(stats)));
  return y;
}

int NetworkBuilder::group_norm(int x, int groups, bool zero_gamma) {
  const std::vector<int> shape = tensor(x).shape;
  need(shape.size() == 3, "group_norm needs a [C][H][W] input");
  need(groups > 0 && shape[0] % groups == 0,
       "group_norm: " + std::to_string(groups) + " groups do not divide " + std::to_string(shape[0]) + " channels");
  const int y = add_tensor(shape);
  const size_t offset = add_params(2 * size_t(shape[0]));
  kernels::DeviceArray<float> stats(*net_->backend_, 2 * size_t(max_batch()) * groups);
  net_->layers_.push_back(
      std::make_unique<Norm>(x, y, shape[0], shape[1] * shape[2], groups, offset, std::move(stats), zero_gamma));
  return y;
}

int NetworkBuilder::embedding(int vocab, int dim, float std) {
  need(net_->context_ > 0 && vocab_ == 0, "embedding needs the token input (once)");
  const int y = add_tensor({net_->context_, dim});
  const size_t offset = add_params((size_t(vocab) + net_->context_) * dim);
  wte_offset_ = offset;
  vocab_ = vocab;
  dim_ = dim;
  net_->layers_.push_back(std::make_unique<Embedding>(y, vocab, dim, net_->context_, offset, std));
  return y;
}

int NetworkBuilder::attention(int qkv, int heads) {
  const std::vector<int> shape = tensor(qkv).shape;
  need(shape.size() == 2 && shape[1] % 3 == 0, "attention needs a [T][3·dim] input");
  const int dim = shape[1] / 3;
  need(heads > 0 && dim % heads == 0,
       std::to_string(heads) + " heads do not divide the model width " + std::to_string(dim));
  const int y = add_tensor({shape[0], dim});
  kernels::AttentionShape s{max_batch(), shape[0], dim, heads};
  kernels::DeviceArray<float> att(*net_->backend_, size_t(max_batch()) * heads * shape[0] * shape[0]);
  net_->layers_.push_back(std::make_unique<Attention>(qkv, y, s, std::move(att)));
  return y;
}

int NetworkBuilder::tied_logits(int x) {
  std::vector<int> shape = tensor(x).shape;
  need(vocab_ > 0 && shape.back() == dim_, "tied_logits needs the embedding's width");
  shape.back() = vocab_;
  const int y = add_tensor(shape);
  net_->layers_.push_back(std::make_unique<TiedLogits>(x, y, vocab_, dim_, wte_offset_));
  return y;
}

std::unique_ptr<Network> NetworkBuilder::build(int logits) {
  need(!net_->layers_.empty(), "a network needs at least one layer");
  const Tensor& t = tensor(logits);
  net_->classes_ = t.shape.back();
  net_->logits_ = logits;
  kernels::Backend& be = *net_->backend_;
  net_->params_ = kernels::DeviceArray<float>(be, offset_);
  net_->grads_ = kernels::DeviceArray<float>(be, offset_);
  be.fill(net_->params_.get(), 0.0f, offset_);
  be.fill(net_->grads_.get(), 0.0f, offset_);
  net_->labels_ = kernels::DeviceArray<int32_t>(be, size_t(max_batch()) * (t.per_sample / net_->classes_));
  return std::move(net_);
}

}  // namespace gossip::model
