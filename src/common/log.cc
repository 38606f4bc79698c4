#include "common/log.h"

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

void log_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mutex());
  std::fprintf(stderr, "%s%s\n", log_prefix().c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace gossip
