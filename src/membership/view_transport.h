// A view (the members of one epoch) and the Transport of ranks it presents to the algorithms.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/membership_port.h"

namespace gossip::peer {

using Member = PeerAddress;

struct View {
  uint32_t epoch = 0;
  std::vector<Member> members;  // rank = index
  int next_id = 0;              // the id the next joiner gets
  int rank_of(int id) const;    // -1 when not a member
};

// Presents the current view as a Transport of ranks 0..n-1 over a MembershipPort of ids, stamping
// and matching the epoch so messages of an abandoned epoch never mix into a new one.
class ViewTransport final : public Transport {
 public:
  ViewTransport(MembershipPort& inner, View view, int self_id);
  int rank() const override;
  int size() const override;
  void send(int peer, OutMessage message) override;
  std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) override;
  bool ready(const MatchKey& key) override;
  std::string endpoint_of(int peer) const override;
  TransportStats stats() const override;
  std::string dropped_from(int peer) const override;
  std::string last_known_endpoint(int peer) const override;
  uint32_t epoch() const override;
  void send_to_each(const std::vector<int>& peers, const OutMessage& message) override;

  View view() const;
  int self_id() const;
  void set_view(View view, int self_id);  // also tells the port whom to watch
  // Consulted when a receive is interrupted: true when a real membership change waits (the
  // receive then throws MembershipInterrupt), false for a stale one (it goes on waiting).
  void set_change_filter(std::function<bool()> filter) { filter_ = std::move(filter); }
  // While true, receives are never interrupted (a joiner fetching its first model: a change that
  // starts meanwhile is taken part in at its first step).
  void suspend_interrupts(bool on) { suspended_ = on; }
  int id_of(int rank) const;

 private:
  std::optional<int> id_in_view(int rank) const;  // nullopt: not a rank of the view

  MembershipPort* inner_;  // owned by the peer's Node (or a test), outlives this
  mutable std::mutex mutex_;
  View view_;    // guarded by mutex_ (the comm thread reads it for status replies)
  int self_id_;  // guarded by mutex_
  std::function<bool()> filter_;  // training thread only, as is suspended_
  bool suspended_ = false;
};

}  // namespace gossip::peer
