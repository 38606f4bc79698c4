#include "common/log.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace gossip {
namespace {
std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}
std::string& log_prefix() {
  static std::string p;
  return p;
}
}  // namespace

void set_log_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(log_mutex());
  log_prefix() = prefix;
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

void log_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mutex());
  std::fprintf(stderr, "%s%s\n", log_prefix().c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace gossip

namespace gossip {

std::string hex_byte(unsigned char c) {
  static const char kHex[] = "0123456789abcdef";
  return {kHex[c >> 4], kHex[c & 15]};
}

std::string escape_for_log(const std::string& bytes, size_t max_bytes) {
  std::string out;
  const size_t shown = std::min(bytes.size(), max_bytes);
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (is_printable_ascii(c)) {
      out += static_cast<char>(c);
    } else {
      out += "\\x" + hex_byte(c);
    }
  }
  if (shown < bytes.size()) out += "...(" + std::to_string(bytes.size() - shown) + " more bytes)";
  return out;
}

}  // namespace gossip
