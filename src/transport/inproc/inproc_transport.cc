#include "transport/inproc/inproc_transport.h"

#include <cstring>

#include "common/error.h"

namespace gossip::peer {

InprocFabric::InprocFabric(int n) {
  for (int i = 0; i < n; ++i) boxes_.push_back(std::make_unique<Mailbox>());
}

void InprocTransport::send(int peer, OutMessage m) {
  if (peer < 0 || peer >= size()) throw Error("inproc transport", "no peer " + std::to_string(peer));
  m.header.sender = static_cast<uint32_t>(rank_);
  m.header.payload_bytes = static_cast<uint32_t>(m.bytes());
  // The fake copies: a receiver may hold a chunk after its sender has failed and freed the
  // buffer, which real sends never allow (the ZeroMQ transport has the bytes out first).
  auto copy = std::make_shared<std::vector<float>>((m.bytes() + sizeof(float) - 1) / sizeof(float));
  if (m.count) std::memcpy(copy->data(), m.data, m.bytes());
  InMessage in;
  in.header = m.header;
  in.data = copy->data();
  in.count = m.count;
  in.owner = copy;
  sent_ += m.bytes();
  fabric_->box(peer).put(std::move(in));
}

std::optional<InMessage> InprocTransport::receive(const MatchKey& key, Clock::time_point deadline) {
  auto m = fabric_->box(rank_).take(key, deadline);
  if (m) received_ += m->bytes();
  return m;
}

TransportStats InprocTransport::stats() const {
  TransportStats s;
  s.bytes_sent = sent_;
  s.bytes_received = received_;
  return s;
}

}  // namespace gossip::peer
