// A backend for tests of what crosses between the host and a device: the CPU backend's kernels
// behind is_host() == false, counting upload() and download() and some kernel calls.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace gossip::testing {

class CountingDeviceBackend final : public kernels::Backend {
 public:
  std::string name() const override { return "counting-device"; }
  bool is_host() const override { return false; }
  void* alloc_bytes(size_t bytes) override { return cpu_->alloc_bytes(bytes); }
  void free_bytes(void* p) noexcept override { cpu_->free_bytes(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    stats_.host_to_device += bytes;
    cpu_->upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    stats_.device_to_host += bytes;
    cpu_->download(dst, src, bytes);
  }
  void fill(float* p, float v, size_t n) override { cpu_->fill(p, v, n); }
  void copy_bytes(void* dst, const void* src, size_t bytes) override { cpu_->copy_bytes(dst, src, bytes); }
  void gather_rows(const kernels::RowGather& g) override { cpu_->gather_rows(g); }
  void gather_windows(const kernels::WindowGather& g) override { cpu_->gather_windows(g); }
  void synchronize() override {}
  kernels::TransferStats transfers() const override { return stats_; }
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    cpu_->gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void bias_act_forward(float* y, const float* b, int r, int c, bool relu) override { cpu_->bias_act_forward(y, b, r, c, relu); }
  void relu_backward(float* dy, const float* y, size_t n) override { cpu_->relu_backward(dy, y, n); }
  void column_sum(const float* dy, float* db, int r, int c) override { cpu_->column_sum(dy, db, r, c); }
  kernels::LossResult softmax_xent(const float* z, const int32_t* l, int r, int c, float* dz, float s,
                                   float smoothing) override {
    return cpu_->softmax_xent(z, l, r, c, dz, s, smoothing);
  }
  void tally_softmax_xent(const float* z, const int32_t* l, int r, int c, float* dz, float s,
                          float smoothing) override {
    cpu_->tally_softmax_xent(z, l, r, c, dz, s, smoothing);
  }
  kernels::LossTally take_tally() override { return cpu_->take_tally(); }
  void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov) override {
    cpu_->sgd_update(w, g, v, n, lr, mu, wd, nesterov);
  }
  void adamw_update(float* w, const float* g, float* m, float* v, size_t n, const kernels::AdamWStep& s) override {
    cpu_->adamw_update(w, g, m, v, n, s);
  }
  double norm2(const float* x, size_t n) override { return cpu_->norm2(x, n); }
  void axpy(size_t n, float a, const float* x, float* y) override { cpu_->axpy(n, a, x, y); }
  void scale(size_t n, float a, float* x) override { cpu_->scale(n, a, x); }
  double mix_span(const kernels::MixSpan& m) override {
    ++mixes_;
    return cpu_->mix_span(m);
  }
  int mixes() const { return mixes_; }
  void pack_bf16(const float* x, uint16_t* out, size_t n) override { cpu_->pack_bf16(x, out, n); }
  void push_sum_split(const kernels::PushSumSplit& s) override {
    ++splits_;
    cpu_->push_sum_split(s);
  }
  int splits() const { return splits_; }
  void accumulate(float* x, const void* v, size_t n, bool bf16) override { cpu_->accumulate(x, v, n, bf16); }
  void scale_copy(size_t n, float a, const float* x, float* y) override { cpu_->scale_copy(n, a, x, y); }

 private:
  std::unique_ptr<kernels::Backend> cpu_ = kernels::make_cpu_backend();
  kernels::TransferStats stats_;
  int mixes_ = 0, splits_ = 0;
};

}  // namespace gossip::testing
