// The view-change agreement of Membership (the protocol is described in membership.h and above
// agree below): one Change holds what this peer knows of a change while it runs.
#include <algorithm>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "membership/membership.h"

namespace gossip::peer {
namespace {

const std::vector<MessageKind> kChangeKinds = {MessageKind::kView, MessageKind::kJoin, MessageKind::kSuspect};

}  // namespace

struct Membership::Change {
  View v;  // the view being changed
  int me = 0;
  int64_t round = 0;
  Clock::time_point started;
  ViewProposal mine;
  bool ready = false;
  std::map<uint64_t, JoinRequest> joins;  // every join named so far, by nonce
  struct Latest {
    ViewProposal p;
    bool ready = false;
  };
  std::map<int, Latest> latest;           // each member's newest message of this epoch
  // The members (not us, not gone) whose latest proposal differs from ours, and those not yet
  // ready on ours (a superset), kept per message so that a look at them costs nothing at 1 000
  // members; recounted from `latest` when our own sets grow.
  std::set<int> unequal, unready;
  bool recount = true;
  std::set<int> repeated_to_us;  // members whose repeat we answer (see absorb_proposal)
  Clock::time_point last_arrival;  // when a message of this change last came in
  bool peer_cut_off = false;       // a member answered that it ended this change cut off
  std::optional<ViewProposal> decided;    // adopted from a member that decided already
  bool any_view_message = false;
  std::vector<InMessage> later, local;    // later: next epoch's; local: our own events (joins, suspicions)
  IdSet left;                             // members that announced their own leave (no side in the quorum)
  uint64_t view_messages_before = 0;      // view_messages_sent_ when this change started
};

void Membership::absorb(Change& c, const InMessage& m) {
  const auto kind = m.header.kind;
  if (kind == MessageKind::kSuspect) {
    const int sender = static_cast<int>(m.header.sender);
    if (c.v.rank_of(sender) < 0 || c.mine.gone.count(sender)) return;
    c.mine.gone.insert(sender);
    c.ready = false;  // liveness: a silent member would hold phase 2 forever
    c.local.push_back(m);
  } else if (kind == MessageKind::kJoin) {
    if (c.ready) c.later.push_back(m);  // too late for this change: it starts the next one
    else absorb_join(c, m);
  } else {
    absorb_proposal(c, m);
  }
}

std::string Membership::join_refusal(const JoinTerms& terms, int64_t round) const {
  if (terms.num_params != terms_.num_params)
    return "its model has " + std::to_string(terms.num_params) + " parameters, this run's " +
           std::to_string(terms_.num_params) + " (another config?)";
  if (const std::string differ = settings_difference(terms.settings, terms_.settings); !differ.empty())
    return differ + " (every peer of a run needs these alike)";
  if (total_steps_ > 0 && round + 1 >= total_steps_) return "the run ends at round " + std::to_string(total_steps_);
  return "";
}

void Membership::absorb_join(Change& c, const InMessage& m) {
  std::istringstream in(message_text(m));
  JoinRequest j;
  std::string word;
  JoinTerms terms;
  if (!(in >> word >> j.nonce >> j.endpoint >> terms.num_params >> terms.settings) || word != "join" ||
      !port_->accepts_endpoint(j.endpoint)) {
    log("peer ", c.me, ": dropped a malformed join request");
    return;
  }
  // A copy of a request already admitted (a rejoin asks several members): ignored while the
  // peer it admitted is a member; if that one has been removed since, the joiner is still asking.
  if (auto a = admitted_.find(j.nonce); a != admitted_.end() && c.v.rank_of(a->second) >= 0) return;
  in >> j.key;  // with CurveZMQ the comm thread checked it is the key the joiner proved it holds
  // A member asking to join again (it was cut off, or restarted on its endpoint) is gone in its
  // old place: its new id replaces the old one in this change. With CurveZMQ only with that
  // member's own key (another could name its endpoint to evict it).
  for (const Member& old : c.v.members)
    if (old.id != c.me && port_->endpoint_of(old.id) == j.endpoint && !c.mine.gone.count(old.id) && old.key == j.key) {
      log("peer ", c.me, ": peer ", old.id, " asks to join again from ", escape_for_log(j.endpoint),
          ": its old place is gone");
      c.mine.gone.insert(old.id);
      c.ready = false;
    }
  j.via = c.me;
  if (const std::string refusal = join_refusal(terms, c.round); !refusal.empty()) {
    log("peer ", c.me, ": refused the join request from ", escape_for_log(j.endpoint), ": ", refusal);
    const int address = -1 - refused_++;  // a one-off address: it is no member
    port_->add_endpoint(address, j.endpoint, j.key);
    send_text(address, MessageKind::kWelcome, c.v.epoch, 0, "refused " + refusal + "\n");
    return;
  }
  if (!c.joins.count(j.nonce)) log("peer ", c.me, ": join request from ", escape_for_log(j.endpoint));
  c.joins.emplace(j.nonce, j);
  c.mine.joins.insert(j.nonce);
  c.local.push_back(m);
}

void Membership::absorb_proposal(Change& c, const InMessage& m) {
  const int sender = static_cast<int>(m.header.sender);
  if (m.header.epoch > c.v.epoch) {  // someone is already in the next change: keep it for then
    c.later.push_back(m);
    return;
  }
  if (m.header.epoch < c.v.epoch || c.v.rank_of(sender) < 0) return;  // stale or from a non-member
  if (m.header.tag == kViewCutOff) {  // that member ended this change cut off: it leaves the view (and rejoins)
    if (sender != c.me && c.mine.gone.insert(sender)) {
      log("peer ", c.me, ": peer ", sender, " ended this view change cut off: it is gone from epoch ", c.v.epoch);
      c.ready = false;
    }
    c.peer_cut_off = true;
    return;
  }
  std::optional<ViewProposal> parsed = parse_proposal(message_text(m), &c.joins);
  if (!parsed) {
    log("peer ", c.me, ": dropped a malformed view-change message from peer ", sender);
    return;
  }
  ViewProposal& p = *parsed;
  c.any_view_message = true;
  if (p.gone.count(sender)) c.left.insert(sender);  // its own leave (announce_leave)
  if (m.header.tag == kViewDecision) {  // that member decided this already: adopt it
    c.decided = p;
    return;
  }
  // A repeat (a kViewProposal the same as that member's latest) means it still waits for us,
  // perhaps for a message of ours that was lost: we answer with our current state (kViewAnswer,
  // never answered in turn, so two waiting members do not answer each other forever).
  if (auto it = c.latest.find(sender); m.header.tag == kViewProposal && it != c.latest.end() && it->second.p == p &&
                                       it->second.ready == p.ready)
    c.repeated_to_us.insert(sender);
  const size_t before = c.mine.gone.size() + c.mine.joins.size();
  if (!c.mine.gone.includes(p.gone))  // (most proposals name what we do: no lookups then)
    for (int id : p.gone)
      if (c.v.rank_of(id) >= 0) c.mine.gone.insert(id);
  c.mine.joins.insert(p.joins.begin(), p.joins.end());
  if (c.mine.gone.size() + c.mine.joins.size() != before) c.ready = false;
  const bool ready = p.ready;
  c.latest[sender] = {std::move(p), ready};
  note_status(c, sender);
}

// Files `id` under unequal/unready from its latest message and our current sets.
void Membership::note_status(Change& c, int id) {
  auto it = c.latest.find(id);
  const bool member = id != c.me && !c.mine.gone.count(id) && c.v.rank_of(id) >= 0;
  const bool same = it != c.latest.end() && it->second.p == c.mine;
  if (member && !same) c.unequal.insert(id);
  else c.unequal.erase(id);
  if (member && !(same && it->second.ready)) c.unready.insert(id);
  else c.unready.erase(id);
}

// Absorbs everything that has come in (waiting up to 100 ms for the first), then recounts every
// member's status if our own sets grew meanwhile.
void Membership::absorb_arrivals(Change& c) {
  const size_t before = c.mine.gone.size() + c.mine.joins.size();
  if (auto m = port_->mailbox().take_any(kChangeKinds, Clock::now() + std::chrono::milliseconds(100))) {
    c.last_arrival = Clock::now();
    absorb(c, *m);
    // In a large view the messages of one phase come as a burst of n: a short pause gathers the
    // rest of it into this batch rather than waking once per message.
    if (c.v.members.size() > 64) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    while (auto more = port_->mailbox().take_any(kChangeKinds, Clock::now())) absorb(c, *more);
  }
  if (c.mine.gone.size() + c.mine.joins.size() != before) c.recount = true;
}

// Runs both phases until this peer may decide, or adopts a decision; returns why this peer is
// cut off instead, if it is.
std::optional<std::string> Membership::settle(Change& c) {
  std::string sent, text;
  Clock::time_point last_sent{};
  constexpr double kFirstRepeatS = 0.25;
  const double longest_repeat_s = std::max(1.0, static_cast<double>(c.v.members.size()) / 64);
  double repeat_s = kFirstRepeatS;
  for (;;) {
    if (c.mine.gone.count(c.me) || (c.decided && c.decided->gone.count(c.me)))
      return "the other members of epoch " + std::to_string(c.v.epoch) +
             " declared this peer gone (it was silent past the heartbeat timeout)";
    if (c.decided) return std::nullopt;
    // Gone sets only grow, and a larger one never regains a quorum: once a member of our side
    // ended cut off and our own set has no quorum either, we are cut off too, without waiting
    // for the rest of our side (which would each leave us only by its answer, one at a time).
    if (c.peer_cut_off && !keeps_quorum(c.v, c.mine.gone, c.left)) break;
    if (c.recount) {
      c.unequal.clear();
      c.unready.clear();
      for (const Member& m : c.v.members) note_status(c, m.id);
    }
    if (!c.ready && c.unequal.empty()) c.ready = true;  // phase 1 done: every member proposes our set
    // Everyone hears our latest state before we may decide; it is repeated to the members we
    // still wait for once nothing has come in or gone out for a while, so one that decided
    // without us answers with its decision, and one still deciding with its state, even if a
    // message was lost (the others' latest already is ours, ready: repeating it to them would
    // only cost messages). When only a few members (n/16, at least 4) are still to answer, the
    // first repeat comes after 0.25 s of quiet, each next one after twice as long, up to a second
    // (n/64 s in a view of n > 64, where one phase takes longer; the failure detector counts on a
    // change's messages at least that often); while more are, after that longest wait.
    if (c.recount || text.empty() || c.mine.ready != c.ready) {
      c.mine.ready = c.ready;
      text = proposal_text(c.mine, c.joins);
    }
    c.recount = false;
    const bool changed = text != sent;
    // Whom we wait for: in phase 1 the members whose set differs from ours, in phase 2 those not
    // yet ready on it. While many are, the phase is under way rather than short of a message.
    const std::set<int>& waiting = c.ready ? c.unready : c.unequal;
    const bool few_missing = waiting.size() <= std::max<size_t>(4, c.v.members.size() / 16);
    const double quiet_s = few_missing ? repeat_s : longest_repeat_s;
    const Clock::time_point last_activity = std::max(last_sent, c.last_arrival);
    if (changed || Clock::now() - last_activity > std::chrono::duration<double>(quiet_s)) {
      if (changed) {
        for (const Member& m : c.v.members)
          if (m.id != c.me && !c.mine.gone.count(m.id)) send_text(m.id, MessageKind::kView, c.v.epoch, c.round, text);
        repeat_s = kFirstRepeatS;
      } else {
        for (int id : waiting) send_text(id, MessageKind::kView, c.v.epoch, c.round, text);
        repeat_s = std::min(2 * repeat_s, longest_repeat_s);
      }
      sent = text;
      last_sent = Clock::now();
    }
    for (int id : c.repeated_to_us)
      if (!c.mine.gone.count(id)) send_text(id, MessageKind::kView, c.v.epoch, c.round, text, kViewAnswer);
    c.repeated_to_us.clear();
    if (c.ready && c.unready.empty()) break;  // phase 2 done: every member is ready on our set
    if (Clock::now() - c.started > std::chrono::duration<double>(timeout_s_)) {
      const IdSet awaited(c.unready.begin(), c.unready.end());
      throw PeerLost("peer " + std::to_string(c.me), "view change of epoch " + std::to_string(c.v.epoch) +
                                                      " did not settle in " + number_text(timeout_s_) +
                                                      " s; waiting for members " + id_list(awaited));
    }
    absorb_arrivals(c);
  }
  if (keeps_quorum(c.v, c.mine.gone, c.left)) return std::nullopt;
  return "this side of the view change keeps " + std::to_string(c.v.members.size() - c.mine.gone.size()) + " of the " +
         std::to_string(c.v.members.size()) + " members of epoch " + std::to_string(c.v.epoch) +
         " (gone: " + id_list(c.mine.gone) + "), not a majority: the others may go on without it";
}

// Agreement in two phases, so no member can decide on a set another member is still growing:
// (1) merge proposals (union) until every member's latest proposal equals ours, then say
// "ready"; (2) decide once every member's latest message is "ready" with that same set. A member
// only grows its set while not ready — new joins after "ready" wait for the next change — so once
// all are ready on a set nobody can leave it. Suspicions still get in (a silent member would block
// phase 2 forever); a member that decided answers a late proposal of the old epoch with its
// decision (kViewDecision), which the late one adopts.
std::optional<ViewChange> Membership::agree(int64_t round) {
  Change c;
  c.v = view_->view();
  c.me = view_->self_id();
  c.round = round;
  c.mine.round = round;
  c.started = Clock::now();
  c.view_messages_before = view_messages_sent_;
  Mailbox& box = port_->mailbox();
  box.acknowledge();
  for (InMessage& m : deferred_) absorb(c, m);
  deferred_.clear();
  while (auto m = box.take_any(kChangeKinds, Clock::now())) absorb(c, *m);
  if (!c.any_view_message && c.mine.gone.empty() && c.mine.joins.empty()) {
    deferred_ = std::move(c.later);
    return std::nullopt;
  }
  ViewChange change;
  change.cut_off = settle(c);
  if (change.cut_off) {
    // No view is adopted and no decision published: the majority's view is the run's. A member
    // of this side that missed our last message learns from our answer that we are gone.
    port_->set_cut_off(c.v.epoch);
    deferred_.clear();
    log("peer ", c.me, ": cut off from the run: ", *change.cut_off);
    return change;
  }
  conclude(c, change);
  return change;
}

// Adopts the decided change: the next view, its resume round, the joiners to welcome; publishes
// the decision for late proposers; keeps our own events the decision left out for the next one.
void Membership::conclude(Change& c, ViewChange& change) {
  int64_t resume = c.round;
  if (c.decided) {
    resume = c.decided->round;  // the decider's resume round
    c.mine.gone = c.decided->gone;
    c.mine.joins = c.decided->joins;
  } else {
    for (const auto& [id, l] : c.latest)
      if (!c.mine.gone.count(id)) resume = std::max(resume, l.p.round);
  }
  change.gone = c.mine.gone;
  std::set<JoinRequest> join_set;
  for (uint64_t n : c.mine.joins) join_set.insert(c.joins.at(n));
  change.view = next_view(c.v, c.mine.gone, join_set);
  change.resume_round = resume;
  for (const JoinRequest& j : join_set)
    if (j.via == c.me) change.welcome.push_back(j);
  for (const Member& m : change.view.members)
    for (const JoinRequest& j : join_set)
      if (m.endpoint == j.endpoint && c.v.rank_of(m.id) < 0) admitted_[j.nonce] = m.id;
  // A member that proposes late gets this decision back (kViewDecision), with the resume round.
  ViewProposal final_set = c.mine;
  final_set.round = resume;
  final_set.ready = true;
  port_->set_last_decision(c.v.epoch, pad_text(proposal_text(final_set, c.joins)));
  view_->set_view(change.view, c.me);
  Mailbox& box = port_->mailbox();
  box.drop_before_epoch(change.view.epoch);
  box.acknowledge();
  // Our own events the decision did not include start the next change.
  for (InMessage& m : c.local) {
    if (m.header.kind == MessageKind::kSuspect) {
      if (change.view.rank_of(static_cast<int>(m.header.sender)) >= 0) c.later.push_back(std::move(m));
    } else {
      std::istringstream in(message_text(m));
      std::string word;
      uint64_t nonce = 0;
      in >> word >> nonce;
      if (!c.mine.joins.count(nonce)) c.later.push_back(std::move(m));
    }
  }
  deferred_ = std::move(c.later);
  if (pending(false)) box.interrupt();  // another change already started: do not block in a receive
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - c.started).count();
  log("peer ", c.me, ": view change to epoch ", change.view.epoch, ": ", change.view.members.size(), " members (gone: ",
      id_list(change.gone), ", joined: ", join_set.size(), "), resuming at round ", change.resume_round,
      ", agreed in ", static_cast<int>(ms), " ms", c.decided ? " (adopted from a member that had decided)" : "",
      "; sent ", view_messages_sent_ - c.view_messages_before, " proposals");
}

}  // namespace gossip::peer
