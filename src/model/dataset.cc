#include "model/dataset.h"

#include <random>

#include "common/error.h"
#include "model/idx_reader.h"

namespace gossip::model {
namespace {

// Fashion-MNIST pixel mean and standard deviation over the training set (after /255).
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

Dataset load_split(const std::string& images_path, const std::string& labels_path, const std::string& cache_dir) {
  IdxArray images = read_idx(images_path, cache_dir);
  IdxArray labels = read_idx(labels_path, cache_dir);
  if (images.shape.size() != 3) throw Error(images_path, "expected a 3-D image array");
  if (labels.shape.size() != 1) throw Error(labels_path, "expected a 1-D label array");
  if (images.shape[0] != labels.shape[0])
    throw Error(labels_path, std::to_string(labels.shape[0]) + " labels for " +
                                 std::to_string(images.shape[0]) + " images in " + images_path);
  Dataset d;
  d.rows = images.shape[0];
  d.cols = images.shape[1] * images.shape[2];
  d.classes = 10;
  d.bytes = images.data;
  d.bytes_owner = images.file;
  for (int v = 0; v < 256; ++v) d.byte_value[v] = (v / 255.0f - kMean) / kStd;
  d.y.resize(d.rows);
  for (int i = 0; i < d.rows; ++i) {
    if (labels.data[i] >= d.classes)
      throw Error(labels_path, "label " + std::to_string(labels.data[i]) + " at row " + std::to_string(i) +
                                   " is outside 0..9");
    d.y[i] = labels.data[i];
  }
  return d;
}

}  // namespace

void Dataset::truncate(int new_rows) {
  if (new_rows >= rows) return;
  rows = new_rows;
  y.resize(rows);
  if (!bytes) floats.resize(size_t(rows) * cols);
}

TrainTest load_fashion_mnist(const std::string& dir, const std::string& cache_dir) {
  TrainTest tt;
  tt.train = load_split(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz", cache_dir);
  tt.test = load_split(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz", cache_dir);
  return tt;
}

TrainTest make_synthetic(int train_rows, int test_rows, int dims, int classes, uint64_t seed, double noise) {
  if (train_rows < 0 || test_rows < 0 || dims <= 0 || classes <= 1)
    throw Error("synthetic data", "needs rows >= 0, dims > 0 and at least 2 classes");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(size_t(classes) * dims);
  for (float& c : centres) c = 2.0f * normal(rng);
  auto make = [&](int rows) {
    Dataset d;
    d.rows = rows;
    d.cols = dims;
    d.classes = classes;
    d.floats.resize(size_t(rows) * dims);
    d.y.resize(rows);
    std::uniform_int_distribution<int> pick(0, classes - 1);
    for (int r = 0; r < rows; ++r) {
      const int c = pick(rng);
      d.y[r] = c;
      for (int j = 0; j < dims; ++j)
        d.floats[size_t(r) * dims + j] = centres[size_t(c) * dims + j] + static_cast<float>(noise) * normal(rng);
    }
    return d;
  };
  TrainTest tt;
  tt.train = make(train_rows);
  tt.test = make(test_rows);
  return tt;
}

}  // namespace gossip::model
