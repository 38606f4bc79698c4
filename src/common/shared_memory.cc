#include "common/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace gossip::shm {
namespace {

struct Region {
  size_t bytes = 0;  // mapped (a whole number of pages)
  int fd = -1;
  uint64_t inode = 0;
};

// This process's regions by base address.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Region> regions;
  std::atomic<size_t> count{0};  // regions.size(), read without the lock by free_shared
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: arrays may be freed during static teardown
  return *r;
}

size_t round_to_pages(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* allocate_shared(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t mapped = round_to_pages(bytes);
  const int fd = ::memfd_create("gossip-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(mapped)) == 0 &&
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0 && ::fstat(fd, &st) == 0)
    p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.regions[reinterpret_cast<uintptr_t>(p)] = Region{mapped, fd, static_cast<uint64_t>(st.st_ino)};
  r.count.store(r.regions.size(), std::memory_order_release);
  return p;
}

bool free_shared(void* p) noexcept {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0 || p == nullptr) return false;
  Region region;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.regions.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.regions.end()) return false;
    region = it->second;
    r.regions.erase(it);
    r.count.store(r.regions.size(), std::memory_order_release);
  }
  ::munmap(p, region.bytes);
  ::close(region.fd);
  return true;
}

std::optional<Place> locate(const void* p, size_t bytes) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return std::nullopt;
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.regions.upper_bound(address);
  if (it == r.regions.begin()) return std::nullopt;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return std::nullopt;
  return Place{it->second.fd, it->second.inode, offset};
}

SharedMapping::SharedMapping(uint64_t pid, uint64_t fd, uint64_t inode, std::string* problem) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int own = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (own < 0) {
    *problem = "open " + path + ": " + std::strerror(errno);
    return;
  }
  struct stat st {};
  const int seals = ::fcntl(own, F_GET_SEALS);
  if (::fstat(own, &st) != 0) {
    *problem = "fstat " + path + ": " + std::strerror(errno);
  } else if (static_cast<uint64_t>(st.st_ino) != inode || !S_ISREG(st.st_mode)) {
    *problem = path + " is not the shared region named (another file: a reused descriptor or another process)";
  } else if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    *problem = path + " is not sealed against shrinking (a read of it could fault)";
  } else if (st.st_size <= 0) {
    *problem = path + " is empty";
  } else {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, own, 0);
    if (p == MAP_FAILED) {
      *problem = "mmap " + path + ": " + std::strerror(errno);
    } else {
      base_ = p;
      size_ = static_cast<size_t>(st.st_size);
      inode_ = inode;
    }
  }
  ::close(own);  // the mapping keeps the file
}

SharedMapping::~SharedMapping() {
  if (base_) ::munmap(base_, size_);
}

}  // namespace gossip::shm
