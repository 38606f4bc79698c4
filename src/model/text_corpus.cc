#include "model/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace gossip::model {

namespace fs = std::filesystem;

std::vector<std::string> text_files_in(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    // Not through links: Debian's NAME.u8 are links to NAME, the same text again.
    if (fs::is_regular_file(it->symlink_status(ec)) && p.extension() != ".dat") files.push_back(p.string());
  }
  if (ec) throw Error(dir, "cannot list the text directory: " + ec.message() + " (is Debian's fortunes installed?)");
  if (files.empty()) throw Error(dir, "no text files (every file but *.dat is read)");
  std::sort(files.begin(), files.end());
  return files;
}

TextCorpus load_text(const std::vector<std::string>& files, double validation_fraction, size_t min_part) {
  if (files.empty()) throw Error("text data", "no files given");
  if (!(validation_fraction > 0 && validation_fraction < 1))
    throw Error("text data", "the validation fraction must be in (0, 1)");
  TextCorpus c;
  std::vector<uint8_t> all;
  for (const std::string& f : files) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) throw Error(f, "not a readable text file (missing, or not a regular file)");
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error(f, "cannot open the text file");
    const size_t before = all.size();
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(f, "read error in the text file");
    if (all.size() == before) throw Error(f, "the text file is empty");
    c.files.push_back(f);
  }
  const size_t split = all.size() - static_cast<size_t>(static_cast<double>(all.size()) * validation_fraction);
  if (split < min_part || all.size() - split < min_part)
    throw Error(files.front(), "the text (" + std::to_string(all.size()) + " bytes in " + std::to_string(files.size()) +
                                   " files) is too short for a training and a validation part of " +
                                   std::to_string(min_part) + " bytes each");
  c.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split));
  c.validation.assign(all.begin() + static_cast<std::ptrdiff_t>(split), all.end());
  return c;
}

BytePart text_part(size_t bytes, int n, int rank) {
  const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(rank);
  return {bytes * ur / un, bytes * (ur + 1) / un};
}

void draw_windows(size_t text_bytes, BytePart part, int context, int batch, std::mt19937_64& rng, int64_t* starts) {
  const size_t window = static_cast<size_t>(context) + 1;
  if (part.end > text_bytes || part.begin > part.end || part.end - part.begin < window)
    throw Error("text data", "a part of " + std::to_string(part.end - part.begin) + " bytes cannot hold a window of " +
                                 std::to_string(window) + " (context + 1) bytes");
  std::uniform_int_distribution<size_t> start(part.begin, part.end - window);
  for (int b = 0; b < batch; ++b) starts[b] = static_cast<int64_t>(start(rng));
}

}  // namespace gossip::model
