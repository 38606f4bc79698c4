// Where a peer's batches come from: labelled rows (Fashion-MNIST images, synthetic blobs) sharded
// by rank, or byte windows of a text corpus split by rank into contiguous parts, gathered where the
// model lies. The trainer asks for the next training batch and walks the evaluation set through
// it, whatever the data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/dataset.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/text_corpus.h"
#include "peer/config.h"

namespace gossip::peer {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Takes rank's part of the training data among n peers; throws gossip::Error when it is empty.
  virtual void reshard(int rank, int n) = 0;
  // The next training batch of `rows` rows, gathered in the backend's memory (Batch::on_device;
  // valid until the next call); gather = false only advances the position, as the same call
  // would (resume).
  virtual model::Batch next(int rows, bool gather) = 0;
  // The whole test (validation) set in batches of at most `rows` rows, in order, gathered as next's.
  virtual void for_each_eval_batch(int rows, const std::function<void(const model::Batch&)>& f) = 0;
  // Predictions in one epoch of the whole training set (rows, or bytes for text) and per row.
  virtual int64_t train_predictions() const = 0;
  virtual int predictions_per_row() const = 0;
  virtual std::string part_text() const = 0;  // "6000 training rows" for the log
  virtual model::InputShape input_shape() const = 0;
};

// The data named by the config, loaded, with rank's part taken, held in `backend`'s memory
// (model::DeviceRows, DeviceText: on a device a copy goes up once, on the host the data's own
// memory is used) where batches are gathered. `backend` must outlive the source.
std::unique_ptr<BatchSource> make_batch_source(const RunConfig& config, int rank, int n, kernels::Backend& backend);

// The input shape the config's data will have (without loading it).
model::InputShape planned_input_shape(const RunConfig& config);

// Loads (or synthesises) the labelled data set named by the config (not text).
model::TrainTest load_data(const DataConfig& config, uint64_t seed);

}  // namespace gossip::peer
