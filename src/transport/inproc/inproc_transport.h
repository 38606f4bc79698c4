// In-process fake transport for tests: n peers in one process (one thread each) exchange messages
// through shared mailboxes, with the same matching semantics as the real transport (payloads are
// copied, so a failing sender can free its buffer at any time).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "transport/mailbox.h"
#include "transport/transport.h"

namespace gossip::peer {

class InprocFabric {
 public:
  explicit InprocFabric(int n);
  int size() const { return static_cast<int>(boxes_.size()); }
  Mailbox& box(int rank) { return *boxes_.at(rank); }

 private:
  std::vector<std::unique_ptr<Mailbox>> boxes_;
};

class InprocTransport final : public Transport {
 public:
  // `fabric` must outlive the transport (the test owns both).
  InprocTransport(InprocFabric& fabric, int rank) : fabric_(&fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  void send(int peer, OutMessage message) override;
  std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) override;
  bool ready(const MatchKey& key) override { return fabric_->box(rank_).ready(key); }
  std::string endpoint_of(int peer) const override { return "inproc://" + std::to_string(peer); }
  TransportStats stats() const override;

 private:
  InprocFabric* fabric_;
  int rank_;
  std::atomic<uint64_t> sent_{0}, received_{0};
};

}  // namespace gossip::peer
