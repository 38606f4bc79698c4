#include "common/error.h"

namespace gossip {

Error::Error(const std::string& where, const std::string& what)
    : std::runtime_error(where.empty() ? what : where + ": " + what), where_(where) {}

Error::Error(const std::string& what) : std::runtime_error(what) {}

}  // namespace gossip
