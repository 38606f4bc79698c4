// The local training loop of one peer: data shard, model, optimiser and schedule. Communication
// plugs in through StepHook, so the loop is the same for a single peer and for every algorithm.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "peer/batch_source.h"
#include "peer/checkpoint.h"
#include "peer/config.h"

namespace gossip::peer {

// Hooks the communication layer into the loop. Every method runs on the training thread.
class StepHook {
 public:
  virtual ~StepHook() = default;
  // Before the gradient of step `step` is computed (push-sum de-biases here).
  virtual void before_step(int64_t /*step*/, model::Model& /*model*/) {}
  // After the backward pass, before the optimiser step: the gradient may be replaced (gradient
  // tracking steps along its tracker).
  virtual void before_update(int64_t /*step*/, model::Model& /*model*/) {}
  // After the local optimiser step: gossip mixes, PGA averages.
  virtual void after_step(int64_t step, model::Model& model) = 0;
  // Extra text for the progress line of `step` (e.g. the consensus distance).
  virtual std::string log_extra(int64_t /*step*/, model::Model& /*model*/) { return ""; }
  // Extra text for a live line (local counters only: no collective, no wait).
  virtual std::string live_extra() { return ""; }
  // At each progress line, with the interval's mean loss, train accuracy and throughput.
  virtual void progress(int64_t /*step*/, model::Model& /*model*/, double /*loss*/, double /*accuracy*/,
                        double /*samples_per_s*/) {}
  // After the last step and the evaluation of this peer's own model; returns true when it replaced
  // the model by the global average (which is then evaluated too).
  virtual bool finish(model::Model& /*model*/) { return false; }
  // After after_step: true (with this peer's new rank and the member count) when the membership
  // changed, so the trainer takes the data shard of its new rank.
  virtual bool view_changed(int* /*rank*/, int* /*n*/) { return false; }
  // The membership epoch (recorded in checkpoints).
  virtual uint32_t membership_epoch() { return 0; }
  // After after_step: true when this peer leaves the run now (graceful leave).
  virtual bool stop_requested() { return false; }
  // After after_step: true (with the step to continue at) when this peer was cut off from the
  // run and taken back: it continues at the run's step with its contact's model.
  virtual bool rejoined(int64_t* /*next_step*/) { return false; }
  // The algorithm's own state, saved in checkpoints (push-sum: numerator and weight).
  virtual std::vector<float> save_state() { return {}; }
  virtual void restore_state(const std::vector<float>& /*state*/) {}
};

struct EvalResult {
  double loss = 0;      // mean per prediction (per byte for a language model)
  double accuracy = 0;  // arg-max hits (the next byte for a language model)
  bool per_byte = false;  // a language model: loss / ln 2 is its bits per byte
  double bits_per_byte() const { return loss / 0.6931471805599453; }
};

struct TrainResult {
  int64_t steps = 0;
  double samples_per_s = 0;  // predictions per second: rows, or tokens for a language model
  double train_seconds = 0;  // the training loop's wall time less its eval_every evaluations
  double final_train_loss = 0;
  EvalResult test;                     // this peer's own model
  std::optional<EvalResult> averaged;  // the global average of all peers' models, when there is one
  kernels::TransferStats transfers;    // host<->device bytes of the training steps (a device backend)
};

class Trainer {
 public:
  // `rank` of `n` peers selects the data shard; `hook` may be null (no communication).
  Trainer(const RunConfig& config, int rank, int n, StepHook* hook);

  TrainResult run();
  // Installs the communication hook (after construction, once the model size is known).
  void set_hook(StepHook* hook) { hook_ = hook; }
  // The current model on the whole test (validation) set.
  EvalResult evaluate();
  // Continues from checkpoint `c`: its step, model, optimiser, algorithm state and data position
  // (replayed, so the run goes on exactly as if it had not stopped). `source` names it in errors.
  void restore(const Checkpoint& c, const std::string& source);

  // Takes the data shard of `rank` among `n` peers (after a membership change).
  void reshard(int rank, int n);
  // The member's id, which names it in log lines and checkpoint files (the constructor's rank
  // until told; a joiner learns its id from its welcome).
  void set_member_id(int id) { id_ = id; }
  // A joiner: starts at `step` of a run of `total_steps` (the schedule follows the run's).
  void start_at(int64_t step, int64_t total_steps);

  model::Model& model() { return *model_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  void save_checkpoint(int64_t steps_done);
  // The progress line after `step` over `interval` (its predictions took `secs`); returns its
  // mean loss.
  double log_progress(int64_t step, const model::BatchStats& interval, double secs);
  // The "live step ..." line for gossip-launch's terminal view (see live_ticker.h).
  void log_live(int64_t step, const model::BatchStats& interval, double secs);
  void stretch_step(std::chrono::steady_clock::time_point step_start);
  // Adds the training loss and hits of the steps since the last call up to `step` (the
  // backend's tally) to each of `sums`; throws gossip::Error naming those steps when the loss is
  // not finite.
  void take_loss_tally(int64_t step, std::initializer_list<model::BatchStats*> sums);

  RunConfig config_;
  int rank_;  // in the current membership
  int n_;
  int id_;    // the member's id: its rank in the YAML's membership, a joiner's from its welcome
  int64_t start_step_ = 0;
  int64_t tally_from_ = 0;  // the first step whose loss take_loss_tally has not read
  StepHook* hook_;  // owned by the caller, outlives the trainer
  std::unique_ptr<kernels::Backend> backend_;  // first: the source and the model hold its memory
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::Optimizer> optimizer_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int eval_rows_ = 0;  // rows per evaluation batch
};

// The parameter count of the configured model, without loading the data (a joiner announces it
// in its join request before it loads anything).
size_t planned_num_params(const RunConfig& config);

}  // namespace gossip::peer
