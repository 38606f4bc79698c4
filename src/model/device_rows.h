// A labelled data set held in a backend's memory, training batches gathered there
// (Backend::gather_rows). On a device the rows go up once, when the peer starts, and a batch
// costs only the upload of its row numbers; on the host the backend's memory is the data set's
// own, so nothing is copied (the host data cache's mapping stays shared by the peers).
#pragma once

#include <cstdint>

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

}  // namespace gossip::model
