#include "model/data_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace gossip::model {
namespace {

namespace fs = std::filesystem;

class DataCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gossip_cache_" + std::to_string(::getpid()));
    fs::create_directories(root_);
    source_ = (root_ / "source.bin").string();
    write_source({1, 2, 3, 4, 5});
  }
  void TearDown() override { fs::remove_all(root_); }

  void write_source(const std::vector<uint8_t>& bytes) {
    std::ofstream(source_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  // The source's bytes times `factor`, counting the builds.
  std::shared_ptr<const Bytes> load(const std::string& dir, int factor = 1) {
    return cached_bytes(dir, source_, [&] {
      ++builds_;
      std::ifstream in(source_, std::ios::binary);
      std::vector<uint8_t> v((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (uint8_t& b : v) b = static_cast<uint8_t>(b * factor);
      return v;
    });
  }
  static std::vector<uint8_t> contents(const Bytes& b) { return {b.data(), b.data() + b.size()}; }
  std::string cache() const { return (root_ / "cache").string(); }

  fs::path root_;
  std::string source_;
  std::atomic<int> builds_{0};
};

TEST_F(DataCacheTest, BuildsOnceThenMapsTheEntry) {
  auto first = load(cache());
  EXPECT_TRUE(fs::is_directory(cache()));  // a missing directory is made
  auto second = load(cache(), 3);          // a hit: build() does not run, so no factor 3
  EXPECT_EQ(builds_, 1);
  EXPECT_TRUE(first->shared());
  EXPECT_TRUE(second->shared());
  EXPECT_EQ(contents(*second), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second->data()) % 4096, 0u);  // the payload starts on a page
}

TEST_F(DataCacheTest, AChangedSourceIsBuiltAgain) {
  load(cache());
  // Another size and modification time: another identity, another entry.
  write_source({9, 8, 7, 6, 5, 4});
  fs::last_write_time(source_, fs::last_write_time(source_) + std::chrono::seconds(5));
  auto b = load(cache());
  EXPECT_EQ(builds_, 2);
  EXPECT_EQ(contents(*b), (std::vector<uint8_t>{9, 8, 7, 6, 5, 4}));
}

TEST_F(DataCacheTest, CorruptOrTruncatedEntriesAreRebuiltNeverUsed) {
  load(cache());
  const std::string entry = cache_file_for(cache(), source_);
  ASSERT_TRUE(fs::exists(entry));
  {  // one payload byte flipped: the payload checksum fails
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 2);
    f.put(char(0x7f));
  }
  auto b = load(cache(), 2);
  EXPECT_EQ(builds_, 2);
  EXPECT_EQ(contents(*b), (std::vector<uint8_t>{2, 4, 6, 8, 10}));
  fs::resize_file(entry, 100);  // shorter than its header
  EXPECT_EQ(contents(*load(cache(), 3)), (std::vector<uint8_t>{3, 6, 9, 12, 15}));
  {  // a header byte changed: the header checksum (or magic) fails
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(char(0x55));
  }
  EXPECT_EQ(contents(*load(cache(), 4)), (std::vector<uint8_t>{4, 8, 12, 16, 20}));
  fs::resize_file(entry, fs::file_size(entry) + 1);  // a payload longer than the header says
  EXPECT_EQ(contents(*load(cache(), 5)), (std::vector<uint8_t>{5, 10, 15, 20, 25}));
  EXPECT_EQ(builds_, 5);
}

TEST_F(DataCacheTest, WithoutAUsableDirectoryTheBytesStayPrivate) {
  std::ofstream(root_ / "a_file") << "x";
  auto b = load((root_ / "a_file" / "cache").string());  // cannot be made
  EXPECT_FALSE(b->shared());
  EXPECT_EQ(contents(*b), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  auto none = load("");
  EXPECT_FALSE(none->shared());
  // A directory others may write to is not trusted.
  fs::create_directories(root_ / "open");
  ::chmod((root_ / "open").c_str(), 0777);
  auto open = load((root_ / "open").string());
  EXPECT_FALSE(open->shared());
  EXPECT_TRUE(fs::is_empty(root_ / "open"));
  EXPECT_EQ(builds_, 3);
}

TEST_F(DataCacheTest, PeersStartingTogetherBuildOnce) {
  std::vector<std::thread> peers;
  std::vector<std::shared_ptr<const Bytes>> got(6);
  for (int i = 0; i < 6; ++i) peers.emplace_back([&, i] { got[i] = load(cache()); });
  for (auto& t : peers) t.join();
  EXPECT_EQ(builds_, 1);
  for (const auto& b : got) {
    EXPECT_TRUE(b->shared());
    EXPECT_EQ(contents(*b), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  }
}

}  // namespace
}  // namespace gossip::model
