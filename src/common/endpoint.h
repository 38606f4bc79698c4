// Endpoint naming shared by every layer that resolves peers.
#pragma once

#include <string>

namespace gossip {

// True for tcp://host:0, an endpoint that binds any free port and is found through a rendezvous.
bool binds_any_port(const std::string& endpoint);

// DIR/peer-ID followed by `suffix`: how every per-peer file of a run is named (rendezvous
// files, ipc sockets, checkpoints, CurveZMQ keys).
std::string peer_path(const std::string& dir, int id, const std::string& suffix = "");

}  // namespace gossip
