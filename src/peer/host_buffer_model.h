// A model that is only a parameter buffer in the caller's memory: what a library peer
// (gossip::Peer, the Python module) mixes while its caller trains the model itself. The
// communication layer sees it as any other host model; training and evaluation are refused.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace gossip::peer {

class HostBufferModel final : public model::Model {
 public:
  explicit HostBufferModel(std::span<float> buffer) : backend_(kernels::make_cpu_backend()), buffer_(buffer) {}

  // The caller's buffer for the next exchange (the same size: a model does not change shape).
  void rebind(std::span<float> buffer) {
    check_size(buffer.size());
    buffer_ = buffer;
  }
  // A buffer of the caller's of `floats` values must be this model's size.
  void check_size(size_t floats) const {
    if (floats != buffer_.size())
      throw Error("gossip::Peer", "a buffer of " + std::to_string(floats) + " floats, but this run's model has " +
                                      std::to_string(buffer_.size()));
  }

  size_t num_params() const override { return buffer_.size(); }
  float* params() override { return buffer_.data(); }
  float* grads() override { refuse("has no gradient buffer"); }
  void init(uint64_t) override { refuse("is initialised by its caller"); }
  model::BatchStats train_batch(const model::Batch&) override { refuse("is trained by its caller"); }
  model::BatchStats evaluate(const model::Batch&) override { refuse("is evaluated by its caller"); }
  // The caller's buffer stays where it is: the contents change places (O(n), not O(1)).
  void swap_params(kernels::DeviceArray<float>& other) override {
    if (other.size() != buffer_.size()) refuse("swap with a buffer of another size");
    std::swap_ranges(buffer_.begin(), buffer_.end(), other.get());
  }
  // Mixing: one copy into the caller's buffer (what the exchange round costs a library peer more).
  void adopt_params(kernels::DeviceArray<float>& other) override {
    if (other.size() != buffer_.size()) refuse("adopt a buffer of another size");
    std::memcpy(buffer_.data(), other.get(), buffer_.size_bytes());
  }
  std::vector<float> download_params() const override { return {buffer_.begin(), buffer_.end()}; }
  void upload_params(const std::vector<float>& host) override {
    model::upload_buffer(*backend_, buffer_.data(), buffer_.size(), host);
  }
  kernels::Backend& backend() override { return *backend_; }
  int max_rows() const override { return 0; }

 private:
  [[noreturn]] static void refuse(const std::string& what) { throw Error("gossip::Peer", "the caller's model " + what); }

  std::unique_ptr<kernels::Backend> backend_;
  std::span<float> buffer_;
};

}  // namespace gossip::peer
