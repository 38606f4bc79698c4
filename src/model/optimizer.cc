#include "model/optimizer.h"

#include <cmath>
#include <cstring>

#include "common/error.h"

namespace gossip::model {
namespace {

std::vector<float> download(kernels::Backend& backend, const float* p, size_t n) {
  std::vector<float> out(n);
  backend.download(out.data(), p, n * sizeof(float));
  return out;
}

void expect_size(const std::vector<float>& state, size_t n, const std::string& what, const std::string& source) {
  if (state.size() != n)
    throw Error(source, "checkpoint's optimiser state has " + std::to_string(state.size()) + " values, " + what +
                            " needs " + std::to_string(n) + ": another model shape or optimiser");
}

}  // namespace

std::optional<OptimizerKind> parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adamw") return OptimizerKind::kAdamW;
  return std::nullopt;
}

std::unique_ptr<Optimizer> make_optimizer(Model& model, const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::kAdamW) return std::make_unique<AdamW>(model, config);
  return std::make_unique<Sgd>(model, config);
}

double clip_gradients(Model& model, double max_norm) {
  if (max_norm <= 0) return 0;
  // PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  const double norm = model.backend().norm2(model.grads(), model.num_params());
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1) model.backend().scale(model.num_params(), static_cast<float>(coefficient), model.grads());
  return norm;
}

Sgd::Sgd(Model& model, OptimizerConfig config)
    : model_(&model), config_(config), velocity_(model.backend(), model.num_params()) {
  if (config_.quasi_global) {
    global_momentum_ = kernels::DeviceArray<float>(model.backend(), model.num_params());
    last_params_ = kernels::DeviceArray<float>(model.backend(), model.num_params());
  }
  reset();
}

void Sgd::reset() {
  model_->backend().fill(velocity_.get(), 0.0f, model_->num_params());
  if (config_.quasi_global) model_->backend().fill(global_momentum_.get(), 0.0f, model_->num_params());
  last_lr_ = 0;
}

void Sgd::quasi_global_momentum(double lr) {
  kernels::Backend& b = model_->backend();
  const size_t n = model_->num_params();
  float* x = model_->params();
  float* last = last_params_.get();
  float* m = global_momentum_.get();
  const auto mu = static_cast<float>(config_.momentum);
  if (last_lr_ > 0) {
    b.axpy(n, -1.0f, x, last);  // x_last − x: the last step's own update and mix together
    b.scale(n, mu, m);
    b.axpy(n, static_cast<float>((1.0 - config_.momentum) / last_lr_), last, m);
  }
  b.fill(velocity_.get(), 0.0f, n);  // v ← m̂
  b.axpy(n, 1.0f, m, velocity_.get());
  b.fill(last, 0.0f, n);  // x_last ← x
  b.axpy(n, 1.0f, x, last);
  last_lr_ = static_cast<float>(lr);
}

void Sgd::step(double lr) {
  clip_gradients(*model_, config_.clip_norm);
  if (config_.quasi_global) quasi_global_momentum(lr);
  model_->backend().sgd_update(model_->params(), model_->grads(), velocity_.get(), model_->num_params(),
                               static_cast<float>(lr), static_cast<float>(config_.momentum),
                               static_cast<float>(config_.weight_decay), config_.nesterov);
}

std::vector<float> Sgd::save_state() const {
  const size_t n = model_->num_params();
  std::vector<float> state = download(model_->backend(), velocity_.get(), n);
  if (!config_.quasi_global) return state;
  for (const float* p : {global_momentum_.get(), last_params_.get()}) {
    const std::vector<float> part = download(model_->backend(), p, n);
    state.insert(state.end(), part.begin(), part.end());
  }
  state.push_back(last_lr_);
  return state;
}

void Sgd::restore_state(const std::vector<float>& state, const std::string& source) {
  const size_t n = model_->num_params();
  expect_size(state, config_.quasi_global ? 3 * n + 1 : n, config_.quasi_global ? "quasi-global SGD" : "SGD", source);
  model_->backend().upload(velocity_.get(), state.data(), n * sizeof(float));
  if (!config_.quasi_global) return;
  model_->backend().upload(global_momentum_.get(), state.data() + n, n * sizeof(float));
  model_->backend().upload(last_params_.get(), state.data() + 2 * n, n * sizeof(float));
  last_lr_ = state.back();
}

AdamW::AdamW(Model& model, OptimizerConfig config)
    : model_(&model), config_(config), m_(model.backend(), model.num_params()), v_(model.backend(), model.num_params()) {
  reset();
}

void AdamW::reset() {
  model_->backend().fill(m_.get(), 0.0f, model_->num_params());
  model_->backend().fill(v_.get(), 0.0f, model_->num_params());
  t_ = 0;
}

void AdamW::step(double lr) {
  clip_gradients(*model_, config_.clip_norm);
  ++t_;
  kernels::AdamWStep s;
  s.lr = static_cast<float>(lr);
  s.beta1 = static_cast<float>(config_.beta1);
  s.beta2 = static_cast<float>(config_.beta2);
  s.eps = static_cast<float>(config_.eps);
  s.weight_decay = static_cast<float>(config_.weight_decay);
  s.bias1 = static_cast<float>(1.0 - std::pow(config_.beta1, static_cast<double>(t_)));
  s.bias2 = static_cast<float>(1.0 - std::pow(config_.beta2, static_cast<double>(t_)));
  model_->backend().adamw_update(model_->params(), model_->grads(), m_.get(), v_.get(), model_->num_params(), s);
}

std::vector<float> AdamW::save_state() const {
  const size_t n = model_->num_params();
  std::vector<float> state = download(model_->backend(), m_.get(), n);
  const std::vector<float> v = download(model_->backend(), v_.get(), n);
  state.insert(state.end(), v.begin(), v.end());
  const double t = static_cast<double>(t_);
  float halves[2];
  std::memcpy(halves, &t, sizeof(t));
  state.insert(state.end(), halves, halves + 2);
  return state;
}

void AdamW::restore_state(const std::vector<float>& state, const std::string& source) {
  const size_t n = model_->num_params();
  expect_size(state, 2 * n + 2, "AdamW", source);
  model_->backend().upload(m_.get(), state.data(), n * sizeof(float));
  model_->backend().upload(v_.get(), state.data() + n, n * sizeof(float));
  double t;
  std::memcpy(&t, state.data() + 2 * n, sizeof(t));
  t_ = static_cast<int64_t>(t);
}

}  // namespace gossip::model
