// model::DeviceRows and DeviceText: a data set's rows (a text's windows) gathered in a backend's
// memory are its rows as Dataset::at reads them (the window's bytes and the bytes after them); on
// a device the data goes up once and a batch then costs only its row numbers' (window starts')
// upload; on the host nothing is copied.
#include "model/device_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "counting_device_backend.h"
#include "kernels/backend.h"
#include "model/dataset.h"
#include "model/text_corpus.h"

namespace gossip::model {
namespace {

// 50 rows of 12 byte features (value v stands for v/255 − 0.3), 5 classes.
Dataset byte_rows(std::vector<uint8_t>& storage) {
  Dataset d;
  d.rows = 50, d.cols = 12, d.classes = 5;
  storage.resize(size_t(d.rows) * d.cols);
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  d.bytes = storage.data();
  for (int v = 0; v < 256; ++v) d.byte_value[v] = float(v) / 255.0f - 0.3f;
  for (int r = 0; r < d.rows; ++r) d.y.push_back((r * 3) % d.classes);
  return d;
}

Dataset float_rows() {
  Dataset d;
  d.rows = 40, d.cols = 7, d.classes = 3;
  d.floats.resize(size_t(d.rows) * d.cols);
  for (size_t i = 0; i < d.floats.size(); ++i) d.floats[i] = float(i) * 0.25f - 3.0f;
  for (int r = 0; r < d.rows; ++r) d.y.push_back(r % d.classes);
  return d;
}

void expect_same_batch(kernels::Backend& backend, const Dataset& d, const std::vector<int64_t>& rows,
                       const Batch& b) {
  ASSERT_TRUE(b.on_device);
  ASSERT_EQ(b.rows, int(rows.size()));
  std::vector<float> want_x, got_x(rows.size() * d.cols);
  std::vector<int32_t> want_y, got_y(rows.size());
  for (int64_t r : rows) {
    for (int c = 0; c < d.cols; ++c) want_x.push_back(d.at(size_t(r), c));
    want_y.push_back(d.y[size_t(r)]);
  }
  backend.download(got_x.data(), b.x, got_x.size() * sizeof(float));
  backend.download(got_y.data(), b.labels, got_y.size() * sizeof(int32_t));
  EXPECT_EQ(got_x, want_x);
  EXPECT_EQ(got_y, want_y);
}

TEST(DeviceRows, OnADeviceTheDataGoesUpOnceAndABatchCostsItsRowNumbers) {
  std::vector<uint8_t> storage;
  for (const bool bytes : {true, false}) {
    const Dataset d = bytes ? byte_rows(storage) : float_rows();
    testing::CountingDeviceBackend backend;
    DeviceRows rows(backend, d);
    const uint64_t data_bytes =
        bytes ? uint64_t(d.rows) * d.cols + 256 * sizeof(float) : uint64_t(d.rows) * d.cols * sizeof(float);
    EXPECT_EQ(backend.transfers().host_to_device, data_bytes + d.rows * sizeof(int32_t)) << "bytes " << bytes;
    for (const std::vector<int64_t>& picked : {std::vector<int64_t>{3, 0, 17, 17, 39}, std::vector<int64_t>{1, 2}}) {
      const uint64_t before = backend.transfers().host_to_device;
      std::vector<int32_t> ids(picked.begin(), picked.end());
      const Batch b = rows.gather(ids.data(), int(ids.size()));
      EXPECT_EQ(backend.transfers().host_to_device - before, ids.size() * sizeof(int32_t)) << "bytes " << bytes;
      expect_same_batch(backend, d, picked, b);
    }
  }
}

TEST(DeviceRows, OnTheHostNothingIsCopied) {
  std::vector<uint8_t> storage;
  const Dataset d = byte_rows(storage);
  auto backend = kernels::make_cpu_backend();
  DeviceRows rows(*backend, d);
  const std::vector<int64_t> picked{49, 0, 25};
  std::vector<int32_t> ids(picked.begin(), picked.end());
  expect_same_batch(*backend, d, picked, rows.gather(ids.data(), 3));
  storage[25 * d.cols] = static_cast<uint8_t>(storage[25 * d.cols] + 1);  // the data set's own memory is read
  const Batch again = rows.gather(ids.data(), 3);
  float first;
  backend->download(&first, again.x + 2 * d.cols, sizeof first);
  EXPECT_EQ(first, d.byte_value[storage[25 * d.cols]]);
}

// The tokens text[s + t] and next-byte targets text[s + t + 1] of each window start s.
void expect_windows(kernels::Backend& backend, const std::vector<uint8_t>& text, const std::vector<int64_t>& starts,
                    int context, const Batch& b) {
  ASSERT_TRUE(b.on_device);
  ASSERT_EQ(b.rows, int(starts.size()));
  std::vector<int32_t> want_tokens, want_targets;
  for (int64_t s : starts)
    for (int t = 0; t < context; ++t) {
      want_tokens.push_back(text[size_t(s) + t]);
      want_targets.push_back(text[size_t(s) + t + 1]);
    }
  std::vector<int32_t> tokens(want_tokens.size()), targets(want_tokens.size());
  backend.download(tokens.data(), b.tokens, tokens.size() * sizeof(int32_t));
  backend.download(targets.data(), b.labels, targets.size() * sizeof(int32_t));
  EXPECT_EQ(tokens, want_tokens);
  EXPECT_EQ(targets, want_targets);
}

// Windows drawn from a part of a text: the text uploaded once and 8 bytes a window per batch.
TEST(DeviceText, OnADeviceTheTextGoesUpOnceAndABatchCostsItsWindowStarts) {
  std::vector<uint8_t> text(5000);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>((i * 29 + i / 7) % 251);
  testing::CountingDeviceBackend backend;
  DeviceText on_device(backend, text);
  EXPECT_EQ(backend.transfers().host_to_device, text.size());
  const BytePart part{1000, 3000};
  const int context = 16, count = 9;
  std::mt19937_64 draws(7);
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> starts(count);
    draw_windows(text.size(), part, context, count, draws, starts.data());
    const uint64_t before = backend.transfers().host_to_device;
    const Batch b = on_device.gather(starts.data(), count, context);
    EXPECT_EQ(backend.transfers().host_to_device - before, count * sizeof(int64_t));
    expect_windows(backend, text, starts, context, b);
  }
}

// On the host the text's own memory is read, up to a window ending on its last byte.
TEST(DeviceText, OnTheHostNothingIsCopied) {
  std::vector<uint8_t> text(300);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>(i * 7);
  auto backend = kernels::make_cpu_backend();
  DeviceText on_host(*backend, text);
  const int context = 10;
  const std::vector<int64_t> starts{0, 289, 140};
  expect_windows(*backend, text, starts, context, on_host.gather(starts.data(), 3, context));
  text[299] = 1;
  expect_windows(*backend, text, starts, context, on_host.gather(starts.data(), 3, context));
}

}  // namespace
}  // namespace gossip::model
