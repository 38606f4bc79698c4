#include "model/device_data.h"

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

DeviceText::DeviceText(kernels::Backend& backend, const std::vector<uint8_t>& text)
    : backend_(&backend), text_(text.data()) {
  if (backend.is_host()) return;
  text_copy_ = uploaded(backend, text.data(), text.size());
  text_ = text_copy_.get();
}

Batch DeviceText::gather(const int64_t* starts, int count, int context) {
  const size_t values = size_t(count) * context;
  kernels::WindowGather g;
  g.text = text_;
  g.starts = starts;
  if (!backend_->is_host()) {
    g.starts = starts_.at_least(*backend_, size_t(count));
    backend_->upload(starts_.get(), starts, size_t(count) * sizeof(int64_t));
  }
  g.count = count;
  g.context = context;
  g.tokens = tokens_.at_least(*backend_, values);
  g.targets = targets_.at_least(*backend_, values);
  backend_->gather_windows(g);
  Batch b{nullptr, tokens_.get(), targets_.get(), count};
  b.on_device = true;
  return b;
}

Batch DeviceRows::gather(const int32_t* rows, int count) {
  kernels::RowGather g = from_;
  g.rows = rows;
  if (!backend_->is_host()) {
    g.rows = rows_.at_least(*backend_, size_t(count));
    backend_->upload(rows_.get(), rows, size_t(count) * sizeof(int32_t));
  }
  g.count = count;
  g.x = x_.at_least(*backend_, size_t(count) * cols_);
  g.y = y_.at_least(*backend_, size_t(count));
  backend_->gather_rows(g);
  Batch b{x_.get(), nullptr, y_.get(), count};
  b.on_device = true;
  return b;
}

}  // namespace gossip::model
