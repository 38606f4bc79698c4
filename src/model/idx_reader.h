// Reader of the IDX format (LeCun's MNIST files), gzip-compressed or plain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gossip::model {

struct IdxArray {
  std::vector<int> shape;
  std::vector<uint8_t> data;  // unsigned-byte payload (type code 0x08)
};

// Throws gossip::Error naming the file on a missing, truncated or malformed file.
IdxArray read_idx(const std::string& path);

}  // namespace gossip::model
