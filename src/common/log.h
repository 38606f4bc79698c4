// Line-oriented logging to stderr. One call writes one whole line, so lines of several threads
// (trainer and comm thread) never interleave.
#pragma once

#include <sstream>
#include <string>

namespace gossip {

void set_log_prefix(const std::string& prefix);
void log_line(const std::string& line);

// log("step ", s, " loss ", l) — concatenates its arguments with operator<<.
template <typename... Args>
void log(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  log_line(out.str());
}

}  // namespace gossip
