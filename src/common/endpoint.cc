#include "common/endpoint.h"

#include <net/if.h>

namespace gossip {

bool binds_any_port(const std::string& ep) {
  return ep.rfind("tcp://", 0) == 0 && ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0;
}

std::string endpoint_host(const std::string& ep) {
  if (ep.rfind("tcp://", 0) != 0) return "";
  const size_t colon = ep.rfind(':');  // the scheme's, at least
  return colon < 6 ? ep.substr(6) : ep.substr(6, colon - 6);
}

bool is_loopback(const std::string& ep) {
  if (ep.rfind("ipc://", 0) == 0 || ep.rfind("inproc://", 0) == 0) return true;
  if (ep.rfind("tcp://", 0) != 0) return false;
  const std::string host = endpoint_host(ep);
  if (host == "localhost" || host == "[::1]") return true;
  return host.rfind("127.", 0) == 0 && host.find_first_not_of("0123456789.") == std::string::npos;
}

std::string listen_address(const std::string& ep) {
  const size_t colon = ep.rfind(':');
  if (ep.rfind("tcp://", 0) != 0 || colon < 6) return ep;  // not tcp, or no port
  const std::string host = endpoint_host(ep);
  if (host.empty() || host == "*" || host.front() == '[') return ep;  // any interface, or IPv6
  if (host == "localhost") return "tcp://127.0.0.1" + ep.substr(colon);
  // An address (or what tries to be one: its bind fails, naming it) or an interface name.
  if (host.find_first_not_of("0123456789.") == std::string::npos || ::if_nametoindex(host.c_str()) != 0) return ep;
  return "tcp://*" + ep.substr(colon);
}

std::string peer_path(const std::string& dir, int id, const std::string& suffix) {
  return dir + "/peer-" + std::to_string(id) + suffix;
}

}  // namespace gossip
