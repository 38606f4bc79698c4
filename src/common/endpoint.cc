#include "common/endpoint.h"

namespace gossip {

bool binds_any_port(const std::string& ep) {
  return ep.rfind("tcp://", 0) == 0 && ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0;
}

std::string peer_path(const std::string& dir, int id, const std::string& suffix) {
  return dir + "/peer-" + std::to_string(id) + suffix;
}

}  // namespace gossip
