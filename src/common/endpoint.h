// Endpoint naming shared by every layer that resolves peers.
#pragma once

#include <string>

namespace gossip {

// True for tcp://host:0, an endpoint that binds any free port and is found through a rendezvous.
bool binds_any_port(const std::string& endpoint);

}  // namespace gossip
