#include "model/idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "model/dataset.h"

namespace gossip::model {
namespace {

namespace fs = std::filesystem;

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gossip_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write_gz(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }
  fs::path dir_;
};

TEST_F(IdxTest, ReadsImagesAndLabels) {
  std::vector<uint8_t> img{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
  IdxArray a = read_idx(write_gz("img.gz", img));
  EXPECT_EQ(a.shape, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(std::vector<uint8_t>(a.data, a.data + a.size()), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(IdxTest, TruncatedFileNamesTheFile) {
  std::vector<uint8_t> img{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3};
  std::string path = write_gz("short.gz", img);
  try {
    read_idx(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST_F(IdxTest, BadMagicAndMissingFile) {
  EXPECT_THROW(read_idx(write_gz("bad.gz", {1, 2, 3, 4, 5, 6})), Error);
  EXPECT_THROW(read_idx(write_gz("type.gz", {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0})), Error);
  try {
    read_idx((dir_ / "nope.gz").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.gz"), std::string::npos);
  }
}

TEST_F(IdxTest, FashionMnistFromDirectory) {
  // Two 28×28 images with labels: the same layout as the Debian package's files.
  const uint8_t header[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
  std::vector<uint8_t> img(16 + 2 * 784, 255);
  std::copy(header, header + 16, img.begin());
  std::vector<uint8_t> lab{0, 0, 8, 1, 0, 0, 0, 2, 3, 9};
  write_gz("train-images-idx3-ubyte.gz", img);
  write_gz("train-labels-idx1-ubyte.gz", lab);
  write_gz("t10k-images-idx3-ubyte.gz", img);
  write_gz("t10k-labels-idx1-ubyte.gz", lab);
  TrainTest tt = load_fashion_mnist(dir_.string());
  EXPECT_EQ(tt.train.rows, 2);
  EXPECT_EQ(tt.train.cols, 784);
  EXPECT_EQ(tt.test.y, (std::vector<int32_t>{3, 9}));
  EXPECT_NEAR(tt.train.at(0, 0), (1.0f - 0.2860f) / 0.3530f, 1e-5);
  // A label outside 0..9 names the label file.
  lab[9] = 12;
  write_gz("t10k-labels-idx1-ubyte.gz", lab);
  EXPECT_THROW(load_fashion_mnist(dir_.string()), Error);
}

TEST(FashionMnist, RealPackageWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  TrainTest tt = load_fashion_mnist(dir);
  EXPECT_EQ(tt.train.rows, 60000);
  EXPECT_EQ(tt.test.rows, 10000);
  std::vector<int> count(10);
  for (int y : tt.test.y) count[y]++;
  for (int c : count) EXPECT_EQ(c, 1000);
}

TEST(FashionMnist, CachedRowsEqualPrivateRowsWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const fs::path cache = fs::temp_directory_path() / ("gossip_fmnist_cache_" + std::to_string(::getpid()));
  TrainTest priv = load_fashion_mnist(dir);
  TrainTest made = load_fashion_mnist(dir, cache.string());    // builds the entries
  TrainTest mapped = load_fashion_mnist(dir, cache.string());  // maps them
  EXPECT_FALSE(priv.train.shares_host_cache());
  EXPECT_TRUE(mapped.train.shares_host_cache());
  EXPECT_TRUE(mapped.test.shares_host_cache());
  for (const auto* pair : {&made, &mapped})
    for (const auto& [a, b] : {std::pair{&priv.train, &pair->train}, std::pair{&priv.test, &pair->test}}) {
      ASSERT_EQ(a->rows, b->rows);
      EXPECT_EQ(a->y, b->y);
      ASSERT_EQ(a->cols, b->cols);
      ASSERT_TRUE(a->bytes && b->bytes);
      EXPECT_EQ(std::memcmp(a->bytes, b->bytes, size_t(a->rows) * a->cols), 0);
      EXPECT_EQ(a->byte_value, b->byte_value);
    }
  fs::remove_all(cache);
}

}  // namespace
}  // namespace gossip::model
