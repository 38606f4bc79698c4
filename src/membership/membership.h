// Elastic membership without a coordinator. A view is the ordered member list of one epoch (rank
// = position; the ring follows that order). Any event — a member silent past the heartbeat
// timeout, a graceful leave, a join request — starts a view change that every surviving member
// takes part in, in two phases: each sends every other member its proposal (round, gone ids,
// joins) and merges what it receives (union) until every member's latest proposal equals its own,
// then says "ready"; it decides once every member is ready on that set. All then compute the same
// next view (next_view) and the same resume round R = the largest round any member had reached;
// rounds below R are trained locally, unmixed.
// Push-sum weight rule: at a view change every member restarts from (x, w) = (x/w, 1), a joiner
// from (its contact's model, 1): every de-biased model is unchanged, Σw = n of the new view, and
// the old epoch's mass still in flight is discarded, so x/w stays an unbiased average.
// Quorum (no split brain): a change must keep a strict majority of the previous view's members
// (those that left on their own take no side; at exactly half, the half holding the lowest id goes
// on). A member on the losing side — partitioned away, or stalled while the others moved on — is
// cut off: it stops mixing, drops its own model and asks the members it knew to take it back as a
// joiner (it then starts from its contact's model, like any joiner); if none answers within
// algorithm.timeout_s it exits with kExitCutOff.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "membership/view_transport.h"
#include "transport/membership_port.h"

namespace gossip::peer {

// A set of member ids as a sorted vector. A view change among 1 000 members parses, compares and
// merges sets of hundreds of ids about a million times; as a node-based std::set that was most of
// its CPU time (allocation and tree walks), as one array it is a copy and a compare of memory.
class IdSet {
 public:
  IdSet() = default;
  IdSet(std::initializer_list<int> ids) : IdSet(ids.begin(), ids.end()) {}
  template <class It>
  IdSet(It first, It last) : ids_(first, last) {
    if (!std::is_sorted(ids_.begin(), ids_.end())) std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  }
  bool count(int id) const { return std::binary_search(ids_.begin(), ids_.end(), id); }
  // Adds `id`; true when it was not in the set.
  bool insert(int id) {
    auto at = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (at != ids_.end() && *at == id) return false;
    ids_.insert(at, id);
    return true;
  }
  bool includes(const IdSet& o) const { return std::includes(ids_.begin(), ids_.end(), o.ids_.begin(), o.ids_.end()); }
  size_t size() const { return ids_.size(); }
  bool empty() const { return ids_.empty(); }
  std::vector<int>::const_iterator begin() const { return ids_.begin(); }
  std::vector<int>::const_iterator end() const { return ids_.end(); }
  bool operator==(const IdSet& o) const = default;

 private:
  std::vector<int> ids_;  // ascending, no repeats
};

// What a joiner must have in common with the run to exchange with it, sent in its join request:
// its model size, and the settings every peer must share (peer/config.h's shared_settings:
// "name=value" items joined by ';', no blanks; empty: none are compared).
struct JoinTerms {
  size_t num_params = 0;
  std::string settings;
};

// The settings of a joiner that differ from the run's, for a refusal: "its algorithm.wire is
// bf16, this run's f32" ("; " between items, at most a few; the joiner's values escaped); "" when
// every one of the run's settings is the joiner's too.
std::string settings_difference(const std::string& joiner, const std::string& run);

struct JoinRequest {
  uint64_t nonce = 0;  // chosen by the joiner; orders concurrent joins
  std::string endpoint;
  int via = -1;        // the member it asked, which welcomes it
  std::string key;     // its CurveZMQ public key (Z85), when the run uses keys
  bool operator<(const JoinRequest& o) const { return nonce < o.nonce; }
};

// The view after removing `gone` and appending `joins` (in nonce order, ids from next_id).
View next_view(const View& v, const IdSet& gone, const std::set<JoinRequest>& joins);
// Whether a change from `v` that removes `gone` keeps a quorum (see above); `left` are the gone
// members that announced their own leave.
bool keeps_quorum(const View& v, const IdSet& gone, const IdSet& left);

struct ViewChange {
  View view;                        // the new view (epoch + 1)
  int64_t resume_round = 0;         // first round communicated in it
  std::vector<JoinRequest> welcome; // joiners this peer was asked by: it sends them the model
  IdSet gone;
  // Set when this peer's side lost (no quorum, or the others declared it gone): nothing above is
  // set and the view is unchanged; the peer must rejoin (Membership::rejoin). The text says why.
  std::optional<std::string> cut_off;
};

struct ViewProposal {  // one member's proposal in a view change
  int64_t round = 0;             // the next round the member would communicate in
  IdSet gone;                    // ids leaving or suspected dead
  std::set<uint64_t> joins;      // nonces of the joiners (details in the JoinRequest map)
  bool ready = false;            // phase 2: the member is ready to decide on these sets
  bool operator==(const ViewProposal& o) const { return gone == o.gone && joins == o.joins; }
};

// The text forms of proposals and welcomes (pure, so the fuzzer reaches them). Parsers return
// nullopt for malformed text; parse_proposal adds the joins it names to *joins.
std::string proposal_text(const ViewProposal& p, const std::map<uint64_t, JoinRequest>& joins);
std::optional<ViewProposal> parse_proposal(const std::string& text, std::map<uint64_t, JoinRequest>* joins);

struct Welcome;
std::optional<Welcome> parse_welcome(const std::string& text);
// The text a membership message carries (padding stripped).
std::string message_text(const InMessage& m);
// "2, 5, 7" ("none" when empty), for log lines.
std::string id_list(const IdSet& ids);

struct Welcome {
  View view;
  int id = 0;
  int contact_id = 0;
  int64_t round = 0;        // the joiner's first step
  int64_t total_steps = 0;  // where the run ends
  // Joiners admitted earlier who are still members (nonce → id): a late copy of their request
  // (a rejoin asks several members) must not look new to this peer once it is a member.
  std::map<uint64_t, int> admitted;
};

class Membership {
 public:
  // `timeout_s` bounds one view change (a member that neither answers nor is suspected by then
  // is an error).
  // Join requests on other terms (a model of another size, other shared settings) are refused.
  Membership(MembershipPort& port, ViewTransport& view, double timeout_s, JoinTerms terms);
  // Joins are refused in the last round (the run would end before the joiner took a step).
  void set_total_steps(int64_t total) { total_steps_ = total; }

  // True when a view-change event waits (never blocks); without `include_joins`, only events that
  // must interrupt a receive (proposals, suspicions). Suspicions of former members are discarded.
  bool pending(bool include_joins = true);
  // Takes part in the view change; `round` = the next round this peer would communicate in.
  // nullopt when the events turned out to change nothing (e.g. a suspicion of a former member).
  std::optional<ViewChange> agree(int64_t round);
  // Graceful leave: tells every member this peer is gone as of `round` (no answer awaited).
  void announce_leave(int64_t round);
  // To a joiner (after agree): the view, its id, the start round and the run's length.
  void send_welcome(const ViewChange& change, const JoinRequest& joiner, int64_t total_steps);

  // A member that was cut off asks the members of its last view, in turn, to take it back as a
  // joiner (one request, retried through each), and adopts the view of the welcome. Throws
  // CutOff when none answers within the view-change timeout or the run refuses it.
  Welcome rejoin(const std::string& why);
  // A joiner: what its welcome said was admitted before it (see Welcome::admitted).
  void note_admitted(const std::map<uint64_t, int>& admitted) { admitted_.insert(admitted.begin(), admitted.end()); }
  // While on, receives are never interrupted (a joiner fetching its first model).
  void suspend_interrupts(bool on) { view_->suspend_interrupts(on); }
  // The members suspected dead so far, for error messages: "peer 2 (tcp://…), peer 3 (…)".
  std::string describe_suspects();

  // Joiner side, in two parts so the joiner can load its data meanwhile: asks `contact` (a live
  // member's endpoint; `contact_key` its public key when the run uses CurveZMQ, `own_key` ours)...
  static void request_join(MembershipPort& port, const std::string& contact, const std::string& contact_key,
                           const std::string& own_endpoint, const std::string& own_key, const JoinTerms& terms);
  // ...then waits for the welcome until `deadline` (`timeout_s` is only quoted in the error).
  static Welcome await_welcome(MembershipPort& port, const std::string& contact, Clock::time_point deadline,
                               double timeout_s);

 private:
  struct Change;  // one change in progress (agreement.cc)
  void absorb(Change& c, const InMessage& m);
  void absorb_join(Change& c, const InMessage& m);
  void absorb_proposal(Change& c, const InMessage& m);
  void note_status(Change& c, int id);
  void absorb_arrivals(Change& c);
  std::optional<std::string> settle(Change& c);
  void conclude(Change& c, ViewChange& change);
  // Why a join request on `terms` at `round` is refused ("" = it is not).
  std::string join_refusal(const JoinTerms& terms, int64_t round) const;
  void send_text(int id, MessageKind kind, uint32_t epoch, uint64_t round, const std::string& text, uint32_t tag = 0);
  // Moves the comm thread's suspicion notes of current members into deferred_ (others dropped).
  void take_suspicions();

  MembershipPort* port_;   // both owned by the peer's Node (or a test), outlive this
  ViewTransport* view_;
  double timeout_s_;
  JoinTerms terms_;
  int64_t total_steps_ = 0;
  int refused_ = 0;  // joiners refused so far (each gets a one-off address)
  uint64_t view_messages_sent_ = 0;  // proposals and leave notes sent (each change logs how many)
  std::vector<InMessage> deferred_;  // messages of a later epoch, kept for the next change
  std::map<uint64_t, int> admitted_;  // nonce → id of each joiner admitted (a request may come twice)
};

// A peer cut off from the run (see Quorum above); main() exits with kExitCutOff for it.
struct CutOff : Error {
  CutOff(const std::string& who, const std::string& why) : Error(who, "cut off from the run: " + why, kExitCutOff) {}
};

}  // namespace gossip::peer
