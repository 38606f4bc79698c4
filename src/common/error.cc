#include "common/error.h"

namespace gossip {

Error::Error(const std::string& where, const std::string& what)
    : std::runtime_error(where.empty() ? what : where + ": " + what), where_(where) {}

Error::Error(const std::string& what) : std::runtime_error(what) {}

Error::Error(const std::string& where, const std::string& what, int exit_code) : Error(where, what) {
  exit_code_ = exit_code;
}

}  // namespace gossip

#include <cstdio>

namespace gossip {

int guarded_main(int argc, char** argv, int (*body)(int, char**)) {
  try {
    return body(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace gossip
