#include "peer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "model/schedule.h"
#include "peer/live_ticker.h"

namespace gossip::peer {

namespace {
// Rows per evaluation batch: the MLP takes large ones; convolutions and attention keep
// activations per row, so they evaluate at (about) the training batch.
int eval_rows(const model::ModelConfig& m, int batch) {
  switch (m.kind) {
    case model::ModelKind::kMlp: return std::max(batch, 1024);
    case model::ModelKind::kCnn: return std::max(batch, 256);
    case model::ModelKind::kGpt: return batch;
  }
  return batch;
}
}  // namespace

size_t planned_num_params(const RunConfig& c) {
  return model::count_model_params(c.train.model, planned_input_shape(c));
}

Trainer::Trainer(const RunConfig& config, int rank, int n, StepHook* hook)
    : config_(config), rank_(rank), n_(n), id_(rank), hook_(hook) {
  backend_ = kernels::make_backend(config.device, config.device_index);
  source_ = make_batch_source(config, rank, n, *backend_);  // batches gathered where the model lies
  const int batch = config.train.batch;
  // Every peer runs the same number of steps (synchronous algorithms need it), whatever its shard
  // size: one epoch is the data set divided by n·batch.
  steps_per_epoch_ = std::max<int64_t>(
      1, source_->train_predictions() / (int64_t(n) * batch * source_->predictions_per_row()));
  total_steps_ = config.train.steps > 0 ? config.train.steps
                                        : static_cast<int64_t>(std::ceil(config.train.epochs * steps_per_epoch_));

  eval_rows_ = eval_rows(config.train.model, batch);
  model_ = model::make_model(config.train.model, *backend_, source_->input_shape(), std::max(batch, eval_rows_));
  model_->init(config.init == Init::kPerRank ? config.seed + 1000003ull * (rank + 1) : config.seed);
  model_->set_label_smoothing(static_cast<float>(config.train.optimizer.label_smoothing));
  model_->set_loss_tally(true);  // read at the log lines (take_tally), so a device step need not wait
  optimizer_ = model::make_optimizer(*model_, config.train.optimizer);
}

void Trainer::reshard(int rank, int n) {
  source_->reshard(rank, n);
  rank_ = rank;
  n_ = n;
}

void Trainer::start_at(int64_t step, int64_t total_steps) {
  total_steps_ = total_steps;
  start_step_ = std::min(step, total_steps);
}

void Trainer::restore(const Checkpoint& c, const std::string& source) {
  check_resumable(c, source, model_->num_params(), rank_, n_, total_steps_);
  model_->upload_params(c.params);
  optimizer_->restore_state(c.optimizer_state, source);
  if (hook_) hook_->restore_state(c.extra);
  for (int64_t s = 0; s < c.step; ++s) source_->next(config_.train.batch, false);
  start_step_ = c.step;
  log("peer ", id_, ": resumed from ", source, " at step ", c.step);
}

void Trainer::save_checkpoint(int64_t steps_done) {
  Checkpoint c;
  c.step = steps_done;
  c.rank = rank_;
  c.peers = n_;
  c.epoch = hook_ ? hook_->membership_epoch() : 0;
  c.params = model_->download_params();
  c.optimizer_state = optimizer_->save_state();
  if (hook_) c.extra = hook_->save_state();
  write_checkpoint(config_.checkpoint_dir, id_, c);
}

EvalResult Trainer::evaluate() {
  double loss = 0;
  int64_t correct = 0, count = 0;
  source_->for_each_eval_batch(eval_rows_, [&](const model::Batch& b) {
    const model::BatchStats s = model_->evaluate(b);
    loss += s.loss_sum;
    correct += s.correct;
    count += s.count;
  });
  return {count ? loss / count : 0, count ? double(correct) / count : 0, source_->predictions_per_row() > 1};
}

namespace {
// " loss L train_acc A samples/s R" over `interval` (its predictions took `secs`).
std::string interval_text(const model::BatchStats& interval, double secs, bool per_token) {
  const int64_t count = std::max<int64_t>(interval.count, 1);
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << " loss " << interval.loss_sum / count << " train_acc "
      << double(interval.correct) / count << std::setprecision(0) << (per_token ? " tokens/s " : " samples/s ")
      << interval.count / std::max(secs, 1e-9);
  return out.str();
}
}  // namespace

double Trainer::log_progress(int64_t step, const model::BatchStats& interval, double secs) {
  const double loss = interval.loss_sum / interval.count, accuracy = double(interval.correct) / interval.count;
  std::ostringstream line;
  line << "step " << step + 1 << "/" << total_steps_ << " epoch " << std::fixed << std::setprecision(2)
       << double(step + 1) / steps_per_epoch_ << interval_text(interval, secs, source_->predictions_per_row() > 1);
  if (hook_) {
    hook_->progress(step, *model_, loss, accuracy, interval.count / std::max(secs, 1e-9));
    line << hook_->log_extra(step, *model_);
  }
  log(line.str());
  return loss;
}

void Trainer::log_live(int64_t step, const model::BatchStats& interval, double secs) {
  log("live step ", step + 1, "/", total_steps_, interval_text(interval, secs, source_->predictions_per_row() > 1),
      hook_ ? hook_->live_extra() : std::string());
}

void Trainer::take_loss_tally(int64_t step, std::initializer_list<model::BatchStats*> sums) {
  const kernels::LossTally tally = backend_->take_tally();
  const int64_t from = tally_from_;
  tally_from_ = step + 1;
  if (!std::isfinite(tally.loss_sum))
    throw Error("peer " + std::to_string(id_), "training loss became " + std::to_string(tally.loss_sum) +
                                                   " in steps " + std::to_string(from + 1) + ".." +
                                                   std::to_string(step + 1) + " (lower the learning rate)");
  for (model::BatchStats* sum : sums) {
    sum->loss_sum += tally.loss_sum;
    sum->correct += tally.correct;
  }
}

// --slowdown and --min-step-ms: the step that began at `step_start` sleeps until it has taken
// slowdown× its measured time (an emulated straggler) and at least min_step_ms (a paced step, as
// long on a sanitizer build or a busy machine).
void Trainer::stretch_step(std::chrono::steady_clock::time_point step_start) {
  using Clock = std::chrono::steady_clock;
  if (config_.slowdown <= 1 && config_.min_step_ms <= 0) return;
  backend_->synchronize();
  if (config_.slowdown > 1) std::this_thread::sleep_for((Clock::now() - step_start) * (config_.slowdown - 1));
  if (config_.min_step_ms > 0)
    std::this_thread::sleep_until(step_start + std::chrono::duration<double, std::milli>(config_.min_step_ms));
}

TrainResult Trainer::run() {
  using Clock = std::chrono::steady_clock;
  const int batch = config_.train.batch;
  TrainResult result;
  model::BatchStats interval, live_interval;  // since the last progress line, the last live line
  auto start = Clock::now(), interval_start = start, live_start = start;
  LiveTicker live;
  Clock::duration eval_time{};  // spent in eval_every evaluations
  log("peer ", id_, ": ", model::describe(config_.train.model), ", ", model_->num_params(), " parameters, ",
      source_->part_text(), ", ",
      total_steps_, " steps (", steps_per_epoch_, " per epoch), backend ", backend_->name());
  kernels::TransferStats eval_transfers;  // of the eval_every evaluations, not counted as training's
  const kernels::TransferStats start_transfers = backend_->transfers();
  backend_->take_tally();  // (nothing should be there; a fresh count either way)
  tally_from_ = start_step_;
  for (int64_t step = start_step_; step < total_steps_; ++step) {
    const auto step_start = Clock::now();
    const model::Batch b = source_->next(batch, true);
    if (hook_) hook_->before_step(step, *model_);
    const model::BatchStats s = model_->train_batch(b);
    if (hook_) hook_->before_update(step, *model_);
    optimizer_->step(model::learning_rate(config_.train.schedule, step, total_steps_));
    stretch_step(step_start);
    std::optional<int64_t> jump;  // a rejoin: the run's step, where this peer continues
    if (hook_) {
      hook_->after_step(step, *model_);
      int new_rank, new_n;
      if (hook_->view_changed(&new_rank, &new_n)) reshard(new_rank, new_n);
      int64_t next;
      if (hook_->rejoined(&next)) {
        jump = next;
        optimizer_->reset();  // like a joiner: no optimiser state from the model it dropped
      }
    }
    for (model::BatchStats* sum : {&interval, &live_interval}) {
      sum->loss_sum += s.loss_sum;
      sum->correct += s.correct;
      sum->count += s.count;
    }
    const bool last = step + 1 == total_steps_;
    const bool log_due = (step + 1) % config_.log_every == 0 || last, live_due = live.due();
    const bool checkpoint_due = config_.checkpoint_every > 0 && (step + 1) % config_.checkpoint_every == 0 && !last;
    // The loss is read where a line shows it and before a checkpoint (a diverged model is never saved).
    if (log_due || live_due || checkpoint_due) take_loss_tally(step, {&interval, &live_interval});
    if (live_due) {
      log_live(step, live_interval, std::chrono::duration<double>(Clock::now() - live_start).count());
      live_interval = {};
      live_start = Clock::now();
    }
    if (log_due) {
      backend_->synchronize();
      result.final_train_loss =
          log_progress(step, interval, std::chrono::duration<double>(Clock::now() - interval_start).count());
      interval = {};
      interval_start = Clock::now();
    }
    if (config_.eval_every > 0 && (step + 1) % config_.eval_every == 0 && !last) {
      // Benchmarks read "time to accuracy" from these lines: train_s excludes the evaluations.
      const auto eval_start = Clock::now();
      const kernels::TransferStats before = backend_->transfers();
      const EvalResult e = evaluate();
      eval_transfers.host_to_device += backend_->transfers().host_to_device - before.host_to_device;
      eval_transfers.device_to_host += backend_->transfers().device_to_host - before.device_to_host;
      log(std::fixed, std::setprecision(4), "eval step ", step + 1, " test_acc ", e.accuracy,
          e.per_byte ? " test_bpb " + std::to_string(e.bits_per_byte()) : std::string(), " train_s ",
          std::chrono::duration<double>(eval_start - start - eval_time).count());
      eval_time += Clock::now() - eval_start;
    }
    if (checkpoint_due) save_checkpoint(step + 1);
    if (hook_ && hook_->stop_requested()) {
      log("peer ", id_, ": stopping after step ", step + 1, " (leaving the run)");
      total_steps_ = step + 1;
      break;
    }
    if (jump) step = *jump - 1;  // the loop's ++step makes it *jump
  }
  backend_->synchronize();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const kernels::TransferStats end_transfers = backend_->transfers();
  result.transfers.host_to_device = end_transfers.host_to_device - start_transfers.host_to_device - eval_transfers.host_to_device;
  result.transfers.device_to_host = end_transfers.device_to_host - start_transfers.device_to_host - eval_transfers.device_to_host;
  result.steps = total_steps_ - start_step_;
  result.train_seconds = secs - std::chrono::duration<double>(eval_time).count();
  result.samples_per_s = double(result.steps) * batch * source_->predictions_per_row() / std::max(secs, 1e-9);
  result.test = evaluate();
  if (hook_ && hook_->finish(*model_)) result.averaged = evaluate();
  return result;
}

}  // namespace gossip::peer
