#include "kernels/backend.h"

#include <cstdlib>

#ifdef GOSSIP_HAVE_CUDA
#include <dlfcn.h>
#endif

#include "common/error.h"
#include "common/log.h"

namespace gossip::kernels {

#ifdef GOSSIP_HAVE_CUDA
int cuda_device_count(std::string* why);  // cuda_probe.cc

namespace {

using MakeCudaBackend = Backend* (*)(int);

// The CUDA backend module (libgossip_cuda.so, built beside this library; GOSSIP_CUDA_MODULE in
// the environment names another)'s entry point, loaded on first use and never unloaded: the
// backends it makes run its code. Throws gossip::Error naming the module when it cannot load.
MakeCudaBackend cuda_module_entry() {
  static const MakeCudaBackend make = [] {
    const char* env = std::getenv("GOSSIP_CUDA_MODULE");
    const std::string path = env && *env ? env : GOSSIP_CUDA_MODULE;
    void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!module) throw Error("device: cuda", std::string("cannot load the CUDA backend: ") + ::dlerror());
    void* entry = ::dlsym(module, "gossip_make_cuda_backend");
    if (!entry) throw Error("device: cuda", path + " has no gossip_make_cuda_backend (not this build's module?)");
    return reinterpret_cast<MakeCudaBackend>(entry);
  }();
  return make;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  return std::unique_ptr<Backend>(cuda_module_entry()(device_index));
}

}  // namespace
#endif

bool cuda_backend_module_loads(std::string* why) {
#ifdef GOSSIP_HAVE_CUDA
  try {
    cuda_module_entry();
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
#else
  if (why) *why = "this build has no CUDA backend (nvcc was not found at configure time)";
  return false;
#endif
}

bool cuda_device_available(std::string* why) {
#ifdef GOSSIP_HAVE_CUDA
  return cuda_device_count(why) > 0;
#else
  if (why) *why = "this build has no CUDA backend (nvcc was not found at configure time)";
  return false;
#endif
}

int local_rank() {
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end || r < 0 || r > 1 << 20) throw Error(name, std::string("'") + v + "' is not a local rank");
    return static_cast<int>(r);
  }
  return 0;
}

std::optional<Device> parse_device(const std::string& name) {
  if (name == "auto") return Device::kAuto;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return std::nullopt;
}

namespace {

#ifdef GOSSIP_HAVE_CUDA
// The device this process uses: `index`, or its local rank modulo the visible devices.
std::unique_ptr<Backend> cuda_backend_on(int index, int count) {
  if (index >= count)
    throw Error("device_index: " + std::to_string(index), "only " + std::to_string(count) + " CUDA device" +
                                                               (count == 1 ? " is" : "s are") + " visible");
  const int chosen = index >= 0 ? index : local_rank() % count;
  log("device cuda:", chosen, " (", count, " visible", index >= 0 ? ", device_index" : ", local rank modulo", ")");
  return make_cuda_backend(chosen);
}
#endif

}  // namespace

std::unique_ptr<Backend> make_backend(Device device, int device_index) {
  if (device == Device::kCpu) return make_cpu_backend();
  std::string why;
  const bool cuda = cuda_device_available(&why);
  if (device == Device::kCuda && !cuda) throw Error("device: cuda", why);
#ifdef GOSSIP_HAVE_CUDA
  if (cuda) return cuda_backend_on(device_index, cuda_device_count(nullptr));
#else
  (void)device_index;
#endif
  log("device auto: ", why, "; using the CPU backend");
  return make_cpu_backend();
}

std::unique_ptr<Backend> make_backend(const std::string& device) {
  const std::optional<Device> d = parse_device(device);
  if (!d) throw Error("device", "unknown device '" + device + "' (expected auto, cpu or cuda)");
  return make_backend(*d);
}

}  // namespace gossip::kernels
