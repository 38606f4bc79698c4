// In-process fake transport for tests: peers in one process (one thread each) exchange messages
// through shared mailboxes, with the same matching semantics as the real transport (payloads are
// copied, so a failing sender can free its buffer at any time). It is also a MembershipPort, so
// the membership agreement runs over it: peers are addressed by ids, each peer sits in a slot of
// the fabric ("inproc://<slot>"), and the test plays the failure detector (suspect, crash).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/inproc/inproc_wire.h"
#include "transport/mailbox.h"
#include "transport/membership_port.h"

namespace gossip::peer {

class InprocTransport;

class InprocFabric {
 public:
  explicit InprocFabric(int n);
  int size() const { return static_cast<int>(boxes_.size()); }
  Mailbox& box(int slot) { return *boxes_.at(slot); }
  // The process in `slot` dies: its mailbox fails (its waits throw), nothing it sends arrives and
  // nothing reaches it, and every other peer that has it as a member gets a suspicion note of it.
  void crash(int slot);
  // Fault injection: the process in `slot` crashes right after it has sent `count` messages of `kind`.
  void crash_after_sending(int slot, MessageKind kind, int count);
  // While off, everything sent to or from `slot` is lost (a partition of one; nobody is told).
  void set_reachable(int slot, bool reachable);
  bool reachable(int slot) const;
  // A partition: messages between slots on different sides are lost (all start on side 0).
  void set_side(int slot, int side);
  // Latency, jitter and loss for every message (see InprocWire); call before any peer sends. By
  // default messages arrive at once, on the sender's thread.
  void set_link(const LinkModel& model);
  uint64_t lost() const;  // view-change messages the link model lost

 private:
  friend class InprocTransport;
  void attach(int slot, InprocTransport* t);
  void detach(int slot);
  void deliver(int from_slot, int slot, InMessage message);
  void arrive(int slot, InMessage message);
  void count_sent(int slot, MessageKind kind);  // crashes `slot` when its trigger is reached

  std::vector<std::unique_ptr<Mailbox>> boxes_;
  mutable std::recursive_mutex mutex_;
  std::vector<InprocTransport*> transports_;  // guarded by mutex_
  // Read on every send without the lock (a simulation of 1 000 members sends millions).
  std::unique_ptr<std::atomic<bool>[]> reachable_;
  std::atomic<int> armed_{0};                 // triggers armed; 0: count_sent has nothing to count
  struct CrashTrigger {
    MessageKind kind{};
    int left = -1;  // messages of `kind` still to send before the crash; -1: none armed
  };
  std::vector<CrashTrigger> triggers_;        // guarded by mutex_
  std::unique_ptr<std::atomic<int>[]> side_;
  std::unique_ptr<InprocWire> wire_;  // set before the peers start (set_link); last, so it stops first
};

class InprocTransport final : public MembershipPort {
 public:
  // The peer in `slot`, with id `id` (-1: a joiner, whose id comes with its welcome). Ids 0..n-1
  // are first known at slots 0..n-1; set_members and add_endpoint teach others. `fabric` must
  // outlive the transport (the test owns both).
  InprocTransport(InprocFabric& fabric, int slot, int id);
  InprocTransport(InprocFabric& fabric, int slot) : InprocTransport(fabric, slot, slot) {}
  ~InprocTransport() override;
  InprocTransport(const InprocTransport&) = delete;
  InprocTransport& operator=(const InprocTransport&) = delete;

  int rank() const override { return self_id_; }
  int size() const override { return fabric_->size(); }
  void send(int peer, OutMessage message) override;
  std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) override;
  bool ready(const MatchKey& key) override { return box().ready(key); }
  std::string endpoint_of(int peer) const override;
  TransportStats stats() const override;

  Mailbox& mailbox() override { return box(); }
  void set_self_id(int id) override { self_id_ = id; }
  void set_members(const std::vector<PeerAddress>& members, uint32_t epoch) override;
  void set_last_decision(uint32_t epoch, std::string text) override { decision_.set(epoch, std::move(text)); }
  void set_cut_off(uint32_t epoch) override { decision_.set_cut_off(epoch); }
  void add_endpoint(int id, const std::string& endpoint, const std::string& key) override;
  void send_join(const std::string& contact, const std::string& contact_key, const std::string& text,
                 uint64_t nonce) override;
  void forget_join_requests() override {}  // joins are delivered at once: no copy is ever on the way
  std::string own_endpoint() const override { return "inproc://" + std::to_string(slot_); }
  bool accepts_endpoint(const std::string& endpoint) const override;
  std::string public_key() const override { return ""; }

  // The failure detector's report: member `id` is suspected dead (a kSuspect note and an interrupt).
  void suspect(int id);

 private:
  friend class InprocFabric;
  Mailbox& box() const { return fabric_->box(slot_); }
  int slot_of(int id) const;  // -1 when unknown
  bool has_member_at(int slot, int* id) const;
  void deliver(int slot, InMessage message);  // on the sender's thread
  void arrive(InMessage message);             // on the sender's thread, into this peer's mailbox

  InprocFabric* fabric_;
  const int slot_;
  std::atomic<int> self_id_;
  std::atomic<uint32_t> epoch_{0};
  LastDecision decision_;
  mutable std::mutex mutex_;
  std::map<int, std::string> endpoints_;  // guarded by mutex_: id → "inproc://<slot>"
  std::vector<int> members_;               // guarded by mutex_
  std::atomic<uint64_t> sent_{0}, received_{0}, view_messages_{0}, view_bytes_{0};
};

}  // namespace gossip::peer
