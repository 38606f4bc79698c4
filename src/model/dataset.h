// Classification data sets: Fashion-MNIST from IDX files, or a synthetic one for tests. Images
// stay as stored (one byte per pixel) and become normalised floats per batch, where the batch is
// gathered (model::DeviceRows); the bytes are the host's data cache mapping when there is one,
// shared by the peers of a machine.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/data_cache.h"
#include "model/large_array.h"

namespace gossip::model {

struct Dataset {
  int rows = 0;
  int cols = 0;
  int classes = 0;
  std::vector<int32_t> y;  // [rows], in [0, classes)

  // Row r's features, either stored bytes and the float each byte value stands for (images) ...
  const uint8_t* bytes = nullptr;  // [rows][cols]
  std::array<float, 256> byte_value{};
  std::shared_ptr<const Bytes> bytes_owner;  // keeps `bytes` alive (a cache mapping or memory)
  // ... or floats (synthetic data).
  LargeArray<float> floats;  // [rows][cols] when `bytes` is null

  float at(size_t row, int col) const {
    return bytes ? byte_value[bytes[row * cols + col]] : floats[row * cols + col];
  }
  // Only the first `rows` rows are used from now on (rows <= this->rows).
  void truncate(int rows);
  bool shares_host_cache() const { return bytes_owner && bytes_owner->shared(); }
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Fashion-MNIST train and test sets from `dir` (the four *-ubyte.gz files of the Debian package),
// through the data cache in `cache_dir` (empty: private memory).
TrainTest load_fashion_mnist(const std::string& dir, const std::string& cache_dir = "");

// Gaussian blobs: `classes` centres in `dims` dimensions, `separation` apart on average.
TrainTest make_synthetic(int train_rows, int test_rows, int dims, int classes, uint64_t seed,
                         double noise = 1.0);

}  // namespace gossip::model
