// std::vector's allocator for the large arrays of a data set (tens to hundreds of MB). Faulting
// such an array in 4 KiB pages is slow on the VMs measured here (188 MB of floats: 0.46-0.59 s to
// allocate and zero, 2026-12-03), and a joiner waits through it before its first step; so arrays
// of 2 MB and more ask the kernel for transparent huge pages (madvise; where the kernel has none
// to give, nothing changes), and new elements are left uninitialised instead of zeroed: every
// loader writes them all.
#pragma once

#include <sys/mman.h>


#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace gossip::model {

template <class T>
struct LargeArrayAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t(2) << 20;

  LargeArrayAllocator() = default;
  template <class U>
  LargeArrayAllocator(const LargeArrayAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    void* p = nullptr;
    if (bytes >= kHugePage) {
      if (::posix_memalign(&p, kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage) != 0) throw std::bad_alloc();
      ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: its failure changes nothing
    } else {
      p = std::malloc(bytes ? bytes : 1);
      if (!p) throw std::bad_alloc();
    }
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }

  // resize() leaves new elements uninitialised (default-initialised); other constructions as usual.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const LargeArrayAllocator<U>&) const { return true; }
};

template <class T>
using LargeArray = std::vector<T, LargeArrayAllocator<T>>;

}  // namespace gossip::model
