// The transport as the membership layer (src/membership) sees it: peers addressed by stable ids
// (not ranks), a mailbox where membership messages wait, and the few settings a view change
// makes. Both ZmqTransport and InprocTransport implement it, so the agreement runs over real
// sockets in gossip-peer and over in-process mailboxes in thread-based tests.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/mailbox.h"
#include "transport/transport.h"

namespace gossip::peer {

// The header tag of a view-change message (kind kView).
enum ViewTag : uint32_t {
  kViewProposal = 0,  // a member's proposal (or its repeat)
  kViewDecision = 1,  // a member that decided answers a late proposal with its decision
  kViewCutOff = 2,    // a member that ended the change cut off answers a proposal with this
  kViewAnswer = 3,    // a member answers a repeat with its state; never answered in turn
};

class MembershipPort : public Transport {
 public:
  // Membership messages (view changes, joins, welcomes, suspicion notes of the failure detector)
  // wait here for the training thread; a proposal or a suspicion also interrupts its receives.
  virtual Mailbox& mailbox() = 0;
  // A joiner learns its id from the welcome; a member that rejoins after being cut off gets a new one.
  virtual void set_self_id(int id) = 0;
  // The members (id, endpoint, key) to watch; view-change messages of epochs before `epoch` are
  // stale from then on (answered with the last decision, never queued).
  virtual void set_members(const std::vector<PeerAddress>& members, uint32_t epoch) = 0;
  // The outcome of this peer's last view change (of `epoch`): a member still proposing in that
  // epoch gets it back (kViewDecision) instead of waiting for us forever.
  virtual void set_last_decision(uint32_t epoch, std::string text) = 0;
  // This peer ended the change of `epoch` cut off: every proposal of that epoch it gets from now
  // on is answered (kViewCutOff) so that a member still waiting for it counts it gone.
  virtual void set_cut_off(uint32_t epoch) = 0;
  // Remembers where `id` is reached (e.g. a one-off address for a refused joiner).
  virtual void add_endpoint(int id, const std::string& endpoint, const std::string& key) = 0;
  // A joiner's request (text of kind kJoin) to the member listening at `contact`.
  virtual void send_join(const std::string& contact, const std::string& contact_key, const std::string& text,
                         uint64_t nonce) = 0;
  // Copies of join requests not delivered yet are dropped.
  virtual void forget_join_requests() = 0;
  // Whether a joiner may name `endpoint` as its own (a scheme this transport connects to).
  virtual bool accepts_endpoint(const std::string& endpoint) const = 0;
  // Where this peer is reached (what a join request names), and its CurveZMQ public key ("" without).
  virtual std::string own_endpoint() const = 0;
  virtual std::string public_key() const = 0;
};

// The last view change a peer decided, kept by its transport to answer late proposals of that
// epoch (see MembershipPort::set_last_decision). Thread-safe.
class LastDecision {
 public:
  void set(uint32_t epoch, std::string text);
  void set_cut_off(uint32_t epoch);
  // Whether a view-change message `h` is one to answer (not to queue) for a peer now in
  // `current_epoch`: one of an epoch it has left, or of the epoch it ended cut off.
  bool answers(const Header& h, uint32_t current_epoch) const;
  // The answer to such a message `h`, when it is a proposal: "cut off" (kViewCutOff) for the
  // epoch this peer ended cut off; else its decision (kViewDecision) for the epoch it decided last.
  std::optional<OutMessage> answer(const Header& h) const;

 private:
  mutable std::mutex mutex_;
  uint32_t epoch_ = ~0u;                    // guarded by mutex_
  std::shared_ptr<const std::string> text_;  // guarded by mutex_
  uint32_t cut_off_epoch_ = ~0u;            // guarded by mutex_
};

}  // namespace gossip::peer
