// The comm thread's state of one neighbour it sends to (internal to src/transport/zmq).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "transport/zmq/zmq_transport.h"

namespace gossip::peer {

struct ZmqTransport::Link {
  std::optional<zmq::socket_t> dealer;
  std::deque<OutMessage> pending;
  Clock::time_point first_wait{};
  std::map<uint64_t, OutMessage> lent;  // single copy: chunks the neighbour has yet to copy, by token
  uint64_t next_token = 1;
  bool lend_refused = false;            // the neighbour could not read us: send over the socket
  std::string dialled;                  // the endpoint the dealer connected to
};

}  // namespace gossip::peer
