// ZmqTransport's join requests: queued by the training thread (send_join, forget_join_requests),
// each sent by the comm thread over a one-off connection of its own.
#include <zmq.hpp>

#include "transport/zmq/frames.h"
#include "transport/zmq/zmq_transport.h"

namespace gossip::peer {

void ZmqTransport::send_join(const std::string& contact, const std::string& contact_key, const std::string& text,
                             uint64_t nonce) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    joins_.push_back({contact, contact_key, text, nonce});
  }
  wake();
}

void ZmqTransport::forget_join_requests() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    joins_.clear();
    forget_joins_ = true;
  }
  wake();
}

// Sends each join request over a one-off connection of its own.
void ZmqTransport::send_join_requests(const std::deque<PendingJoin>& joins) {
  for (const PendingJoin& j : joins) {  // a one-off connection per request
    const std::string json = pad_text(j.text);
    zmq::socket_t dealer(context_, zmq::socket_type::dealer);
    // One identity per connection: a rejoin sends one request through several tries, and the
    // ROUTER would park a second connection under an identity already in use, unread.
    dealer.set(zmq::sockopt::routing_id, "j" + std::to_string(j.nonce) + "." + std::to_string(join_connections_++));
    dealer.set(zmq::sockopt::linger, 1000);
    if (!options_.curve_secret.empty()) {
      dealer.set(zmq::sockopt::curve_serverkey, j.contact_key);
      dealer.set(zmq::sockopt::curve_publickey, options_.curve_public);
      dealer.set(zmq::sockopt::curve_secretkey, options_.curve_secret);
    }
    dealer.connect(j.contact);
    Header h;
    h.kind = MessageKind::kJoin;
    h.payload_bytes = static_cast<uint32_t>(json.size());
    h.total_floats = json.size() / sizeof(float);
    send_frames(dealer, h, json.data(), json.size());  // queued on the new connection's pipe
    join_dealers_.push_back(std::move(dealer));
  }
}

}  // namespace gossip::peer
