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
#include "model/sharding.h"

namespace gossip::peer {

model::TrainTest load_data(const DataConfig& c, uint64_t seed) {
  model::TrainTest tt;
  if (c.dataset == Dataset::kSynthetic) {
    tt = model::make_synthetic(c.synthetic_train, c.synthetic_test, c.synthetic_dims, c.synthetic_classes, seed,
                               c.synthetic_noise);
  } else {
    tt = model::load_fashion_mnist(c.dir);
  }
  if (c.limit_train > 0 && c.limit_train < tt.train.rows) {
    tt.train.rows = static_cast<int>(c.limit_train);
    tt.train.x.resize(size_t(tt.train.rows) * tt.train.cols);
    tt.train.y.resize(tt.train.rows);
  }
  return tt;
}

namespace {
constexpr int kEvalBatch = 1024;  // rows per evaluation batch

// The MLP's layer widths for data of `inputs` columns and `classes` classes.
std::vector<int> layer_dims(int inputs, const TrainConfig& train, int classes) {
  std::vector<int> dims{inputs};
  dims.insert(dims.end(), train.hidden.begin(), train.hidden.end());
  dims.push_back(classes);
  return dims;
}
}  // namespace

size_t planned_num_params(const RunConfig& c) {
  const bool synthetic = c.data.dataset == Dataset::kSynthetic;  // else Fashion-MNIST: 28×28 pixels, 10 classes
  return model::count_params(layer_dims(synthetic ? c.data.synthetic_dims : 28 * 28, c.train,
                                        synthetic ? c.data.synthetic_classes : 10));
}

Trainer::Trainer(const RunConfig& config, int rank, int n, StepHook* hook)
    : config_(config), rank_(rank), n_(n), hook_(hook) {
  data_ = load_data(config.data, config.seed);
  reshard(rank, n);
  const int batch = config.train.batch;
  // Every peer runs the same number of steps (synchronous algorithms need it), whatever its shard
  // size: one epoch is the data set divided by n·batch.
  steps_per_epoch_ = std::max<int64_t>(1, data_.train.rows / (int64_t(n) * batch));
  total_steps_ = static_cast<int64_t>(std::ceil(config.train.epochs * steps_per_epoch_));

  backend_ = kernels::make_backend(config.device);
  const std::vector<int> dims = layer_dims(data_.train.cols, config.train, data_.train.classes);
  const int rows = std::max(batch, kEvalBatch);  // training and evaluation share the buffers
  model_ = std::make_unique<model::Mlp>(*backend_, dims, rows);
  model_->init(config.init == Init::kPerRank ? config.seed + 1000003ull * (rank + 1) : config.seed);
  optimizer_ = model::make_optimizer(*model_, config.train.optimizer);
  batch_x_.resize(size_t(rows) * data_.train.cols);
  batch_y_.resize(rows);
}

void Trainer::reshard(int rank, int n) {
  const uint64_t shard_seed = config_.seed * 0x9E3779B97F4A7C15ull + 17;
  shard_ = config_.data.sharding == Sharding::kDirichlet
               ? model::shard_dirichlet(data_.train.y, data_.train.classes, n, rank, config_.data.dirichlet_alpha, shard_seed)
               : model::shard_iid(data_.train.rows, n, rank, shard_seed);
  if (shard_.empty())
    throw Error(config_.file, "peer " + std::to_string(rank) + " got an empty data shard (" +
                                  std::to_string(data_.train.rows) + " rows over " + std::to_string(n) + " peers)");
  rank_ = rank;
  n_ = n;
  cursor_ = shard_.size();  // forces a shuffle before the next batch
}

void Trainer::start_at(int64_t step, int64_t total_steps) {
  total_steps_ = total_steps;
  start_step_ = std::min(step, total_steps);
}

void Trainer::next_batch(bool gather) {
  const int batch = config_.train.batch;
  for (int filled = 0; filled < batch;) {
    if (cursor_ >= shard_.size()) {
      std::mt19937_64 rng(config_.seed ^ (uint64_t(rank_) << 32) ^ (epoch_of_shard_++ * 0x9E3779B97F4A7C15ull));
      std::shuffle(shard_.begin(), shard_.end(), rng);
      cursor_ = 0;
    }
    const int take = static_cast<int>(std::min<size_t>(batch - filled, shard_.size() - cursor_));
    if (gather)
      data_.train.gather(shard_, cursor_, take, batch_x_.data() + size_t(filled) * data_.train.cols,
                         batch_y_.data() + filled);
    cursor_ += take;
    filled += take;
  }
}

void Trainer::restore(const Checkpoint& c, const std::string& source) {
  const size_t n = model_->num_params();
  if (c.params.size() != n)
    throw Error(source, "checkpoint holds " + std::to_string(c.params.size()) + " parameters, this model has " +
                            std::to_string(n) + ": another model shape");
  if (c.rank != rank_ || c.peers != n_ || c.epoch != 0)
    throw Error(source, "checkpoint is of rank " + std::to_string(c.rank) + " of " + std::to_string(c.peers) +
                            " in membership epoch " + std::to_string(c.epoch) + ", this is rank " + std::to_string(rank_) +
                            " of " + std::to_string(n_) + " in the YAML's membership (epoch 0)");
  if (c.step < 0 || c.step > total_steps_)
    throw Error(source, "checkpoint is at step " + std::to_string(c.step) + ", outside this run's " +
                            std::to_string(total_steps_) + " steps");
  model_->upload_params(c.params);
  optimizer_->restore_state(c.optimizer_state, source);
  if (hook_) hook_->restore_state(c.extra);
  for (int64_t s = 0; s < c.step; ++s) next_batch(false);
  start_step_ = c.step;
  log("peer ", rank_, ": resumed from ", source, " at step ", c.step);
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
  write_checkpoint(config_.checkpoint_dir, c);
}

EvalResult Trainer::evaluate(const model::Dataset& data) {
  std::vector<int64_t> all(data.rows);
  for (int i = 0; i < data.rows; ++i) all[i] = i;
  double loss = 0;
  int64_t correct = 0;
  for (int begin = 0; begin < data.rows; begin += kEvalBatch) {
    const int count = std::min(kEvalBatch, data.rows - begin);
    data.gather(all, begin, count, batch_x_.data(), batch_y_.data());
    model::BatchStats s = model_->evaluate(batch_x_.data(), batch_y_.data(), count);
    loss += s.loss_sum;
    correct += s.correct;
  }
  return {data.rows ? loss / data.rows : 0, data.rows ? double(correct) / data.rows : 0};
}

TrainResult Trainer::run() {
  using Clock = std::chrono::steady_clock;
  const int batch = config_.train.batch;
  TrainResult result;
  double interval_loss = 0;
  int64_t interval_correct = 0, interval_count = 0;
  auto start = Clock::now(), interval_start = start;
  Clock::duration eval_time{};  // spent in eval_every evaluations
  log("peer ", rank_, ": ", model_->num_params(), " parameters, ", shard_.size(), " training rows, ",
      total_steps_, " steps (", steps_per_epoch_, " per epoch), backend ", backend_->name());
  for (int64_t step = start_step_; step < total_steps_; ++step) {
    const auto step_start = Clock::now();
    next_batch();
    if (hook_) hook_->before_step(step, *model_);
    model::BatchStats s = model_->train_batch(batch_x_.data(), batch_y_.data(), batch);
    if (!std::isfinite(s.loss_sum))
      throw Error("peer " + std::to_string(rank_), "training loss became " + std::to_string(s.loss_sum) +
                                                       " at step " + std::to_string(step) + " (lower the learning rate)");
    optimizer_->step(model::learning_rate(config_.train.schedule, step, total_steps_));
    if (config_.slowdown > 1) {  // an emulated straggler: its computation takes slowdown× as long
      backend_->synchronize();
      std::this_thread::sleep_for((Clock::now() - step_start) * (config_.slowdown - 1));
    }
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
    interval_loss += s.loss_sum;
    interval_correct += s.correct;
    interval_count += s.count;
    const bool last = step + 1 == total_steps_;
    if ((step + 1) % config_.log_every == 0 || last) {
      backend_->synchronize();
      const double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
      std::ostringstream line;
      line << std::fixed << std::setprecision(4) << "step " << step + 1 << "/" << total_steps_ << " epoch "
           << std::setprecision(2) << double(step + 1) / steps_per_epoch_ << std::setprecision(4) << " loss "
           << interval_loss / interval_count << " train_acc " << double(interval_correct) / interval_count
           << std::setprecision(0) << " samples/s " << interval_count / std::max(secs, 1e-9);
      if (hook_) {
        hook_->progress(step, *model_, interval_loss / interval_count, double(interval_correct) / interval_count,
                        interval_count / std::max(secs, 1e-9));
        line << hook_->log_extra(step, *model_);
      }
      log(line.str());
      result.final_train_loss = interval_loss / interval_count;
      interval_loss = 0;
      interval_correct = interval_count = 0;
      interval_start = Clock::now();
    }
    if (config_.eval_every > 0 && (step + 1) % config_.eval_every == 0 && !last) {
      // Benchmarks read "time to accuracy" from these lines: train_s excludes the evaluations.
      const auto eval_start = Clock::now();
      const EvalResult e = evaluate(data_.test);
      log(std::fixed, std::setprecision(4), "eval step ", step + 1, " test_acc ", e.accuracy, " train_s ",
          std::chrono::duration<double>(eval_start - start - eval_time).count());
      eval_time += Clock::now() - eval_start;
    }
    if (config_.checkpoint_every > 0 && (step + 1) % config_.checkpoint_every == 0 && !last) save_checkpoint(step + 1);
    if (hook_ && hook_->stop_requested()) {
      log("peer ", rank_, ": stopping after step ", step + 1, " (leaving the run)");
      total_steps_ = step + 1;
      break;
    }
    if (jump) step = *jump - 1;  // the loop's ++step makes it *jump
  }
  backend_->synchronize();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = total_steps_ - start_step_;
  result.samples_per_s = result.steps * batch / std::max(secs, 1e-9);
  result.test = evaluate(data_.test);
  if (hook_ && hook_->finish(*model_)) result.averaged = evaluate(data_.test);
  return result;
}

}  // namespace gossip::peer
