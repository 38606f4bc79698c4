// Line-oriented logging to stderr. One call writes one whole line, so lines of several threads
// (trainer and comm thread) never interleave.
#pragma once

#include <sstream>
#include <string>

namespace gossip {

void set_log_prefix(const std::string& prefix);
void log_line(const std::string& line);

// A byte that prints as itself on a terminal and in a log line: 0x20 (space) to 0x7e ('~').
inline bool is_printable_ascii(unsigned char c) { return c >= 0x20 && c <= 0x7e; }
// A byte as two lowercase hex digits ("0a").
std::string hex_byte(unsigned char c);

// Bytes that came from outside (a ZeroMQ identity, an endpoint in a message, a file) made safe to
// print: printable ASCII stays, a backslash and every other byte become \\ and \xNN (so no
// newline, carriage return or terminal escape reaches the log), and past `max_bytes` input bytes
// the rest is cut, saying how much was left out.
std::string escape_for_log(const std::string& bytes, size_t max_bytes = 64);

// A number as people write it in a message (a duration, a flag's value): "60", "2.5", "0.05",
// "-3" (six significant digits, no trailing zeros), not std::to_string's "60.000000".
std::string number_text(double v);

// log("step ", s, " loss ", l) — concatenates its arguments with operator<<.
template <typename... Args>
void log(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  log_line(out.str());
}

}  // namespace gossip
