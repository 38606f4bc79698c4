// Byte-level text for language models: a list of files concatenated in order (one byte is one
// token, vocabulary 256), its last part held out for validation; each peer trains on its own
// contiguous part of the rest (re-split when the membership changes) and draws random windows
// of context + 1 bytes from it (inputs and next-byte targets).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gossip::model {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";  // Debian's `fortunes`

struct TextCorpus {
  std::vector<uint8_t> train;       // the first (1 − validation_fraction) of the bytes
  std::vector<uint8_t> validation;  // the rest
  std::vector<std::string> files;   // in the order they were read
};

// Every regular file of `dir` (not a symbolic link: Debian's NAME.u8 are links to NAME) whose name
// does not end in ".dat" (strfile's indexes), sorted by name; throws gossip::Error naming `dir` when it cannot be read or holds no such file.
std::vector<std::string> text_files_in(const std::string& dir);

// Reads and concatenates `files`; throws gossip::Error naming a file that is missing, unreadable
// or empty, or when the validation or training part would be shorter than `min_part` bytes.
TextCorpus load_text(const std::vector<std::string>& files, double validation_fraction = 0.05, size_t min_part = 2);

struct BytePart {
  size_t begin = 0, end = 0;  // [begin, end) of the training bytes
};
// Peer `rank` of `n`: near-equal contiguous parts that tile [0, bytes) without overlap.
BytePart text_part(size_t bytes, int n, int rank);

// The starts of `batch` windows of context + 1 bytes drawn uniformly from `part` of a text of
// `text_bytes` bytes (the part must hold at least one window).
void draw_windows(size_t text_bytes, BytePart part, int context, int batch, std::mt19937_64& rng, int64_t* starts);

}  // namespace gossip::model
