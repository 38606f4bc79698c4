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

std::optional<Device> parse_device(const std::string& name) {
  if (name == "auto") return Device::kAuto;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return std::nullopt;
}

std::unique_ptr<Backend> make_backend(Device device) {
  if (device == Device::kCpu) return make_cpu_backend();
  if (device == Device::kCuda) {
#ifdef GOSSIP_HAVE_CUDA
    if (!cuda_runtime_has_device()) throw Error("device: cuda", "no CUDA device answers");
    return make_cuda_backend();
#else
    throw Error("device: cuda", "this build has no CUDA backend (nvcc was not found at configure time)");
#endif
  }
  if (cuda_device_available()) {
#ifdef GOSSIP_HAVE_CUDA
    return make_cuda_backend();
#endif
  }
  log("device auto: no CUDA device answers, using the CPU backend");
  return make_cpu_backend();
}

std::unique_ptr<Backend> make_backend(const std::string& device) {
  const std::optional<Device> d = parse_device(device);
  if (!d) throw Error("device", "unknown device '" + device + "' (expected auto, cpu or cuda)");
  return make_backend(*d);
}

}  // namespace gossip::kernels
