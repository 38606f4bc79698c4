// Optimizers over the model's contiguous buffers: SGD with (Nesterov) momentum, and AdamW. Their
// state (momentum; AdamW's two moments and step count) is this peer's own: gossip mixes the
// parameters only. A peer that starts again from another's model (a joiner, a rejoin) resets
// it; checkpoints save and restore it exactly. Optional global-norm gradient clipping first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"

namespace gossip::model {

enum class OptimizerKind { kSgd, kAdamW };
// "sgd", "adamw" (the YAML's names); nullopt for any other.
std::optional<OptimizerKind> parse_optimizer_kind(const std::string& name);

struct OptimizerConfig {
  double momentum = 0.9;      // SGD: 0 disables momentum
  bool nesterov = false;      // SGD: Nesterov look-ahead
  double weight_decay = 0.0;  // SGD: L2 coefficient added to the gradient; AdamW: decoupled decay
  OptimizerKind kind = OptimizerKind::kSgd;
  double beta1 = 0.9;         // AdamW: first-moment decay
  double beta2 = 0.999;       // AdamW: second-moment decay
  double eps = 1e-8;          // AdamW: added to the root of the second moment
  double clip_norm = 0;       // > 0: gradients are scaled so that their global L2 norm is at most this
  double label_smoothing = 0;  // the training loss's target: (1 − s)·onehot + s/classes (Model::set_label_smoothing)
  bool quasi_global = false;   // SGD: quasi-global momentum (Sgd below)
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(double lr) = 0;  // applies model.grads() to model.params()
  virtual void reset() = 0;          // zero state (a peer that starts again from another's model)
  // The state as floats, for checkpoints, and back; restore throws gossip::Error naming `source`
  // for a state of another size.
  virtual std::vector<float> save_state() const = 0;
  virtual void restore_state(const std::vector<float>& state, const std::string& source) = 0;
};

std::unique_ptr<Optimizer> make_optimizer(Model& model, const OptimizerConfig& config);

// Scales the gradients so that their global L2 norm is at most `max_norm` (no-op when
// max_norm <= 0); returns the norm before clipping (0 when not computed).
double clip_gradients(Model& model, double max_norm);

// SGD with momentum. With config.quasi_global (QG-DSGDm, Lin, Karimireddy, Stich & Jaggi 2021)
// the momentum is rebuilt before every step from how the model itself moved since the last step
// — its own update and the gossip mix together, so the neighbours' directions are in it — instead
// of from this peer's gradients alone, which on skewed shards point the wrong way:
//     m̂ ← μ·m̂ + (1 − μ)·(x_last − x)/lr_last;   v ← m̂;   then the SGD step (v = μ·v + g, ...).
class Sgd final : public Optimizer {
 public:
  Sgd(Model& model, OptimizerConfig config);
  void step(double lr) override;
  void reset() override;
  // The momentum buffer; quasi-global: then m̂, x_last and lr_last (3·params + 1 values).
  std::vector<float> save_state() const override;
  void restore_state(const std::vector<float>& state, const std::string& source) override;

 private:
  void quasi_global_momentum(double lr);

  Model* model_;  // owned by the trainer, outlives the optimizer
  OptimizerConfig config_;
  kernels::DeviceArray<float> velocity_;
  kernels::DeviceArray<float> global_momentum_, last_params_;  // quasi-global: m̂, x_last
  float last_lr_ = 0;  // quasi-global: the last step's lr (a float: checkpoints keep it exactly); 0: x_last unset
};

// Loshchilov & Hutter's AdamW as PyTorch computes it: w ← w·(1 − lr·wd); m ← β1·m + (1−β1)·g;
// v ← β2·v + (1−β2)·g²; w ← w − (lr / (1−β1^t))·m / (√v / √(1−β2^t) + ε).
class AdamW final : public Optimizer {
 public:
  AdamW(Model& model, OptimizerConfig config);
  void step(double lr) override;
  void reset() override;
  std::vector<float> save_state() const override;  // m, v, then t as the two float halves of a double
  void restore_state(const std::vector<float>& state, const std::string& source) override;
  int64_t steps() const { return t_; }

 private:
  Model* model_;  // owned by the trainer, outlives the optimizer
  OptimizerConfig config_;
  kernels::DeviceArray<float> m_, v_;
  int64_t t_ = 0;  // steps taken (bias correction)
};

}  // namespace gossip::model
