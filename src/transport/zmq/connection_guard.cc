#include "transport/zmq/connection_guard.h"

#include <sys/socket.h>

#include <cstring>
#include <sstream>
#include <vector>

namespace gossip::peer {

ConnectionGuard::ConnectionGuard(zmq::context_t& context, zmq::socket_t& router, size_t max_unverified,
                                 Clock::duration idle)
    : router_(&router), monitor_(context, zmq::socket_type::pair), max_unverified_(max_unverified), idle_(idle) {
  const std::string address = "inproc://gossip-connections-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  if (zmq_socket_monitor(router.handle(), address.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED) != 0)
    throw zmq::error_t();
  monitor_.set(zmq::sockopt::linger, 0);
  // libzmq's I/O thread sends the events and would block on a full pipe: never let it fill (the
  // comm thread reads them every loop turn).
  monitor_.set(zmq::sockopt::rcvhwm, 0);
  monitor_.connect(address);
}

ConnectionGuard::~ConnectionGuard() { zmq_socket_monitor(router_->handle(), nullptr, 0); }

void ConnectionGuard::verified(int fd) {
  auto it = open_.find(fd);
  if (it == open_.end()) {
    // ZeroMQ queues a connection's "accepted" event before any of its messages can be read, but a
    // message may be read before that event is: read the events now, or this connection would be
    // entered as unverified after its message had been seen, and closed as idle when no other
    // follows. (Only then: a known connection costs no read of the monitor socket per message.)
    drain_events(Clock::now());
    it = open_.find(fd);
  }
  if (it != open_.end()) it->second.verified = true;
}

void ConnectionGuard::refuse(int fd, const std::string& why, DropLog& drops, const std::string& prefix,
                             Clock::time_point now) {
  ::shutdown(fd, SHUT_RDWR);  // ZeroMQ's engine sees the connection end and closes the descriptor
  open_.erase(fd);
  ++refused_;
  drops.refused(prefix, "closed a connection: " + why, now);
}

// Every queued event in order, so a descriptor closed and reused meanwhile is seen in its last state.
void ConnectionGuard::drain_events(Clock::time_point now) {
  for (;;) {
    zmq::message_t event, address;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) break;
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
    if (event.size() < 6) continue;
    uint16_t kind;
    int32_t value;
    std::memcpy(&kind, event.data(), sizeof(kind));
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof(value));
    if (kind == ZMQ_EVENT_ACCEPTED)
      open_[value] = {now, false};
    else
      open_.erase(value);
  }
}

void ConnectionGuard::read_events(DropLog& drops, const std::string& prefix, Clock::time_point now) {
  drain_events(now);
  std::vector<int> idle;
  std::multimap<Clock::time_point, int> by_age;
  for (const auto& [fd, c] : open_) {
    if (c.verified) continue;
    if (now - c.accepted > idle_) idle.push_back(fd);
    else by_age.emplace(c.accepted, fd);
  }
  std::ostringstream idle_s;
  idle_s << std::chrono::duration<double>(idle_).count();  // "60", "1.5"
  for (int fd : idle) refuse(fd, "no valid message in " + idle_s.str() + " s", drops, prefix, now);
  size_t over = by_age.size() > max_unverified_ ? by_age.size() - max_unverified_ : 0;
  for (auto it = by_age.rbegin(); over > 0 && it != by_age.rend(); ++it, --over)
    refuse(it->second, std::to_string(max_unverified_) + " connections that sent no valid message yet are open already",
           drops, prefix, now);
}

}  // namespace gossip::peer
