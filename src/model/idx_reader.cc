#include "model/idx_reader.h"

#include <zlib.h>

#include <memory>

#include "common/error.h"

namespace gossip::model {
namespace {

constexpr size_t kMaxPayload = size_t(1) << 32;

struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};

// The whole decompressed file (a plain file reads as itself).
std::vector<uint8_t> inflate_file(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw Error(path, "cannot open data file (is the dataset-fashion-mnist package installed?)");
  gzbuffer(f.get(), 1 << 20);  // zlib's 8 KB default makes inflating the 26 MB of images several times slower
  std::vector<uint8_t> out;
  for (size_t got = 0;;) {
    if (out.size() - got < (1u << 20)) out.resize(std::max<size_t>(out.size() * 2, 1u << 20));
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(out.size() - got, 1u << 30));
    const int n = gzread(f.get(), out.data() + got, chunk);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f.get(), &err);
      throw Error(path, std::string("truncated or corrupt (") + msg + ")");
    }
    if (n == 0) {
      out.resize(got);
      out.shrink_to_fit();  // the doubling left up to twice the bytes, all of them touched
      return out;
    }
    got += size_t(n);
    if (got > kMaxPayload + 64) throw Error(path, "IDX payload too large");
  }
}

uint32_t big_endian(const uint8_t* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
}

}  // namespace

size_t IdxArray::size() const {
  size_t total = 1;
  for (int s : shape) total *= size_t(s);
  return total;
}

IdxArray read_idx(const std::string& path, const std::string& cache_dir) {
  IdxArray out;
  out.file = cached_bytes(cache_dir, path, [&] { return inflate_file(path); });
  const uint8_t* p = out.file->data();
  const size_t bytes = out.file->size();
  if (bytes < 4) throw Error(path, "truncated or corrupt while reading the header (unexpected end of file)");
  if (p[0] != 0 || p[1] != 0) throw Error(path, "not an IDX file (bad magic bytes)");
  if (p[2] != 0x08) throw Error(path, "IDX element type " + std::to_string(p[2]) + " is not unsigned byte");
  const int ndims = p[3];
  if (ndims < 1 || ndims > 4) throw Error(path, "IDX file with " + std::to_string(ndims) + " dimensions");
  const size_t header = 4 + 4 * size_t(ndims);
  if (bytes < header)
    throw Error(path, "truncated or corrupt while reading the dimension sizes (unexpected end of file)");
  size_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t size = big_endian(p + 4 + 4 * d);
    if (size == 0 || size > (1u << 26)) throw Error(path, "implausible IDX dimension " + std::to_string(size));
    out.shape.push_back(static_cast<int>(size));
    total *= size;
    if (total > kMaxPayload) throw Error(path, "IDX payload too large");
  }
  if (bytes - header < total)
    throw Error(path, "truncated or corrupt while reading the payload (" + std::to_string(bytes - header) + " of " +
                          std::to_string(total) + " bytes)");
  out.data = p + header;
  return out;
}

}  // namespace gossip::model
