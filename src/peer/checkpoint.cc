#include "peer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "wire/wire_format.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

constexpr char kFileMagic[8] = {'G', 'S', 'S', 'P', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

// Fixed little-endian layout (x86 and ARM both are): magic, version, epoch, rank, peers, step,
// three float counts, the three arrays, then the CRC32C of everything before it.
struct Fixed {
  char magic[8];
  uint32_t version, epoch, rank, peers;
  int64_t step;
  uint64_t n_params, n_optimizer, n_extra;
};

void append(std::string& out, const void* p, size_t bytes) { out.append(static_cast<const char*>(p), bytes); }

void write_all(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path, std::string("cannot write the checkpoint: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

void fsync_or_throw(int fd, const std::string& path) {
  if (::fsync(fd) != 0) throw Error(path, std::string("fsync failed: ") + std::strerror(errno));
}

// Member `id`'s checkpoint files of one kind (epoch 0, or `later` epochs): step and file name,
// newest first.
std::vector<std::pair<int64_t, std::string>> files_of(const std::string& dir, int id, bool later) {
  std::vector<std::pair<int64_t, std::string>> files;
  std::error_code ec;
  const std::regex name("peer-" + std::to_string(id) + (later ? R"(\.epoch-\d+)" : "") + R"(\.step-(\d+)\.ckpt)");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::smatch m;
    const std::string file = it->path().filename().string();
    if (std::regex_match(file, m, name)) files.emplace_back(std::stoll(m[1]), file);
  }
  std::sort(files.rbegin(), files.rend());
  return files;
}

std::vector<int64_t> steps_of(const std::vector<std::pair<int64_t, std::string>>& files) {
  std::vector<int64_t> steps;
  for (const auto& f : files) steps.push_back(f.first);
  return steps;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int id, int64_t step, uint32_t epoch) {
  const std::string later = epoch ? ".epoch-" + std::to_string(epoch) : "";
  return peer_path(dir, id, later + ".step-" + std::to_string(step) + ".ckpt");
}

void prepare_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir, "cannot create the checkpoint directory: " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(dir, std::string("cannot write checkpoints in this directory: ") + std::strerror(errno));
}

void write_checkpoint(const std::string& dir, int id, const Checkpoint& c) {
  prepare_checkpoint_dir(dir);
  Fixed f{};
  std::memcpy(f.magic, kFileMagic, sizeof(kFileMagic));
  f.version = kVersion;
  f.epoch = c.epoch;
  f.rank = static_cast<uint32_t>(c.rank);
  f.peers = static_cast<uint32_t>(c.peers);
  f.step = c.step;
  f.n_params = c.params.size();
  f.n_optimizer = c.optimizer_state.size();
  f.n_extra = c.extra.size();
  std::string bytes;
  bytes.reserve(sizeof(f) + 4 * (c.params.size() + c.optimizer_state.size() + c.extra.size()) + 4);
  append(bytes, &f, sizeof(f));
  append(bytes, c.params.data(), c.params.size() * sizeof(float));
  append(bytes, c.optimizer_state.data(), c.optimizer_state.size() * sizeof(float));
  append(bytes, c.extra.data(), c.extra.size() * sizeof(float));
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  append(bytes, &crc, sizeof(crc));

  const std::string path = checkpoint_path(dir, id, c.step, c.epoch), tmp = path + ".tmp";
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(tmp, std::string("cannot create the checkpoint: ") + std::strerror(errno));
    try {
      write_all(fd, bytes, tmp);
      fsync_or_throw(fd, tmp);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path, std::string("rename failed: ") + std::strerror(errno));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename itself durable
    ::fsync(dfd);
    ::close(dfd);
  }
  // Of this kind, the file just written and the newest before it stay; files of later steps were
  // left by the run this one resumed from before them (a timeline given up) and go too.
  int kept = 0;
  std::error_code ec;
  for (const auto& [step, file] : files_of(dir, id, c.epoch != 0)) {
    const bool keep = step <= c.step && kept < kCheckpointsKept;
    kept += keep;
    if (!keep) fs::remove(fs::path(dir) / file, ec);
  }
}

std::vector<int64_t> list_checkpoints(const std::string& dir, int id) { return steps_of(files_of(dir, id, false)); }

std::vector<int64_t> list_later_checkpoints(const std::string& dir, int id) {
  return steps_of(files_of(dir, id, true));
}

std::optional<Checkpoint> read_checkpoint(const std::string& path, std::string* problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *problem = std::string("cannot open it: ") + std::strerror(errno);
    return std::nullopt;
  }
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  Fixed f{};
  if (bytes.size() < sizeof(f) + 4) {
    *problem = "only " + std::to_string(bytes.size()) + " bytes (truncated)";
    return std::nullopt;
  }
  std::memcpy(&f, bytes.data(), sizeof(f));
  if (std::memcmp(f.magic, kFileMagic, sizeof(kFileMagic)) != 0) {
    *problem = "not a gossip checkpoint (bad magic)";
    return std::nullopt;
  }
  if (f.version != kVersion) {
    *problem = "checkpoint format version " + std::to_string(f.version) + " (this build reads " +
               std::to_string(kVersion) + ")";
    return std::nullopt;
  }
  const uint64_t floats = f.n_params + f.n_optimizer + f.n_extra;
  if (f.n_params > bytes.size() || f.n_optimizer > bytes.size() || f.n_extra > bytes.size() ||
      bytes.size() != sizeof(f) + floats * sizeof(float) + 4) {
    *problem = "size " + std::to_string(bytes.size()) + " bytes does not match its header (truncated?)";
    return std::nullopt;
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  if (crc32c(bytes.data(), bytes.size() - 4) != stored) {
    *problem = "checksum mismatch (damaged)";
    return std::nullopt;
  }
  Checkpoint c;
  c.step = f.step;
  c.epoch = f.epoch;
  c.rank = static_cast<int>(f.rank);
  c.peers = static_cast<int>(f.peers);
  const char* p = bytes.data() + sizeof(f);
  auto take = [&p](std::vector<float>& v, uint64_t n) {
    v.resize(n);
    if (n) std::memcpy(v.data(), p, n * sizeof(float));
    p += n * sizeof(float);
  };
  take(c.params, f.n_params);
  take(c.optimizer_state, f.n_optimizer);
  take(c.extra, f.n_extra);
  return c;
}

std::optional<Checkpoint> newest_checkpoint(const std::string& dir, int rank) {
  for (int64_t step : list_checkpoints(dir, rank)) {
    std::string problem;
    const std::string path = checkpoint_path(dir, rank, step);
    if (std::optional<Checkpoint> c = read_checkpoint(path, &problem)) return c;
    log("checkpoint ", path, " skipped: ", problem);
  }
  return std::nullopt;
}

void check_resumable(const Checkpoint& c, const std::string& source, size_t floats, int rank, int peers,
                     int64_t total_steps) {
  if (c.params.size() != floats)
    throw Error(source, "checkpoint holds " + std::to_string(c.params.size()) + " parameters, this model has " +
                            std::to_string(floats) + ": another model shape");
  if (c.rank != rank || c.peers != peers || c.epoch != 0)
    throw Error(source, "checkpoint is of rank " + std::to_string(c.rank) + " of " + std::to_string(c.peers) +
                            " in membership epoch " + std::to_string(c.epoch) + ", this is rank " + std::to_string(rank) +
                            " of " + std::to_string(peers) + " in the YAML's membership (epoch 0)");
  if (c.step < 0 || c.step > total_steps)
    throw Error(source, "checkpoint is at step " + std::to_string(c.step) + ", outside this run's " +
                            std::to_string(total_steps) + " steps");
}

}  // namespace gossip::peer
