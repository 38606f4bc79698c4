// The exchange's kernels on a CUDA device against the CPU reference, bit for bit: the gossip mix,
// bf16 packing and push-sum's split and fold; skipped when no device answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda_vs_cpu.h"
#include "kernels/backend.h"
#include "kernels/bf16.h"

namespace gossip::kernels {
namespace {

// The gossip mix (Backend::mix_span) gives the CPU reference's bits on the device, for f32 and
// bf16 values, degrees up to two launches' worth, a neighbour left out and a NaN sent; the scans
// and the norm agree to float rounding and name the same neighbour not finite.
TEST_F(CudaVsCpu, GossipMixIsTheCpuMixBitForBit) {
  const size_t n = 70001;
  for (bool bf16 : {false, true})
    for (size_t degree : {0, 1, 2, 3, 9, 17}) {
      const auto x = random(n, 40 + degree);
      std::vector<std::vector<float>> v;
      std::vector<std::vector<uint16_t>> q;
      std::vector<float> w;
      for (size_t k = 0; k < degree; ++k) {
        v.push_back(random(n, 60 + k));
        q.emplace_back(n);
        w.push_back(0.5f / float(degree));
      }
      if (degree > 0) v[0][n / 2] = std::numeric_limits<float>::quiet_NaN();
      std::vector<uint16_t> own(n);
      to_bf16(x.data(), own.data(), n);
      std::vector<const void*> host_values, device_values;
      on_gpu(x);
      float* dx = last();
      on_gpu(std::vector<float>(n, 0));
      float* dy = last();
      for (size_t k = 0; k < degree; ++k) {
        to_bf16(v[k].data(), q[k].data(), n);
        const void* h = bf16 ? static_cast<const void*>(q[k].data()) : v[k].data();
        bufs_.emplace_back(*gpu_, n);
        gpu_->upload(last(), h, n * (bf16 ? 2 : 4));
        host_values.push_back(k == 1 ? nullptr : h);  // neighbour 1 left out
        device_values.push_back(k == 1 ? nullptr : last());
      }
      std::vector<float> ref(n);
      std::vector<ValueScan> cpu_scans(degree), gpu_scans(degree);
      MixSpan m;
      m.n = n;
      m.self = 0.5f;
      m.rest = 0.5f;
      m.bf16 = bf16;
      m.own = own.data();
      m.degree = degree;
      m.weights = w.data();
      m.norm = true;
      m.src = x.data(), m.dst = ref.data(), m.values = host_values.data(), m.scans = cpu_scans.data();
      const double cpu_norm = cpu_->mix_span(m);
      m.src = dx, m.dst = dy, m.values = device_values.data(), m.scans = gpu_scans.data();
      const double gpu_norm = gpu_->mix_span(m);
      const auto got = fetch(dy, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i])
            << "bf16 " << bf16 << " degree " << degree << " at " << i << ": " << got[i] << " vs " << ref[i];
      }
      EXPECT_NEAR(gpu_norm, cpu_norm, 1e-5 * cpu_norm);
      for (size_t k = 0; k < degree; ++k) {
        EXPECT_EQ(gpu_scans[k].finite, cpu_scans[k].finite) << "neighbour " << k;
        if (cpu_scans[k].finite) {
          EXPECT_NEAR(gpu_scans[k].sum_squares, cpu_scans[k].sum_squares, 1e-5 * cpu_scans[k].sum_squares) << k;
        }
      }
      if (degree > 0) {
        EXPECT_FALSE(gpu_scans[0].finite);
      }
    }
}

// bf16 packing on the device rounds as to_bf16 does, bit for bit: ties to even, NaN kept a NaN,
// values beyond bf16's largest to ±Inf, subnormals.
TEST_F(CudaVsCpu, PackBf16IsToBf16BitForBit) {
  auto x = random(100003, 70);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 3.4e38f, -3.4e38f, 1e-40f, 0.0f, -0.0f,
                            1.00390625f /* a tie: 1 + 2^-8 */, 1.01171875f /* 1 + 3·2^-8 */};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 997] = specials[i];
  on_gpu(x);
  float* dx = last();
  bufs_.emplace_back(*gpu_, (x.size() + 1) / 2);
  auto* dq = reinterpret_cast<uint16_t*>(last());
  gpu_->pack_bf16(dx, dq, x.size());
  std::vector<uint16_t> got(x.size()), want(x.size());
  gpu_->download(got.data(), dq, x.size() * 2);
  cpu_->pack_bf16(x.data(), want.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << i << ": " << x[i];
}

// Push-sum's kernels on the device give the CPU reference's bits: the split for f32 and bf16
// shares at degrees 0 to 17 (three launches, the bf16 residual carried between them), a finished
// out-neighbour (weight 0), asynchronous mode's gain and a NaN in the model; accumulate of floats
// and bf16 values; scale_copy.
TEST_F(CudaVsCpu, PushSumKernelsAreTheCpuKernelsBitForBit) {
  const size_t n = 70001;
  auto bits_equal = [](float a, float b) { return std::isnan(a) ? std::isnan(b) : std::memcmp(&a, &b, 4) == 0; };
  for (bool bf16 : {false, true})
    for (size_t degree : {0, 1, 3, 9, 17}) {
      auto x = random(n, 80 + degree), z = random(n, 90 + degree);
      z[n / 2] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> p(degree, 0.5f / float(degree + 1));
      if (degree > 2) p[2] = 0;
      std::vector<std::vector<float>> host_shares(degree, std::vector<float>(n));
      std::vector<void*> cpu_shares, gpu_shares;
      for (size_t k = 0; k < degree; ++k) {
        cpu_shares.push_back(host_shares[k].data());
        bufs_.emplace_back(*gpu_, n);
        gpu_shares.push_back(last());
      }
      on_gpu(x);
      float* dx = last();
      on_gpu(z);
      float* dz = last();
      PushSumSplit s;
      s.n = n, s.inv = 0.8f, s.gain = degree % 2 ? 1.0f : 0.7f, s.self = 0.5f, s.bf16 = bf16, s.degree = degree;
      s.weights = p.data();
      s.z = z.data(), s.x = x.data(), s.shares = cpu_shares.data();
      cpu_->push_sum_split(s);
      s.z = dz, s.x = dx, s.shares = gpu_shares.data();
      gpu_->push_sum_split(s);
      const auto got = fetch(dx, n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(bits_equal(x[i], got[i])) << "bf16 " << bf16 << " degree " << degree << " x at " << i;
      const size_t bytes = n * (bf16 ? 2 : 4);
      for (size_t k = 0; k < degree; ++k) {
        std::vector<char> a(bytes), b(bytes);
        std::memcpy(a.data(), cpu_shares[k], bytes);
        gpu_->download(b.data(), gpu_shares[k], bytes);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << "bf16 " << bf16 << " degree " << degree << " share " << k;
      }
    }
  auto x = random(n, 7), v = random(n, 8);
  v[5] = std::numeric_limits<float>::infinity();
  std::vector<uint16_t> q(n);
  to_bf16(v.data(), q.data(), n);
  for (bool bf16 : {false, true}) {
    auto ref = x;
    const void* h = bf16 ? static_cast<const void*>(q.data()) : v.data();
    cpu_->accumulate(ref.data(), h, n, bf16);
    on_gpu(x);
    float* dx = last();
    bufs_.emplace_back(*gpu_, n);
    gpu_->upload(last(), h, n * (bf16 ? 2 : 4));
    gpu_->accumulate(dx, last(), n, bf16);
    const auto got = fetch(dx, n);
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(bits_equal(ref[i], got[i])) << "accumulate bf16 " << bf16 << " at " << i;
  }
  on_gpu(x);
  float* dx = last();
  on_gpu(std::vector<float>(n, 0));
  gpu_->scale_copy(n, 0.3f, dx, last());
  std::vector<float> ref(n);
  cpu_->scale_copy(n, 0.3f, x.data(), ref.data());
  const auto got = fetch(last(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(bits_equal(ref[i], got[i])) << "scale_copy at " << i;
}

}  // namespace
}  // namespace gossip::kernels
