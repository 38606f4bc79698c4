// Reader of the IDX format (LeCun's MNIST files), gzip-compressed or plain. The decompressed file
// can go through the host's data cache (model/data_cache.h), so that the peers of one machine
// share one mapped copy of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/data_cache.h"

namespace gossip::model {

struct IdxArray {
  std::vector<int> shape;
  std::shared_ptr<const Bytes> file;  // the decompressed file, which owns `data`
  const uint8_t* data = nullptr;      // the unsigned-byte payload (type code 0x08), product(shape) bytes
  size_t size() const;
};

// Throws gossip::Error naming the file on a missing, truncated or malformed file. `cache_dir`:
// the data cache's directory (empty: decompress into private memory).
IdxArray read_idx(const std::string& path, const std::string& cache_dir = "");

}  // namespace gossip::model
