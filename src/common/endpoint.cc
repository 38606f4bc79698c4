#include "common/endpoint.h"

namespace gossip {

bool binds_any_port(const std::string& ep) {
  return ep.rfind("tcp://", 0) == 0 && ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0;
}

}  // namespace gossip
