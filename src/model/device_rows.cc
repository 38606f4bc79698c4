#include "model/device_rows.h"

namespace gossip::model {
namespace {

template <typename T>
kernels::DeviceArray<T> uploaded(kernels::Backend& backend, const T* host, size_t n) {
  kernels::DeviceArray<T> a(backend, n);
  backend.upload(a.get(), host, n * sizeof(T));
  return a;
}

}  // namespace

DeviceRows::DeviceRows(kernels::Backend& backend, const Dataset& data) : backend_(&backend), cols_(data.cols) {
  from_.cols = data.cols;
  const size_t values = size_t(data.rows) * data.cols;
  if (backend.is_host()) {
    from_.bytes = data.bytes;
    from_.table = data.byte_value.data();
    from_.floats = data.bytes ? nullptr : data.floats.data();
    from_.labels = data.y.data();
    return;
  }
  if (data.bytes) {
    bytes_copy_ = uploaded(backend, data.bytes, values);
    table_copy_ = uploaded(backend, data.byte_value.data(), data.byte_value.size());
  } else {
    floats_copy_ = uploaded(backend, data.floats.data(), values);
  }
  labels_copy_ = uploaded(backend, data.y.data(), size_t(data.rows));
  from_.bytes = bytes_copy_.get();
  from_.table = table_copy_.get();
  from_.floats = floats_copy_.get();
  from_.labels = labels_copy_.get();
}

Batch DeviceRows::gather(const int32_t* rows, int count) {
  if (y_.size() < size_t(count)) {
    x_ = kernels::DeviceArray<float>(*backend_, size_t(count) * cols_);
    y_ = kernels::DeviceArray<int32_t>(*backend_, size_t(count));
    if (!backend_->is_host()) rows_ = kernels::DeviceArray<int32_t>(*backend_, size_t(count));
  }
  kernels::RowGather g = from_;
  g.rows = rows;
  if (!backend_->is_host()) {
    backend_->upload(rows_.get(), rows, size_t(count) * sizeof(int32_t));
    g.rows = rows_.get();
  }
  g.count = count;
  g.x = x_.get();
  g.y = y_.get();
  backend_->gather_rows(g);
  Batch b{x_.get(), nullptr, y_.get(), count};
  b.on_device = true;
  return b;
}

}  // namespace gossip::model
