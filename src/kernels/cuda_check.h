// CUDA/cuBLAS status checks that throw gossip::Error instead of calling exit().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace gossip::kernels {

inline void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    throw Error(std::string(file) + ":" + std::to_string(line),
                std::string(what) + ": " + cudaGetErrorString(status));
}

inline void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(file) + ":" + std::to_string(line),
                std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
}

}  // namespace gossip::kernels

#define GOSSIP_CUDA_CHECK(x) ::gossip::kernels::cuda_check((x), #x, __FILE__, __LINE__)
#define GOSSIP_CUBLAS_CHECK(x) ::gossip::kernels::cublas_check((x), #x, __FILE__, __LINE__)
