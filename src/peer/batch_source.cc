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
  RowSource(const RunConfig& c, int rank, int n) : config_(c), data_(load_data(c.data, c.seed)) {
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
    reserve(rows);
    for (int filled = 0; filled < rows;) {
      if (cursor_ >= shard_.size()) {
        std::mt19937_64 rng(config_.seed ^ (uint64_t(rank_) << 32) ^ (epoch_of_shard_++ * 0x9E3779B97F4A7C15ull));
        std::shuffle(shard_.begin(), shard_.end(), rng);
        cursor_ = 0;
      }
      const int take = static_cast<int>(std::min<size_t>(rows - filled, shard_.size() - cursor_));
      if (gather && device_rows_)
        for (int i = 0; i < take; ++i) row_ids_[filled + i] = static_cast<int32_t>(shard_[cursor_ + i]);
      else if (gather)
        data_.train.gather(shard_, cursor_, take, x_.data() + size_t(filled) * data_.train.cols, y_.data() + filled);
      cursor_ += take;
      filled += take;
    }
    if (gather && device_rows_) return device_rows_->gather(row_ids_.data(), rows);
    return {x_.data(), nullptr, y_.data(), rows};
  }

  void place_on(kernels::Backend& backend) override {
    device_rows_ = std::make_unique<model::DeviceRows>(backend, data_.train);
  }

  void for_each_eval_batch(int rows, const std::function<void(const model::Batch&)>& f) override {
    const model::Dataset& test = data_.test;
    reserve(rows);
    std::vector<int64_t> all(test.rows);
    for (int i = 0; i < test.rows; ++i) all[i] = i;
    for (int begin = 0; begin < test.rows; begin += rows) {
      const int count = std::min(rows, test.rows - begin);
      test.gather(all, begin, count, x_.data(), y_.data());
      f({x_.data(), nullptr, y_.data(), count});
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
  void reserve(int rows) {
    if (y_.size() < size_t(rows)) {
      x_.resize(size_t(rows) * data_.train.cols);
      y_.resize(rows);
      row_ids_.resize(rows);
    }
  }

  RunConfig config_;
  model::TrainTest data_;
  std::vector<int64_t> shard_;
  size_t cursor_ = 0;
  uint64_t epoch_of_shard_ = 0;
  int rank_ = 0;
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::vector<int32_t> row_ids_;                  // with device_rows_: the batch's rows
  std::unique_ptr<model::DeviceRows> device_rows_;  // the training rows in the model's memory (place_on)
};

// Byte windows of context + 1 drawn from the rank's contiguous part of the training text;
// evaluation tiles the validation part with consecutive windows (the last context − 1 bytes at
// most, which do not fill a window, are left out).
class TextSource final : public BatchSource {
 public:
  TextSource(const RunConfig& c, int rank, int n) : config_(c), context_(c.train.model.context) {
    const std::vector<std::string> files =
        c.data.text_files.empty() ? model::text_files_in(c.data.dir) : c.data.text_files;
    corpus_ = model::load_text(files, 0.05, size_t(context_) + 1);
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
    reserve(rows);  // drawing the windows is the position: resume draws them too
    if (!device_text_) {
      model::sample_windows(corpus_.train, part_, context_, rows, rng_, tokens_.data(), targets_.data());
      return {nullptr, tokens_.data(), targets_.data(), rows};
    }
    model::draw_windows(corpus_.train.size(), part_, context_, rows, rng_, starts_.data());
    if (!gather) return {};
    return device_text_->gather(starts_.data(), rows, context_);
  }

  void place_on(kernels::Backend& backend) override {
    device_text_ = std::make_unique<model::DeviceText>(backend, corpus_.train);
  }

  void for_each_eval_batch(int rows, const std::function<void(const model::Batch&)>& f) override {
    reserve(rows);
    const std::vector<uint8_t>& v = corpus_.validation;
    const size_t windows = (v.size() - 1) / context_;
    for (size_t w = 0; w < windows;) {
      int count = 0;
      for (; count < rows && w < windows; ++count, ++w)
        for (int t = 0; t < context_; ++t) {
          tokens_[size_t(count) * context_ + t] = v[w * context_ + t];
          targets_[size_t(count) * context_ + t] = v[w * context_ + t + 1];
        }
      f({nullptr, tokens_.data(), targets_.data(), count});
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
  void reserve(int rows) {
    if (tokens_.size() < size_t(rows) * context_) {
      tokens_.resize(size_t(rows) * context_);
      targets_.resize(size_t(rows) * context_);
      starts_.resize(rows);
    }
  }

  RunConfig config_;
  int context_;
  model::TextCorpus corpus_;
  model::BytePart part_;
  std::mt19937_64 rng_;
  uint64_t reshards_ = 0;
  std::vector<int32_t> tokens_, targets_;
  std::vector<int64_t> starts_;                     // with device_text_: the batch's windows
  std::unique_ptr<model::DeviceText> device_text_;  // the training text in the model's memory (place_on)
};

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const RunConfig& config, int rank, int n) {
  if (config.data.dataset == Dataset::kText) return std::make_unique<TextSource>(config, rank, n);
  return std::make_unique<RowSource>(config, rank, n);
}

}  // namespace gossip::peer
