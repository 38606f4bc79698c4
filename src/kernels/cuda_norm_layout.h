// The one layout the CUDA norm kernels serve LayerNorm and GroupNorm with (plain C++: the
// kernels' header is also compiled without CUDA, by tests/cuda_kernels_emulated_test.cc).
#pragma once

namespace gossip::kernels::cuda {

// LayerNorm and GroupNorm share one layout: `segments` contiguous runs of `length` values are
// normalised each; element i uses gamma/beta[(i / param_stride) % params]. LayerNorm: segments =
// rows, length = cols, param_stride 1, params = cols. GroupNorm: segments = batch·groups, length =
// (c/groups)·plane, param_stride = plane, params = c.
struct NormLayout {
  int segments = 0, length = 0, param_stride = 1, params = 0;
};

}  // namespace gossip::kernels::cuda
