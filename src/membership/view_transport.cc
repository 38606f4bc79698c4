#include "membership/view_transport.h"

#include "common/error.h"

namespace gossip::peer {

ViewTransport::ViewTransport(MembershipPort& inner, View view, int self_id)
    : inner_(&inner), view_(std::move(view)), self_id_(self_id) {}

int ViewTransport::rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_.rank_of(self_id_);
}

int ViewTransport::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(view_.members.size());
}

int ViewTransport::id_of(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(view_.members.size()))
    throw Error("transport", "rank " + std::to_string(rank) + " outside the view of " +
                                 std::to_string(view_.members.size()) + " members");
  return view_.members[rank].id;
}

uint32_t ViewTransport::epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_.epoch;
}

void ViewTransport::send(int peer, OutMessage message) {
  const int id = id_of(peer);
  message.header.epoch = epoch();
  inner_->send(id, std::move(message));
}

void ViewTransport::send_to_each(const std::vector<int>& peers, const OutMessage& message) {
  std::vector<int> ids;
  for (int p : peers) ids.push_back(id_of(p));
  OutMessage m = message;
  m.header.epoch = epoch();
  inner_->send_to_each(ids, m);
}

std::optional<InMessage> ViewTransport::receive(const MatchKey& key, Clock::time_point deadline) {
  MatchKey k = key;
  k.sender = id_of(key.sender);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    k.epoch = view_.epoch;
  }
  for (;;) {
    try {
      return inner_->receive(k, deadline);
    } catch (const MembershipInterrupt&) {
      // An interrupt raised for something already settled (a suspicion that raced with the
      // view change removing that peer) must not abandon this receive: only a real change does.
      if (!suspended_ && (!filter_ || filter_())) throw;
      inner_->mailbox().acknowledge();
      if (!suspended_ && filter_ && filter_()) throw;  // arrived between the check and the acknowledgement
    }
  }
}

bool ViewTransport::ready(const MatchKey& key) {
  MatchKey k = key;
  k.sender = id_of(key.sender);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    k.epoch = view_.epoch;
  }
  return inner_->ready(k);
}

std::optional<int> ViewTransport::id_in_view(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(view_.members.size())) return std::nullopt;
  return view_.members[rank].id;
}

std::string ViewTransport::endpoint_of(int peer) const {
  const std::optional<int> id = id_in_view(peer);
  return id ? inner_->endpoint_of(*id) : "?";
}

TransportStats ViewTransport::stats() const { return inner_->stats(); }

std::string ViewTransport::dropped_from(int peer) const {
  const std::optional<int> id = id_in_view(peer);
  return id ? inner_->dropped_from(*id) : "";
}

std::string ViewTransport::last_known_endpoint(int peer) const {
  const std::optional<int> id = id_in_view(peer);
  return id ? inner_->last_known_endpoint(*id) : "?";
}

View ViewTransport::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

int ViewTransport::self_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return self_id_;
}

void ViewTransport::set_view(View view, int self_id) {
  const std::vector<PeerAddress> members = view.members;
  const uint32_t epoch = view.epoch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    view_ = std::move(view);
    self_id_ = self_id;
  }
  inner_->set_self_id(self_id);
  inner_->set_members(members, epoch);
}

}  // namespace gossip::peer
