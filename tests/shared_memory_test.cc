// Shared regions (common/shared_memory.h): the lender's registry and the reader's checks before
// it maps another process's memfd.
#include "common/shared_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace gossip::shm {
namespace {

uint64_t self_pid() { return static_cast<uint64_t>(::getpid()); }

TEST(SharedMemory, RegionsAreZeroedLocatedAndFreed) {
  const size_t bytes = 3 * 4096 + 100;
  auto* p = static_cast<float*>(allocate_shared(bytes));
  ASSERT_NE(p, nullptr) << "memfd_create is not available here";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  for (size_t i = 0; i < bytes / 4; ++i) ASSERT_EQ(p[i], 0.0f) << i;
  const auto whole = locate(p, bytes);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->offset, 0u);
  EXPECT_GE(whole->fd, 0);
  const auto inner = locate(p + 1000, 400);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->offset, 4000u);
  EXPECT_EQ(inner->inode, whole->inode);
  EXPECT_FALSE(locate(p, 4 * 4096 + 1)) << "past the end of the region";
  float elsewhere[4] = {};
  EXPECT_FALSE(locate(elsewhere, sizeof(elsewhere)));
  EXPECT_FALSE(free_shared(elsewhere)) << "not a region: left alone";
  EXPECT_TRUE(free_shared(p));
  EXPECT_FALSE(locate(p, 4)) << "freed";
  EXPECT_FALSE(free_shared(p)) << "freed once only";
}

// A reader's mapping sees what the lender writes, read-only, at the offsets locate() gives.
TEST(SharedMemory, AMappingSeesTheLendersValues) {
  auto* p = static_cast<float*>(allocate_shared(1 << 16));
  ASSERT_NE(p, nullptr);
  const auto place = locate(p + 10, 40);
  ASSERT_TRUE(place);
  std::string problem;
  SharedMapping m(self_pid(), static_cast<uint64_t>(place->fd), place->inode, &problem);
  ASSERT_NE(m.data(), nullptr) << problem;
  EXPECT_EQ(problem, "");
  EXPECT_EQ(m.size(), size_t{1} << 16);
  EXPECT_TRUE(m.covers(place->offset, 40));
  EXPECT_FALSE(m.covers(place->offset, (1 << 16) - 39));
  EXPECT_FALSE(m.covers((1 << 16) + 4, 0));
  p[10] = 2.5f;
  p[19] = -7.0f;
  float got[10];
  std::memcpy(got, m.data() + place->offset, sizeof(got));
  EXPECT_EQ(got[0], 2.5f);
  EXPECT_EQ(got[9], -7.0f);
  EXPECT_TRUE(free_shared(p));
  std::memcpy(got, m.data() + place->offset, sizeof(got));  // the reader's mapping keeps the file
  EXPECT_EQ(got[0], 2.5f);
}

// What a reader refuses, naming why: another file behind the descriptor (a reused fd, another
// process), a file that could shrink under the mapping, a descriptor that is not there.
TEST(SharedMemory, AMappingOfTheWrongFileIsRefused) {
  void* p = allocate_shared(4096);
  ASSERT_NE(p, nullptr);
  const auto place = locate(p, 4096);
  ASSERT_TRUE(place);
  std::string problem;
  SharedMapping wrong(self_pid(), static_cast<uint64_t>(place->fd), place->inode + 1, &problem);
  EXPECT_EQ(wrong.data(), nullptr);
  EXPECT_NE(problem.find("is not the shared region named"), std::string::npos) << problem;

  const int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 4096), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(unsealed, &st), 0);
  problem.clear();
  SharedMapping shrinkable(self_pid(), static_cast<uint64_t>(unsealed), st.st_ino, &problem);
  EXPECT_EQ(shrinkable.data(), nullptr);
  EXPECT_NE(problem.find("not sealed against shrinking"), std::string::npos) << problem;
  ::close(unsealed);

  problem.clear();
  SharedMapping gone(self_pid(), 1u << 20, place->inode, &problem);
  EXPECT_EQ(gone.data(), nullptr);
  EXPECT_NE(problem.find("/fd/1048576"), std::string::npos) << problem;
  EXPECT_TRUE(free_shared(p));
}

}  // namespace
}  // namespace gossip::shm
