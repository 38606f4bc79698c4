// The fixture of the CUDA-vs-CPU kernel tests: both backends, device buffers, and a skip when no
// CUDA device answers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace gossip::kernels {

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << why;
    gpu_ = make_backend("cuda");
    cpu_ = make_backend("cpu");
  }
  std::vector<float> on_gpu(const std::vector<float>& host) {
    bufs_.emplace_back(*gpu_, host.size());
    gpu_->upload(bufs_.back().get(), host.data(), host.size() * 4);
    return host;
  }
  float* last() { return bufs_.back().get(); }
  std::vector<float> fetch(const float* p, size_t n) {
    std::vector<float> h(n);
    gpu_->download(h.data(), p, n * 4);
    return h;
  }
  static std::vector<float> random(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d;
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }
  std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<DeviceArray<float>> bufs_;
};

}  // namespace gossip::kernels
