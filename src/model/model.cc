#include "model/model.h"

#include "common/error.h"

namespace gossip::model {

std::vector<float> download_buffer(kernels::Backend& backend, const float* params, size_t n) {
  std::vector<float> host(n);
  backend.download(host.data(), params, n * sizeof(float));
  return host;
}

void upload_buffer(kernels::Backend& backend, float* params, size_t n, const std::vector<float>& host) {
  if (host.size() != n)
    throw Error("model", "parameter vector has " + std::to_string(host.size()) + " floats, model needs " +
                             std::to_string(n));
  backend.upload(params, host.data(), n * sizeof(float));
}

void Model::place(kernels::Backend& backend, const Batch& b, void* dst, const void* src, size_t bytes) {
  if (b.on_device)
    backend.copy_bytes(dst, src, bytes);
  else
    backend.upload(dst, src, bytes);
}

BatchStats Model::score(kernels::Backend& backend, const float* logits, const int32_t* labels, int rows, int cols,
                        float* dlogits) const {
  const float smoothing = dlogits ? label_smoothing_ : 0.0f;
  BatchStats stats{0, 0, rows};
  if (dlogits && loss_tally_) {
    backend.tally_softmax_xent(logits, labels, rows, cols, dlogits, 1.0f / rows, smoothing);
    stats.tallied = true;
    return stats;
  }
  const kernels::LossResult loss = backend.softmax_xent(logits, labels, rows, cols, dlogits, 1.0f / rows, smoothing);
  stats.loss_sum = loss.loss_sum;
  stats.correct = loss.correct;
  return stats;
}

}  // namespace gossip::model
