// Training data held in a backend's memory, batches gathered there: a labelled data set's rows
// (DeviceRows, Backend::gather_rows) or a text's windows (DeviceText, Backend::gather_windows).
// On a device the data goes up once, when the peer starts, and a batch costs only the upload of
// its row numbers or window starts; on the host the backend's memory is the data's own, so
// nothing is copied (the host data cache's mapping stays shared by the peers).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/dataset.h"
#include "model/model.h"

namespace gossip::model {

class DeviceRows {
 public:
  // `data` must outlive this on a host backend (its memory is used in place).
  DeviceRows(kernels::Backend& backend, const Dataset& data);
  DeviceRows(const DeviceRows&) = delete;
  DeviceRows& operator=(const DeviceRows&) = delete;
  // Rows rows[0, count) gathered into a batch in the backend's memory (Batch::on_device), valid
  // until the next call.
  Batch gather(const int32_t* rows, int count);

 private:
  kernels::Backend* backend_;
  int cols_;
  // The data set in the backend's memory: copies on a device, the data set's own on the host.
  kernels::DeviceArray<uint8_t> bytes_copy_;
  kernels::DeviceArray<float> table_copy_, floats_copy_;
  kernels::DeviceArray<int32_t> labels_copy_;
  kernels::RowGather from_;  // its pointers (rows, count, x and y are set per batch)
  kernels::DeviceArray<int32_t> rows_;  // on a device: the batch's row numbers
  kernels::DeviceArray<float> x_;
  kernels::DeviceArray<int32_t> y_;
};

// A language model's training text in a backend's memory.
class DeviceText {
 public:
  // `text` must outlive this on a host backend (its memory is used in place).
  DeviceText(kernels::Backend& backend, const std::vector<uint8_t>& text);
  DeviceText(const DeviceText&) = delete;
  DeviceText& operator=(const DeviceText&) = delete;
  // Windows of context + 1 bytes at starts[0, count) gathered into a batch in the backend's
  // memory (tokens and next-byte labels; Batch::on_device), valid until the next call.
  Batch gather(const int64_t* starts, int count, int context);

 private:
  kernels::Backend* backend_;
  const uint8_t* text_;                      // in the backend's memory
  kernels::DeviceArray<uint8_t> text_copy_;  // on a device
  kernels::DeviceArray<int64_t> starts_;     // on a device: the batch's window starts
  kernels::DeviceArray<int32_t> tokens_, targets_;
};

}  // namespace gossip::model
