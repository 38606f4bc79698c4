// Caps the connections a peer's ROUTER keeps open for clients that have not proved themselves
// yet. ZeroMQ accepts every TCP connection and keeps it as long as the client likes, so without
// security anyone could hold thousands of them (each costs buffers and a file descriptor). The
// guard reads the socket's monitor events (accepted / disconnected, with the file descriptor): a
// connection counts as unverified until a valid message arrives on it; past `max_unverified`
// the newest is shut down (ZeroMQ then closes it) and counted, and an unverified one idle for
// `idle` is closed too. Comm thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <zmq.hpp>

#include "transport/zmq/drop_log.h"

namespace gossip::peer {

class ConnectionGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // Monitors `router` (which must outlive the guard) through an inproc PAIR socket.
  ConnectionGuard(zmq::context_t& context, zmq::socket_t& router, size_t max_unverified, Clock::duration idle);
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  zmq::socket_t& events() { return monitor_; }  // poll it for ZMQ_POLLIN, then call read_events
  // Reads the queued events and refuses what is over the cap (logged through `drops`).
  void read_events(DropLog& drops, const std::string& prefix, Clock::time_point now);
  // The connection with this file descriptor (a received frame's ZMQ_SRCFD) sent a valid message.
  void verified(int fd);
  uint64_t refused() const { return refused_; }

 private:
  void drain_events(Clock::time_point now);  // enters the queued accepted / closed events
  void refuse(int fd, const std::string& why, DropLog& drops, const std::string& prefix, Clock::time_point now);

  zmq::socket_t* router_;  // owned by the comm thread's loop, outlives the guard
  zmq::socket_t monitor_;
  size_t max_unverified_;
  Clock::duration idle_;
  struct Connection {
    Clock::time_point accepted;
    bool verified = false;
  };
  std::map<int, Connection> open_;  // by file descriptor
  uint64_t refused_ = 0;
};

}  // namespace gossip::peer
