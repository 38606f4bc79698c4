// Whether a CUDA device answers, asked of the CUDA runtime alone (a small library), so that a
// peer on a machine without a GPU never loads the CUDA backend module and cuBLAS.
#include <cuda_runtime.h>

#include <string>

namespace gossip::kernels {

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {  // e.g. no device, or a driver older than this runtime: say which
    if (why)
      *why = std::string("no CUDA device answers (") + cudaGetErrorName(status) + ": " +
             cudaGetErrorString(status) + ")";
    cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device answers (the runtime sees none)";
  return count;
}

}  // namespace gossip::kernels
