// SGD with (Nesterov) momentum and weight decay over the model's contiguous buffers.
#pragma once

#include "kernels/backend.h"
#include "model/mlp.h"

namespace gossip::model {

struct OptimizerConfig {
  double momentum = 0.9;      // 0 disables momentum
  bool nesterov = false;      // Nesterov look-ahead
  double weight_decay = 0.0;  // L2 coefficient added to the gradient
};

class Sgd {
 public:
  Sgd(Mlp& model, OptimizerConfig config);
  void step(double lr);  // applies model.grads() to model.params()
  float* velocity() { return velocity_.get(); }
  void reset();  // zero momentum (a peer that starts again from another's model)

 private:
  Mlp* model_;  // owned by the trainer, outlives the optimizer
  OptimizerConfig config_;
  kernels::DeviceArray<float> velocity_;
};

}  // namespace gossip::model
