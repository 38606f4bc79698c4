// One round of symmetric / doubly-stochastic gossip (D-PSGD):
//     x_i ← W_ii·x_i + Σ_j W_ij·x_j
// on any graph of the topology library. The constructor fixes everything; step() only sends,
// receives and mixes (after gloo's AllreduceRing). The mix is the Backend's kernel (mix_span): on
// host memory the CPU backend's; for a model on a device, the device's, fed with each received
// chunk uploaded once.
//
// With a bf16 wire the values travel as Q(x) = bfloat16(x), half the bytes, and the mix is
//     x_i ← x_i + Σ_{j≠i} W_ij·(Q(x_j) − Q(x_i))
// Every peer keeps its own rounding residual x_i − Q(x_i) out of the mix, so for a doubly
// stochastic W the average Σ_i x_i / n is kept exactly (up to float rounding) however coarse Q
// is; the peers agree only to within Q's rounding (relative 2⁻⁹), where the rounded values
// become equal and the mix stops moving them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/collectives.h"
#include "kernels/backend.h"
#include "topology/topology.h"

namespace gossip::peer {

class GossipStep {
 public:
  // max_norm_ratio > 0: a neighbour's chunk whose norm exceeds that many times this peer's own
  // values over the same span (plus a small floor) is an outlier: reported and not mixed in.
  // `tag` tells two vectors gossiped in the same round apart (the model 0, a gradient tracker 1).
  GossipStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
             double max_norm_ratio = 0, Dtype wire = Dtype::kF32, uint32_t tag = 0);
  // out ← W_ii·in + Σ_j W_ij·x_j (host memory, `in` and `out` distinct). `in` is sent zero-copy
  // and read while the neighbours' chunks are folded into `out`; step() returns once the
  // transport has released it, so the caller may then reuse it.
  void step(uint64_t round, const float* in, float* out);

  // The model's values on a device: `in` (host memory, step()'s copy of device_in) is what is sent
  // and what the neighbours' chunks are screened against; the mix reads device_in and the chunks,
  // each uploaded once into a staging buffer of the device, and writes device_out. Nothing else
  // crosses between host and device. With the bf16 wire `in` may be null: device_in is rounded
  // on the device and only Q(x) comes down (half the bytes), sent and screened against.
  struct OnDevice {
    kernels::Backend* backend = nullptr;  // not a host backend; outlives the step
    const float* in = nullptr;
    float* out = nullptr;
  };
  void step(uint64_t round, const float* in, const OnDevice& device);

 private:
  struct InFlight;  // one round's in-neighbours as the fold walks them (gossip_step.cc)
  void run(uint64_t round, const float* in, float* out, const OnDevice* device);
  void send_own(const topology::Neighbours& nb, const VectorRef& ref, const float* in, SendGuard& guard);
  void fold_next_span(InFlight& s, size_t pos, size_t span, const float* in, float* out);
  double mix(InFlight& s, size_t pos, size_t span, const float* in, float* out, bool norm, bool check);
  const void* device_copy(InFlight& s, size_t k, size_t span);
  bool outlier(InFlight& s, size_t k, double ours);
  double own_sum_squares(const float* in, size_t offset, size_t count) const;
  Transport* t_;  // owned by the peer's Node (or a test), outlives the step
  std::unique_ptr<kernels::Backend> host_ = kernels::make_cpu_backend();  // mixes host memory
  topology::Graph graph_;
  size_t floats_;
  size_t chunk_floats_;
  double timeout_s_;
  double max_norm_ratio_;
  Dtype wire_;
  uint32_t tag_;
  std::vector<uint16_t> rounded_;  // bf16 wire: Q(in), sent zero-copy and released within step()
  std::vector<kernels::DeviceArray<float>> staging_;  // on a device: one chunk per in-neighbour
  kernels::DeviceArray<float> device_rounded_;        // on a device, bf16 wire: Q(x), packed
};

// Σ v_i² (vectorised).
double sum_squares(const float* v, size_t n);

}  // namespace gossip::peer
