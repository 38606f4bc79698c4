#include "model/idx_reader.h"

#include <zlib.h>

#include <memory>

#include "common/error.h"

namespace gossip::model {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};

void read_exact(gzFile f, void* dst, size_t bytes, const std::string& path, const char* what) {
  size_t got = 0;
  while (got < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - got, 1u << 30));
    const int n = gzread(f, static_cast<char*>(dst) + got, chunk);
    if (n <= 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw Error(path, std::string("truncated or corrupt while reading the ") + what +
                            (err ? std::string(" (") + msg + ")" : std::string(" (unexpected end of file)")));
    }
    got += static_cast<size_t>(n);
  }
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw Error(path, "cannot open data file (is the dataset-fashion-mnist package installed?)");
  gzbuffer(f.get(), 1 << 20);  // zlib's 8 KB default makes inflating the 26 MB of images several times slower
  uint8_t magic[4];
  read_exact(f.get(), magic, 4, path, "header");
  if (magic[0] != 0 || magic[1] != 0) throw Error(path, "not an IDX file (bad magic bytes)");
  if (magic[2] != 0x08) throw Error(path, "IDX element type " + std::to_string(magic[2]) + " is not unsigned byte");
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4) throw Error(path, "IDX file with " + std::to_string(ndims) + " dimensions");
  IdxArray out;
  size_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    uint8_t b[4];
    read_exact(f.get(), b, 4, path, "dimension sizes");
    const uint32_t size = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
    if (size == 0 || size > (1u << 26)) throw Error(path, "implausible IDX dimension " + std::to_string(size));
    out.shape.push_back(static_cast<int>(size));
    total *= size;
  }
  if (total > (size_t(1) << 32)) throw Error(path, "IDX payload too large");
  out.data.resize(total);
  read_exact(f.get(), out.data.data(), total, path, "payload");
  return out;
}

}  // namespace gossip::model
