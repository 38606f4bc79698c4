#include "model/data_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/hash.h"
#include "common/log.h"

namespace gossip::model {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'G', 'O', 'S', 'S', 'I', 'P', 'C', '\1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPayloadOffset = 4096;  // the payload starts on a page of its own
constexpr size_t kMaxIdentity = kPayloadOffset - 64;

// The fixed part of a cache file's header; the identity follows it, the payload starts at
// kPayloadOffset. Native byte order: a cache file never leaves its host.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t identity_bytes;
  uint64_t payload_bytes;
  uint32_t payload_crc;
  uint32_t header_crc;  // over the fields above (with this one zero) and the identity
};

uint32_t crc_of(const void* p, size_t n, uint32_t crc = 0) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(p), n));
}

uint32_t header_crc(Header h, const std::string& identity) {
  h.header_crc = 0;
  return crc_of(identity.data(), identity.size(), crc_of(&h, sizeof h));
}

class VectorBytes final : public Bytes {
 public:
  explicit VectorBytes(std::vector<uint8_t> v) : v_(std::move(v)) {}
  const uint8_t* data() const override { return v_.data(); }
  size_t size() const override { return v_.size(); }
  bool shared() const override { return false; }

 private:
  std::vector<uint8_t> v_;
};

class MappedBytes final : public Bytes {
 public:
  MappedBytes(void* base, size_t length) : base_(base), length_(length) {}
  ~MappedBytes() override { ::munmap(base_, length_); }
  MappedBytes(const MappedBytes&) = delete;
  MappedBytes& operator=(const MappedBytes&) = delete;
  const uint8_t* data() const override { return static_cast<const uint8_t*>(base_) + kPayloadOffset; }
  size_t size() const override { return length_ - kPayloadOffset; }
  bool shared() const override { return true; }

 private:
  void* base_;
  size_t length_;
};

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// "path size mtime": a source that changes gets another cache entry.
std::string identity_of(const std::string& source) {
  struct stat st {};
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(source), ec);
  if (ec || ::stat(abs.c_str(), &st) != 0) return {};
  return abs.string() + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// Where the entry of `source`, whose identity is `identity`, lives in `cache_dir`.
std::string entry_path(const std::string& cache_dir, const std::string& source, const std::string& identity) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(identity)));
  return cache_dir + "/" + fs::path(source).filename().string() + "-" + hex + ".cache";
}

// The mapped payload of `path` when its header and payload check out; else null and *why.
std::shared_ptr<const Bytes> open_entry(const std::string& path, const std::string& identity, std::string* why) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    *why = errno == ENOENT ? "" : std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || size_t(st.st_size) < kPayloadOffset) {
    *why = "shorter than its header";
    return nullptr;
  }
  const size_t length = size_t(st.st_size);
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, f.fd, 0);
  if (base == MAP_FAILED) {
    *why = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  auto bytes = std::make_shared<MappedBytes>(base, length);
  Header h;
  std::memcpy(&h, base, sizeof h);
  const char* id = static_cast<const char*>(base) + sizeof h;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion)
    *why = "not a gossip cache file of this version";
  else if (h.identity_bytes != identity.size() || std::memcmp(id, identity.data(), identity.size()) != 0)
    *why = "made from another source";
  else if (h.header_crc != header_crc(h, identity))
    *why = "header checksum mismatch";
  else if (h.payload_bytes != length - kPayloadOffset)
    *why = "payload length " + std::to_string(length - kPayloadOffset) + " where the header says " +
           std::to_string(h.payload_bytes);
  else if (crc_of(bytes->data(), bytes->size()) != h.payload_crc)
    *why = "payload checksum mismatch";
  else
    return bytes;
  return nullptr;
}

// Writes `payload` under `path` (through a temporary file renamed over it); false and *why on failure.
bool write_entry(const std::string& path, const std::string& identity, const std::vector<uint8_t>& payload,
                 std::string* why) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (f.fd < 0) {
    *why = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  std::vector<uint8_t> head(kPayloadOffset, 0);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.identity_bytes = static_cast<uint32_t>(identity.size());
  h.payload_bytes = payload.size();
  h.payload_crc = crc_of(payload.data(), payload.size());
  h.header_crc = header_crc(h, identity);
  std::memcpy(head.data(), &h, sizeof h);
  std::memcpy(head.data() + sizeof h, identity.data(), identity.size());
  bool ok = true;
  for (const auto& [p, n] : {std::pair<const uint8_t*, size_t>{head.data(), head.size()}, std::pair{payload.data(), payload.size()}})
    for (size_t done = 0; ok && done < n;) {
      const ssize_t w = ::write(f.fd, p + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ok = false;
      else done += size_t(w);
    }
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    *why = "cannot write " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

// The directory, made if missing; false and *why when it cannot be made or is not ours alone.
bool usable_dir(const std::string& dir, std::string* why) {
  std::error_code ec;
  if (fs::create_directories(dir, ec)) fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  struct stat st {};
  if (ec || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = "cannot make the directory" + (ec ? " (" + ec.message() + ")" : std::string());
    return false;
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    *why = "the directory is not owned by this user alone (others could plant entries)";
    return false;
  }
  return true;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("GOSSIP_CACHE_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/gossip";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/gossip";
  return {};
}

std::string cache_file_for(const std::string& cache_dir, const std::string& source) {
  return entry_path(cache_dir, source, identity_of(source));
}

std::shared_ptr<const Bytes> cached_bytes(const std::string& cache_dir, const std::string& source,
                                          const std::function<std::vector<uint8_t>()>& build) {
  const std::string identity = identity_of(source);
  std::string why;
  if (cache_dir.empty() || identity.empty() || identity.size() > kMaxIdentity) return std::make_shared<VectorBytes>(build());
  if (!usable_dir(cache_dir, &why)) {
    log("data cache ", cache_dir, ": ", why, "; keeping ", source, " in private memory");
    return std::make_shared<VectorBytes>(build());
  }
  const std::string path = entry_path(cache_dir, source, identity);
  if (auto hit = open_entry(path, identity, &why)) return hit;
  // A miss: build under the lock, unless a peer that held it first has built the entry meanwhile.
  Fd lock(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  while (lock.fd >= 0 && ::flock(lock.fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  if (auto hit = open_entry(path, identity, &why)) return hit;
  if (!why.empty()) log("data cache ", path, ": ", why, "; rebuilding it");
  std::vector<uint8_t> payload = build();
  if (write_entry(path, identity, payload, &why)) {
    if (auto made = open_entry(path, identity, &why)) return made;
    log("data cache ", path, ": ", why, " right after writing it");
  } else {
    log("data cache: ", why, "; keeping ", source, " in private memory");
  }
  return std::make_shared<VectorBytes>(std::move(payload));
}

}  // namespace gossip::model
