// Decompressed data files held once per host: the bytes a loader makes from a source file (an
// IDX array inflated from its .gz) are written once into a cache file and every peer maps that
// file read-only, so N peers of one machine share one copy in the page cache instead of holding
// N private ones.
//
// A cache file is named by its source's identity (absolute path, size, modification time): a
// changed source gets a new entry. It carries a header (magic, version, that identity, the
// payload's length and CRC-32) checked in full on every open; a file that fails any check is
// rebuilt, never used. Building is serialised by an flock on a lock file beside it, so peers
// that start together build it once and all map the same file. Without a usable cache directory
// (none given, or it cannot be created or written) the bytes stay in private memory instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gossip::model {

// Read-only bytes, mapped from a cache file or held in memory; movable, shareable through
// shared_ptr.
class Bytes {
 public:
  virtual ~Bytes() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  virtual bool shared() const = 0;  // true when mapped from a cache file
};

// $GOSSIP_CACHE_DIR, else $XDG_CACHE_HOME/gossip, else $HOME/.cache/gossip, else empty.
std::string default_cache_dir();

// The bytes `build` makes from the file `source`, through the cache in `cache_dir` (empty: no
// cache). `build` runs only on a miss and its exceptions pass through; problems with the cache
// itself (a directory that cannot be made, a full disk, a corrupt entry) are logged, never thrown.
std::shared_ptr<const Bytes> cached_bytes(const std::string& cache_dir, const std::string& source,
                                          const std::function<std::vector<uint8_t>()>& build);

// The cache file `cached_bytes` uses for `source` (tests corrupt it).
std::string cache_file_for(const std::string& cache_dir, const std::string& source);

}  // namespace gossip::model
