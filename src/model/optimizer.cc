#include "model/optimizer.h"

namespace gossip::model {

Sgd::Sgd(Mlp& model, OptimizerConfig config)
    : model_(&model), config_(config), velocity_(model.backend(), model.num_params()) {
  reset();
}

void Sgd::reset() { model_->backend().fill(velocity_.get(), 0.0f, model_->num_params()); }

void Sgd::step(double lr) {
  model_->backend().sgd_update(model_->params(), model_->grads(), velocity_.get(), model_->num_params(),
                               static_cast<float>(lr), static_cast<float>(config_.momentum),
                               static_cast<float>(config_.weight_decay), config_.nesterov);
}

}  // namespace gossip::model
