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

}  // namespace gossip::model
