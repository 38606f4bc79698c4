// Plugs an algorithm into the training loop: after each local step it mixes the parameter buffer
// (gossip, CHOCO's compressed gossip or push-sum), every H-th step it replaces that by an exact global average among the
// peers (Gossip-PGA, local SGD, all-reduce) or takes DiLoCo's outer step, it measures the consensus distance
// Ξ = (1/n)·Σ‖x_i − x̄‖² on request, and at the end it averages the models.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/choco_step.h"
#include "algorithms/collectives.h"
#include "algorithms/consensus.h"
#include "algorithms/diloco_step.h"
#include "peer/config.h"
#include "control/control.h"
#include "algorithms/gossip_step.h"
#include "algorithms/gradient_tracking.h"
#include "algorithms/push_sum_step.h"
#include "peer/trainer.h"

namespace gossip::peer {

class Membership;
struct ViewChange;

class DecentralizedHook final : public StepHook {
 public:
  // `membership` (may be null: a fixed set of peers) runs view changes whenever one is pending;
  // `transport` is then the ViewTransport it updates.
  DecentralizedHook(const RunConfig& config, Transport& transport, size_t floats, Membership* membership = nullptr);

  void before_step(int64_t step, model::Model& model) override;
  void before_update(int64_t step, model::Model& model) override;
  void after_step(int64_t step, model::Model& model) override;
  std::string log_extra(int64_t step, model::Model& model) override;
  std::string live_extra() override;
  void progress(int64_t step, model::Model& model, double loss, double accuracy, double samples_per_s) override;
  bool finish(model::Model& model) override;
  bool view_changed(int* rank, int* n) override;
  bool stop_requested() override { return left_; }
  bool rejoined(int64_t* next_step) override;
  uint32_t membership_epoch() override { return t_->epoch(); }
  // Graceful leave: at the next step this peer tells the others and stops (any thread may set it).
  void set_leave_flag(const std::atomic<bool>* flag) { leave_flag_ = flag; }
  // A joiner: the first round it communicates in, and the run's length (for the welcomes it
  // sends itself later).
  void start_at(int64_t round) { resume_round_ = round; }
  void set_total_steps(int64_t total) { total_steps_ = total; }
  // A joiner: receives the model its contact sends for round `round` into `model`.
  void receive_start_model(model::Model& model, int contact_rank, int64_t round);
  std::vector<float> save_state() override;
  void restore_state(const std::vector<float>& state) override;
  // Publishes round, progress and snapshots on the control channel (`control` outlives the hook).
  void set_control(ControlState* control);

  // Collective: every peer must call it at the same point. x is this peer's (de-biased) model.
  Consensus consensus(const float* x);
  // Collective: the smallest of every peer's `value` (−1 ≤ value < 2^24), e.g. the newest
  // checkpoint step that every peer has.
  int64_t agree_min(int64_t value);
  // What interrupted a collective outside training (e.g. "peer 2 (tcp://…) was suspected dead").
  std::string membership_problem();

 private:
  RingAllReduce new_allreduce() const;         // for the current view, its collective numbers from 0
  float* make_spare(model::Model& model);      // spare_ made (see mix); returns the parameters
  float* host_params(model::Model& model);     // the model's buffer on the host (downloads for CUDA)
  void store_params(model::Model& model);      // uploads host_ back when the model is on a device
  void global_average(float* x, Dtype wire = Dtype::kF32);
  // Collective (elastic): whether every member kept the last progress line's average (finish).
  bool reuse_final_mean();
  void log_consensus(int64_t step, const Consensus& c);
  void publish_members();  // "consensus step S xi Ξ rel Ξ/‖x̄‖²"
  void mix(int64_t step, model::Model& model);
  void device_gossip(int64_t step, model::Model& model);  // mix's gossip round for a model on a device
  // The gradient ← the tracker of the peers' average gradient (one round of its gossip).
  void track_gradient(int64_t step, model::Model& model);
  // Before CHOCO's first round of a run: when every peer holds the very same model, the public
  // copies start there instead and the round is compressed.
  void start_choco_from_common_model(int64_t step, model::Model& model);
  // DiLoCo after every inner_steps-th step: average the pseudo-gradients, take the outer step.
  void outer_step(int64_t step, float* x);
  // Runs a view change (`round`: the next round this peer would communicate in) and adapts the
  // algorithms to the new view.
  void change_view(int64_t round, model::Model& model);
  // This peer was cut off (`why`): rejoins the run and takes its contact's model.
  void rejoin(const std::string& why, model::Model& model);
  // Runs `f`; when a membership change interrupts it, takes part in the change and returns false.
  template <class F>
  bool guarded(int64_t round, model::Model& model, F&& f);

  AlgorithmConfig algo_;
  // Asynchronous push-sum: no step may wait for other peers (so no Ξ on progress lines).
  bool asynchronous() const { return push_sum_ && push_sum_->asynchronous(); }
  int consensus_every_;
  int log_every_;
  Transport* t_;  // owned by the peer's Node (or a test), outlives the hook
  size_t floats_;
  uint64_t seed_;  // the run's seed (the int8 all-reduce's rounding)
  RingAllReduce allreduce_;
  std::optional<GossipStep> gossip_;
  std::optional<PushSumStep> push_sum_;
  std::optional<DilocoStep> diloco_;
  std::optional<ChocoStep> choco_;
  std::optional<GradientTracker> tracker_;
  std::vector<float> host_grads_;  // the gradient on the host for device backends (gradient tracking)
  std::vector<float> delta_, delta_out_;  // DiLoCo: the pseudo-gradient and its gossip mix
  bool push_sum_started_ = false;
  std::vector<float> restored_push_sum_;  // a checkpoint's push-sum state, until the first step
  ControlState* control_ = nullptr;
  Membership* membership_;
  const std::atomic<bool>* leave_flag_ = nullptr;
  bool left_ = false;
  int64_t resume_round_ = 0;  // rounds before it are trained locally (a view change skipped them)
  std::optional<int64_t> rejoined_at_;  // set by a rejoin: the step the trainer continues at
  int64_t total_steps_ = 0;
  bool reshard_ = false;
  std::vector<float> host_;      // host copy of the parameters for device backends
  kernels::DeviceArray<float> spare_;  // the buffer a gossip step mixes into (the model adopts it)
  std::vector<float> scratch_;  // x̄ for the consensus distance
  // The last progress line measured Ξ at the last step, so scratch_ holds the final average
  // (valid until a view change): finish() takes it instead of averaging again.
  bool final_mean_ready_ = false;
};

}  // namespace gossip::peer
