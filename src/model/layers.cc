#include "model/layers.h"

#include <cmath>

namespace gossip::model {

void init_params(float* host, size_t n, const InitRule& rule, int fan_in, std::mt19937_64& rng) {
  switch (rule.kind) {
    case InitRule::kKaimingUniform: {
      const float bound = std::sqrt(6.0f / float(fan_in));
      std::uniform_real_distribution<float> dist(-bound, bound);
      for (size_t i = 0; i < n; ++i) host[i] = dist(rng);
      break;
    }
    case InitRule::kNormal: {
      std::normal_distribution<float> dist(0.0f, rule.std);
      for (size_t i = 0; i < n; ++i) host[i] = dist(rng);
      break;
    }
    case InitRule::kZero:
      std::fill(host, host + n, 0.0f);
      break;
    case InitRule::kOne:
      std::fill(host, host + n, 1.0f);
      break;
  }
}

int Linear::rows(const Pass& p) const { return p.batch * int(p.tensor(x_).per_sample / in_); }

void Linear::forward(const Pass& p) {
  const int r = rows(p);
  float* y = p.value(y_);
  // y = x · Wᵀ + b
  p.backend.gemm(false, true, r, out_, in_, 1.0f, p.value(x_), p.params + w_, 0.0f, y);
  p.backend.bias_act_forward(y, p.params + b_, r, out_, false);
}

void Linear::backward(const Pass& p) {
  const int r = rows(p);
  const float* dy = p.grad(y_);
  p.backend.gemm(true, false, out_, in_, r, 1.0f, dy, p.value(x_), 1.0f, p.grads + w_);  // dW += dyᵀ·x
  p.k.column_sum_add(dy, p.grads + b_, r, out_);
  if (float* dx = p.grad(x_)) p.backend.gemm(false, false, r, in_, out_, 1.0f, dy, p.params + w_, 1.0f, dx);
}

void Linear::init(float* host, std::mt19937_64& rng) const {
  init_params(host + w_, size_t(in_) * out_, weight_, in_, rng);
  if (kaiming_bias_) {
    // PyTorch's default bias: U(±1/√fan_in).
    std::uniform_real_distribution<float> dist(-1.0f / std::sqrt(float(in_)), 1.0f / std::sqrt(float(in_)));
    for (int i = 0; i < out_; ++i) host[b_ + i] = dist(rng);
  } else {
    init_params(host + b_, out_, {InitRule::kZero}, in_, rng);
  }
}

WeightStandardization::WeightStandardization(kernels::Backend& backend, int rows, int fan_in)
    : w_hat(backend, size_t(rows) * fan_in),
      d_w_hat(backend, size_t(rows) * fan_in),
      stats(backend, 2 * size_t(rows)),
      ones(backend, fan_in),
      zeros(backend, fan_in),
      unused(backend, 2 * size_t(fan_in)) {
  backend.fill(ones.get(), 1.0f, ones.size());
  backend.fill(zeros.get(), 0.0f, zeros.size());
}

void Conv2d::forward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  const float* w = p.params + w_;
  if (ws_) {
    float* mean = ws_->stats.get();
    p.k.layernorm_forward(w, ws_->ones.get(), ws_->zeros.get(), ws_->w_hat.get(), mean, mean + shape_.out_c,
                          shape_.out_c, fan_in());
    w = ws_->w_hat.get();
  }
  p.k.conv2d_forward(s, p.value(x_), w, p.params + b_, p.value(y_), workspace_.get());
}

void Conv2d::backward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  if (!ws_) {
    p.k.conv2d_backward(s, p.value(x_), p.params + w_, p.grad(y_), p.grad(x_), p.grads + w_, p.grads + b_,
                        workspace_.get());
    return;
  }
  // The convolution's gradient with respect to ŵ, then through the standardisation into w's.
  p.backend.fill(ws_->d_w_hat.get(), 0.0f, ws_->d_w_hat.size());
  p.backend.fill(ws_->unused.get(), 0.0f, ws_->unused.size());
  p.k.conv2d_backward(s, p.value(x_), ws_->w_hat.get(), p.grad(y_), p.grad(x_), ws_->d_w_hat.get(), p.grads + b_,
                      workspace_.get());
  const float* mean = ws_->stats.get();
  p.k.layernorm_backward(p.params + w_, ws_->ones.get(), mean, mean + shape_.out_c, ws_->d_w_hat.get(),
                         p.grads + w_, ws_->unused.get(), ws_->unused.get() + fan_in(), shape_.out_c, fan_in());
}

void Conv2d::init(float* host, std::mt19937_64& rng) const {
  init_params(host + w_, size_t(shape_.out_c) * fan_in(), {InitRule::kKaimingUniform}, fan_in(), rng);
  init_params(host + b_, shape_.out_c, {InitRule::kZero}, fan_in(), rng);
}

void MaxPool2d::forward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  p.k.maxpool2d_forward(s, p.value(x_), p.value(y_), argmax_.get());
}

void MaxPool2d::backward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  if (float* dx = p.grad(x_)) p.k.maxpool2d_backward(s, p.grad(y_), argmax_.get(), dx);
}

void GlobalAvgPool::forward(const Pass& p) { p.k.global_avgpool_forward(p.value(x_), p.value(y_), p.batch, c_, plane_); }

void GlobalAvgPool::backward(const Pass& p) {
  if (float* dx = p.grad(x_)) p.k.global_avgpool_backward(p.grad(y_), dx, p.batch, c_, plane_);
}

void Activation::forward(const Pass& p) {
  const size_t n = size_t(p.batch) * p.tensor(x_).per_sample;
  if (kind_ == kRelu)
    p.k.relu_forward(p.value(x_), p.value(y_), n);
  else
    p.k.gelu_forward(p.value(x_), p.value(y_), n);
}

void Activation::backward(const Pass& p) {
  float* dx = p.grad(x_);
  if (!dx) return;
  const size_t n = size_t(p.batch) * p.tensor(x_).per_sample;
  if (kind_ == kRelu)
    p.k.relu_backward_add(p.value(y_), p.grad(y_), dx, n);
  else
    p.k.gelu_backward_add(p.value(x_), p.grad(y_), dx, n);
}

void Add::forward(const Pass& p) {
  p.k.add_forward(p.value(a_), p.value(b_), p.value(y_), size_t(p.batch) * p.tensor(y_).per_sample);
}

void Add::backward(const Pass& p) {
  const size_t n = size_t(p.batch) * p.tensor(y_).per_sample;
  for (int in : {a_, b_})
    if (float* dx = p.grad(in)) p.backend.axpy(n, 1.0f, p.grad(y_), dx);
}

void Norm::forward(const Pass& p) {
  float* mean = stats_.get();
  float* rstd = mean + stats_.size() / 2;
  if (groups_)
    p.k.groupnorm_forward(p.value(x_), p.params + gamma_, p.params + beta_, p.value(y_), mean, rstd, p.batch,
                          channels_, plane_, groups_);
  else
    p.k.layernorm_forward(p.value(x_), p.params + gamma_, p.params + beta_, p.value(y_), mean, rstd,
                          p.batch * plane_, channels_);
}

void Norm::backward(const Pass& p) {
  const float* mean = stats_.get();
  const float* rstd = mean + stats_.size() / 2;
  if (groups_)
    p.k.groupnorm_backward(p.value(x_), p.params + gamma_, mean, rstd, p.grad(y_), p.grad(x_), p.grads + gamma_,
                           p.grads + beta_, p.batch, channels_, plane_, groups_);
  else
    p.k.layernorm_backward(p.value(x_), p.params + gamma_, mean, rstd, p.grad(y_), p.grad(x_), p.grads + gamma_,
                           p.grads + beta_, p.batch * plane_, channels_);
}

void Norm::init(float* host, std::mt19937_64& rng) const {
  init_params(host + gamma_, channels_, {zero_gamma_ ? InitRule::kZero : InitRule::kOne}, 1, rng);
  init_params(host + beta_, channels_, {InitRule::kZero}, 1, rng);
}

}  // namespace gossip::model
