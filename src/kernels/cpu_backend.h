// Reference backend: OpenBLAS sgemm plus plain loops over host memory.
#pragma once

#include "kernels/backend.h"
#include "kernels/cpu_layers.h"

namespace gossip::kernels {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string name() const override { return "cpu"; }
  bool is_host() const override { return true; }

  void* alloc_bytes(size_t bytes) override;
  void free_bytes(void* p) noexcept override;
  void* alloc_shared_bytes(size_t bytes) override;  // a memfd where the system gives one
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void fill(float* p, float value, size_t n) override;
  void copy_bytes(void* dst, const void* src, size_t bytes) override;
  void gather_rows(const RowGather& g) override;
  void gather_windows(const WindowGather& g) override;
  void synchronize() override {}

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override;
  void bias_act_forward(float* y, const float* bias, int rows, int cols, bool relu) override;
  void relu_backward(float* dy, const float* y, size_t n) override;
  void column_sum(const float* dy, float* db, int rows, int cols) override;
  LossResult softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                          float* dlogits, float grad_scale, float smoothing) override;
  void tally_softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float* dlogits,
                          float grad_scale, float smoothing) override;
  LossTally take_tally() override;
  void sgd_update(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) override;
  void adamw_update(float* w, const float* g, float* m, float* v, size_t n, const AdamWStep& s) override;
  double norm2(const float* x, size_t n) override;
  void axpy(size_t n, float a, const float* x, float* y) override;
  void scale(size_t n, float a, float* x) override;
  double mix_span(const MixSpan& m) override;  // kernels/cpu_mix.cc
  void pack_bf16(const float* x, uint16_t* out, size_t n) override;
  void push_sum_split(const PushSumSplit& s) override;  // kernels/cpu_mix.cc
  void accumulate(float* x, const void* values, size_t n, bool bf16) override;
  void scale_copy(size_t n, float a, const float* x, float* y) override;
  LayerKernels* layers() override { return &layers_; }

 private:
  CpuLayers layers_;
  LossTally tally_;
};

}  // namespace gossip::kernels
