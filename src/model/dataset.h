// In-memory classification data sets: Fashion-MNIST from IDX files, or a synthetic one for tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/large_array.h"

namespace gossip::model {

struct Dataset {
  int rows = 0;
  int cols = 0;
  int classes = 0;
  LargeArray<float> x;     // [rows][cols], normalised
  std::vector<int32_t> y;  // [rows], in [0, classes)

  // Rows `indices[begin, begin+count)` gathered into host_x / host_y (sized by the caller).
  void gather(const std::vector<int64_t>& indices, size_t begin, int count, float* host_x,
              int32_t* host_y) const;
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Fashion-MNIST train and test sets from `dir` (the four *-ubyte.gz files of the Debian package).
TrainTest load_fashion_mnist(const std::string& dir);

// Gaussian blobs: `classes` centres in `dims` dimensions, `separation` apart on average.
TrainTest make_synthetic(int train_rows, int test_rows, int dims, int classes, uint64_t seed,
                         double noise = 1.0);

}  // namespace gossip::model
