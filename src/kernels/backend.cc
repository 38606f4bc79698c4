#include "kernels/backend.h"

#include "common/error.h"
#include "common/log.h"

namespace gossip::kernels {

#ifdef GOSSIP_HAVE_CUDA
// Defined in cuda_backend.cu.
std::unique_ptr<Backend> make_cuda_backend();
bool cuda_runtime_has_device();
#endif

bool cuda_device_available() {
#ifdef GOSSIP_HAVE_CUDA
  return cuda_runtime_has_device();
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda") {
#ifdef GOSSIP_HAVE_CUDA
    if (!cuda_runtime_has_device()) throw Error("device: cuda", "no CUDA device answers");
    return make_cuda_backend();
#else
    throw Error("device: cuda", "this build has no CUDA backend (nvcc was not found at configure time)");
#endif
  }
  if (device == "auto") {
    if (cuda_device_available()) {
#ifdef GOSSIP_HAVE_CUDA
      return make_cuda_backend();
#endif
    }
    log("device auto: no CUDA device answers, using the CPU backend");
    return make_cpu_backend();
  }
  throw Error("device", "unknown device '" + device + "' (expected auto, cpu or cuda)");
}

}  // namespace gossip::kernels
