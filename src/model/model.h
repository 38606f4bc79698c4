// What the trainer, the optimisers and the communication layer see of a model: one contiguous
// parameter buffer (and a gradient buffer of the same layout) plus a training and an evaluation
// pass over a host batch. The MLP (mlp.h) and the layer graph (network.h) implement it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace gossip::model {

struct BatchStats {
  double loss_sum = 0;  // summed over the predictions (not averaged)
  int64_t correct = 0;  // arg-max hits
  int64_t count = 0;    // predictions: rows for a classifier, rows × context for a language model
  bool tallied = false;  // loss_sum and correct went to the backend's tally (Model::set_loss_tally)
};

// One host batch. An image/feature model reads `x`; a language model reads `tokens`.
struct Batch {
  const float* x = nullptr;         // [rows][input features]
  const int32_t* tokens = nullptr;  // [rows][context] bytes
  const int32_t* labels = nullptr;  // [rows] classes, or [rows][context] next bytes
  int rows = 0;
  bool on_device = false;  // x, tokens and labels are in the model's backend memory (DeviceRows), not the host's
};

class Model {
 public:
  virtual ~Model() = default;
  virtual size_t num_params() const = 0;
  virtual float* params() = 0;  // backend memory, num_params() floats
  virtual float* grads() = 0;   // same layout
  // Initial weights from `seed`, identical on every backend.
  virtual void init(uint64_t seed) = 0;
  // Forward + backward; grads() receives the gradient of the mean loss over the predictions.
  virtual BatchStats train_batch(const Batch& batch) = 0;
  virtual BatchStats evaluate(const Batch& batch) = 0;  // forward only
  // Exchanges the parameter buffer with `other` (same backend, num_params() floats) in O(1).
  virtual void swap_params(kernels::DeviceArray<float>& other) = 0;
  // Takes `other`'s values as the parameters and leaves `other` holding anything (scratch for the
  // next mix). The default swaps in O(1); a model over a caller's buffer copies.
  virtual void adopt_params(kernels::DeviceArray<float>& other) { swap_params(other); }
  virtual std::vector<float> download_params() const = 0;
  virtual void upload_params(const std::vector<float>& host) = 0;
  virtual kernels::Backend& backend() = 0;
  virtual int max_rows() const = 0;  // the largest batch a pass takes
  // Label smoothing of the training loss (optimizer.label_smoothing): train_batch fits
  // (1 − s)·onehot + s/classes; evaluate always scores the plain label.
  void set_label_smoothing(float s) { label_smoothing_ = s; }
  // On: train_batch adds its loss sum and hits to the backend's tally (Backend::take_tally reads
  // them) and returns the count only, `tallied` set; on a device no step waits for its loss.
  void set_loss_tally(bool on) { loss_tally_ = on; }

 protected:
  // The softmax loss of a pass over `rows` predictions of `cols` classes: a training pass
  // (dlogits not null) writes the gradient of the mean loss, with label smoothing, and goes to the
  // tally when set_loss_tally is on.
  BatchStats score(kernels::Backend& backend, const float* logits, const int32_t* labels, int rows, int cols,
                   float* dlogits) const;
  // A batch's array into the model's buffer: copied within the backend when the batch is there
  // already (Batch::on_device), else uploaded.
  static void place(kernels::Backend& backend, const Batch& b, void* dst, const void* src, size_t bytes);
  float label_smoothing_ = 0;
  bool loss_tally_ = false;
};

// Host copies of a model's parameter buffer (`n` floats at `params`), for Model implementations;
// the upload throws gossip::Error("model", ...) when `host` holds another count.
std::vector<float> download_buffer(kernels::Backend& backend, const float* params, size_t n);
void upload_buffer(kernels::Backend& backend, float* params, size_t n, const std::vector<float>& host);

}  // namespace gossip::model
