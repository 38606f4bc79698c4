// The CPU reference of push-sum's kernels (Backend::push_sum_split, accumulate, scale_copy): plain
// loops, each product and sum rounded on its own in the order PushSumSplit writes them (the CUDA
// kernels use the same order with __fmul_rn/__fadd_rn, so both give the same bits).
#include "kernels/bf16.h"
#include "kernels/cpu_backend.h"

namespace gossip::kernels {
namespace {

inline float local_update(float x, float z, float inv, float gain) { return x + gain * (z - x * inv); }

// One out-neighbour, the common case (SGP's one-peer graphs): one fused pass.
void split_one(const PushSumSplit& s) {
  const float p = s.weights[0];
  float* __restrict x = s.x;
  const float* __restrict z = s.z;
  if (!s.bf16) {
    float* __restrict share = static_cast<float*>(s.shares[0]);
    for (size_t i = 0; i < s.n; ++i) {
      const float y = local_update(x[i], z[i], s.inv, s.gain);
      share[i] = p * y;
      x[i] = s.self * y;
    }
    return;
  }
  uint16_t* __restrict share = static_cast<uint16_t*>(s.shares[0]);
  for (size_t i = 0; i < s.n; ++i) {
    const float y = local_update(x[i], z[i], s.inv, s.gain);
    const float sent = p * y;
    share[i] = to_bf16(sent);
    x[i] = s.self * y + (sent - from_bf16(share[i]));
  }
}

// Any number of out-neighbours: the update in place, one pass per share, then what stays (with
// bf16, the residuals are computed again from the shares: p_k·y is the same product both times).
void split_many(const PushSumSplit& s) {
  float* __restrict x = s.x;
  for (size_t i = 0; i < s.n; ++i) x[i] = local_update(x[i], s.z[i], s.inv, s.gain);
  for (size_t k = 0; k < s.degree; ++k) {
    const float p = s.weights[k];
    if (s.bf16) {
      uint16_t* __restrict share = static_cast<uint16_t*>(s.shares[k]);
      for (size_t i = 0; i < s.n; ++i) share[i] = to_bf16(p * x[i]);
    } else {
      float* __restrict share = static_cast<float*>(s.shares[k]);
      for (size_t i = 0; i < s.n; ++i) share[i] = p * x[i];
    }
  }
  if (!s.bf16 || s.degree == 0) {
    for (size_t i = 0; i < s.n; ++i) x[i] = s.self * x[i];
    return;
  }
  for (size_t i = 0; i < s.n; ++i) {
    const float y = x[i];
    float r = 0;
    for (size_t k = 0; k < s.degree; ++k) {
      const float sent = s.weights[k] * y;
      const float d = sent - from_bf16(static_cast<const uint16_t*>(s.shares[k])[i]);
      r = k == 0 ? d : r + d;
    }
    x[i] = s.self * y + r;
  }
}

}  // namespace

void CpuBackend::push_sum_split(const PushSumSplit& s) {
  if (s.degree == 1)
    split_one(s);
  else
    split_many(s);
}

void CpuBackend::accumulate(float* x, const void* values, size_t n, bool bf16) {
  float* __restrict dst = x;
  if (bf16) {
    const uint16_t* __restrict v = static_cast<const uint16_t*>(values);
    for (size_t i = 0; i < n; ++i) dst[i] += from_bf16(v[i]);
  } else {
    const float* __restrict v = static_cast<const float*>(values);
    for (size_t i = 0; i < n; ++i) dst[i] += v[i];
  }
}

void CpuBackend::scale_copy(size_t n, float a, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = a * x[i];
}

}  // namespace gossip::kernels
