// Memory that other processes of this user on this host may map read-only: single copy's shared
// regions. A lender's parameter buffer allocated here (a sealed memfd) is folded by its readers
// straight out of their mapping of it, with no copy on either side; anything else a lender lends
// is copied out of its memory with process_vm_readv as before (transport/zmq/single_copy.cc).
//
// The lender's side is a process-wide registry (allocate_shared, free_shared, locate); the
// reader's side is SharedMapping, which opens the lender's memfd through /proc/<pid>/fd/<fd> and
// checks, before it maps anything, that it is the file named (its inode) and that it cannot
// shrink (F_SEAL_SHRINK), so no read of the mapping can fault however the lender behaves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gossip::shm {

// `bytes` of zeroed memory in a memfd of its own, sealed against shrinking and growing, mapped
// read-write and aligned to a page; nullptr when the system will not give one (the caller then
// allocates plain memory). Freed only with free_shared.
void* allocate_shared(size_t bytes);
// Unmaps and closes a region from allocate_shared: true; false (and nothing done) for any other
// pointer. Cheap while no region exists.
bool free_shared(void* p) noexcept;

// Where a buffer lies in this process's shared regions: the memfd, its inode and the offset of
// the first byte. nullopt unless all of [p, p + bytes) is inside one region.
struct Place {
  int fd = -1;
  uint64_t inode = 0;
  uint64_t offset = 0;
};
std::optional<Place> locate(const void* p, size_t bytes);

// A read-only mapping of another process's shared region (or this one's: the tests).
class SharedMapping {
 public:
  // Maps memfd `fd` of process `pid`; throws nothing: on failure `problem` says why and the
  // mapping is empty (data() null).
  SharedMapping(uint64_t pid, uint64_t fd, uint64_t inode, std::string* problem);
  ~SharedMapping();
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  const uint8_t* data() const { return static_cast<const uint8_t*>(base_); }
  size_t size() const { return size_; }
  uint64_t inode() const { return inode_; }
  // Whether [offset, offset + bytes) lies inside the mapping.
  bool covers(uint64_t offset, uint64_t bytes) const { return offset <= size_ && bytes <= size_ - offset; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  uint64_t inode_ = 0;
};

}  // namespace gossip::shm
