#include "peer/batch_source.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/device_data.h"
#include "model/sharding.h"

namespace gossip::peer {

model::TrainTest load_data(const DataConfig& c, uint64_t seed) {
  model::TrainTest tt;
  if (c.dataset == Dataset::kSynthetic) {
    tt = model::make_synthetic(c.synthetic_train, c.synthetic_test, c.synthetic_dims, c.synthetic_classes, seed,
                               c.synthetic_noise);
  } else {
    tt = model::load_fashion_mnist(c.dir, c.cache_dir);
  }
  if (c.limit_train > 0 && c.limit_train < tt.train.rows) tt.train.truncate(static_cast<int>(c.limit_train));
  return tt;
}

model::InputShape planned_input_shape(const RunConfig& c) {
  if (c.data.dataset == Dataset::kText) return {1, 1, 1, model::kByteVocab};
  if (c.data.dataset == Dataset::kFashionMnist) return {1, 28, 28, 10};
  const int dims = c.data.synthetic_dims, side = int(std::lround(std::sqrt(double(dims))));
  // A CNN sees square synthetic rows as 1×side×side images; other models see feature vectors.
  if (c.train.model.kind == model::ModelKind::kCnn && side * side == dims)
    return {1, side, side, c.data.synthetic_classes};
  return {1, 1, dims, c.data.synthetic_classes};
}

namespace {

// Labelled rows, shuffled within the rank's shard once per pass over it.
class RowSource final : public BatchSource {
 public:
  RowSource(const RunConfig& c, int rank, int n, kernels::Backend& backend)
      : config_(c), data_(load_data(c.data, c.seed)), train_(backend, data_.train), test_(backend, data_.test) {
    reshard(rank, n);
  }

  void reshard(int rank, int n) override {
    const uint64_t shard_seed = config_.seed * 0x9E3779B97F4A7C15ull + 17;
    shard_ = config_.data.sharding == Sharding::kDirichlet
                 ? model::shard_dirichlet(data_.train.y, data_.train.classes, n, rank, config_.data.dirichlet_alpha,
                                          shard_seed)
                 : model::shard_iid(data_.train.rows, n, rank, shard_seed);
    if (shard_.empty())
      throw Error(config_.file, "peer " + std::to_string(rank) + " got an empty data shard (" +
                                    std::to_string(data_.train.rows) + " rows over " + std::to_string(n) + " peers)");
    rank_ = rank;
    cursor_ = shard_.size();  // forces a shuffle before the next batch
  }

  model::Batch next(int rows, bool gather) override {
    if (row_ids_.size() < size_t(rows)) row_ids_.resize(rows);
    for (int filled = 0; filled < rows;) {
      if (cursor_ >= shard_.size()) {
        std::mt19937_64 rng(config_.seed ^ (uint64_t(rank_) << 32) ^ (epoch_of_shard_++ * 0x9E3779B97F4A7C15ull));
        std::shuffle(shard_.begin(), shard_.end(), rng);
        cursor_ = 0;
      }
      const int take = static_cast<int>(std::min<size_t>(rows - filled, shard_.size() - cursor_));
      for (int i = 0; i < take; ++i) row_ids_[filled + i] = static_cast<int32_t>(shard_[cursor_ + i]);
      cursor_ += take;
      filled += take;
    }
    return gather ? train_.gather(row_ids_.data(), rows) : model::Batch{};
  }

  void for_each_eval_batch(int rows, const std::function<void(const model::Batch&)>& f) override {
    if (row_ids_.size() < size_t(rows)) row_ids_.resize(rows);
    for (int begin = 0; begin < data_.test.rows; begin += rows) {
      const int count = std::min(rows, data_.test.rows - begin);
      for (int i = 0; i < count; ++i) row_ids_[i] = begin + i;
      f(test_.gather(row_ids_.data(), count));
    }
  }

  int64_t train_predictions() const override { return data_.train.rows; }
  int predictions_per_row() const override { return 1; }
  std::string part_text() const override { return std::to_string(shard_.size()) + " training rows"; }
  model::InputShape input_shape() const override {
    model::InputShape s = planned_input_shape(config_);
    s.classes = data_.train.classes;
    return s;
  }

 private:
  RunConfig config_;
  model::TrainTest data_;
  model::DeviceRows train_, test_;  // data_'s sets in the model's memory
  std::vector<int64_t> shard_;
  size_t cursor_ = 0;
  uint64_t epoch_of_shard_ = 0;
  int rank_ = 0;
  std::vector<int32_t> row_ids_;  // the batch's rows
};

// Byte windows of context + 1 drawn from the rank's contiguous part of the training text;
// evaluation tiles the validation part with consecutive windows, one every context bytes (the
// last context − 1 bytes at most, which do not fill a window, are left out).
class TextSource final : public BatchSource {
 public:
  TextSource(const RunConfig& c, int rank, int n, kernels::Backend& backend)
      : config_(c),
        context_(c.train.model.context),
        corpus_(model::load_text(c.data.text_files.empty() ? model::text_files_in(c.data.dir) : c.data.text_files,
                                 0.05, size_t(context_) + 1)),
        train_(backend, corpus_.train),
        validation_(backend, corpus_.validation) {
    reshard(rank, n);
  }

  void reshard(int rank, int n) override {
    part_ = model::text_part(corpus_.train.size(), n, rank);
    if (part_.end - part_.begin < size_t(context_) + 1)
      throw Error(config_.file, "peer " + std::to_string(rank) + "'s part of the text (" +
                                    std::to_string(part_.end - part_.begin) + " bytes of " +
                                    std::to_string(corpus_.train.size()) + " over " + std::to_string(n) +
                                    " peers) is shorter than one window of context + 1");
    rng_.seed(config_.seed ^ (uint64_t(rank) << 32) ^ (++reshards_ * 0x9E3779B97F4A7C15ull));
  }

  model::Batch next(int rows, bool gather) override {
    if (starts_.size() < size_t(rows)) starts_.resize(rows);
    // Drawing the windows is the position: resume draws them too.
    model::draw_windows(corpus_.train.size(), part_, context_, rows, rng_, starts_.data());
    return gather ? train_.gather(starts_.data(), rows, context_) : model::Batch{};
  }

  void for_each_eval_batch(int rows, const std::function<void(const model::Batch&)>& f) override {
    if (starts_.size() < size_t(rows)) starts_.resize(rows);
    const size_t windows = (corpus_.validation.size() - 1) / context_;
    for (size_t w = 0; w < windows;) {
      int count = 0;
      for (; count < rows && w < windows; ++count, ++w) starts_[count] = int64_t(w * context_);
      f(validation_.gather(starts_.data(), count, context_));
    }
  }

  int64_t train_predictions() const override { return int64_t(corpus_.train.size()); }
  int predictions_per_row() const override { return context_; }
  std::string part_text() const override {
    return std::to_string(part_.end - part_.begin) + " training bytes (" + std::to_string(corpus_.files.size()) +
           " files)";
  }
  model::InputShape input_shape() const override { return planned_input_shape(config_); }

 private:
  RunConfig config_;
  int context_;
  model::TextCorpus corpus_;
  model::DeviceText train_, validation_;  // corpus_'s parts in the model's memory
  model::BytePart part_;
  std::mt19937_64 rng_;
  uint64_t reshards_ = 0;
  std::vector<int64_t> starts_;  // the batch's windows
};

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const RunConfig& config, int rank, int n, kernels::Backend& backend) {
  if (config.data.dataset == Dataset::kText) return std::make_unique<TextSource>(config, rank, n, backend);
  return std::make_unique<RowSource>(config, rank, n, backend);
}

}  // namespace gossip::peer
