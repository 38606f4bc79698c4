#include "common/endpoint.h"

#include <net/if.h>

#include "common/log.h"

namespace gossip {

std::optional<std::string> endpoint_problem(const std::string& ep) {
  for (const char* scheme : {"ipc://", "inproc://"})
    if (ep.rfind(scheme, 0) == 0)
      return ep.size() > std::string(scheme).size() ? std::nullopt
                                                    : std::optional<std::string>("has no path after " + std::string(scheme));
  if (ep.rfind("tcp://", 0) != 0) return "must start with tcp://, ipc:// or inproc://";
  const size_t colon = ep.rfind(':');
  if (colon < 6) return "has no port (expected tcp://HOST:PORT)";
  const std::string host = ep.substr(6, colon - 6), port = ep.substr(colon + 1);
  if (host.empty()) return "has no host (expected tcp://HOST:PORT)";
  const std::string name_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
  if (host.front() == '[') {  // an IPv6 address, perhaps with a zone: [fe80::1%eth0]
    if (host.size() < 3 || host.back() != ']' || host.find_first_not_of(name_chars + ":%", 1) != host.size() - 1)
      return "has a malformed IPv6 host '" + escape_for_log(host) + "' (expected [ADDRESS])";
  } else if (host != "*" && host.find_first_not_of(name_chars) != std::string::npos) {
    return "has a malformed host '" + escape_for_log(host) + "'";
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return "has port '" + escape_for_log(port) + "' (expected a number in 0..65535)";
  return std::nullopt;
}

std::optional<std::string> peer_endpoint_problem(const std::string& ep) {
  if (ep.rfind("tcp://", 0) != 0 && ep.rfind("ipc://", 0) != 0) return "must start with tcp:// or ipc://";
  return endpoint_problem(ep);
}

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
