#include "membership/membership.h"

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/log.h"

namespace gossip::peer {
namespace {

const std::vector<MessageKind> kChangeKinds = {MessageKind::kView, MessageKind::kJoin, MessageKind::kSuspect};

std::string text_of(const InMessage& m) {
  std::string t(reinterpret_cast<const char*>(m.data), m.count * sizeof(float));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

// A joiner's request: its nonce (which orders concurrent joins and names copies of one request),
// the endpoint it listens on, its model size and its public key (empty without CurveZMQ).
uint64_t random_nonce() {
  std::random_device rd;
  return (uint64_t(rd()) << 32 | rd()) & ((1ull << 62) - 1);
}

std::string join_request_text(uint64_t nonce, const std::string& endpoint, size_t num_params, const std::string& key) {
  return "join " + std::to_string(nonce) + " " + endpoint + " " + std::to_string(num_params) + " " + key + "\n";
}

// The reason of a "refused ..." answer to a join request (escaped: it came from the network).
std::optional<std::string> refusal_of(const std::string& answer) {
  if (answer.rfind("refused ", 0) != 0) return std::nullopt;
  return escape_for_log(answer.substr(8, answer.find('\n') - 8), 300);
}

std::string describe(const std::set<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s.empty() ? "none" : s;
}

}  // namespace

// ---- ViewTransport ----

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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (message.header.epoch != view_.epoch) message.checksum_ready = false;  // stamped before a change
    message.header.epoch = view_.epoch;
  }
  if (static_cast<int>(message.header.sender) != self_id()) message.checksum_ready = false;  // must cover the id
  inner_->send(id, std::move(message));
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

std::string ViewTransport::endpoint_of(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (peer < 0 || peer >= static_cast<int>(view_.members.size())) return "?";
  return inner_->endpoint_of(view_.members[peer].id);
}

TransportStats ViewTransport::stats() const { return inner_->stats(); }

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

// ---- Membership ----

Membership::Membership(MembershipPort& port, ViewTransport& view, double timeout_s, size_t num_params)
    : port_(&port), view_(&view), timeout_s_(timeout_s), num_params_(num_params) {
  // A join request never interrupts a receive (it may yet be refused, and then an abandoned
  // collective could not be resumed); it is taken up at the next step, whose proposal to the
  // others does interrupt them.
  view.set_change_filter([this] { return pending(false); });
}

void Membership::take_suspicions() {
  // Runs on every step: the view is copied only when a suspicion note must be checked against it.
  while (auto note = port_->mailbox().take_any({MessageKind::kSuspect}, Clock::now()))
    if (view_->view().rank_of(static_cast<int>(note->header.sender)) >= 0) deferred_.push_back(std::move(*note));
}

bool Membership::pending(bool include_joins) {
  take_suspicions();
  for (const InMessage& m : deferred_)
    if (include_joins || m.header.kind != static_cast<uint16_t>(MessageKind::kJoin)) return true;
  return port_->mailbox().has_kind(MessageKind::kView) ||
         (include_joins && port_->mailbox().has_kind(MessageKind::kJoin));
}

void Membership::send_text(int id, MessageKind kind, uint32_t epoch, uint64_t round, const std::string& text) {
  port_->send(id, text_message(kind, epoch, round, 0, std::make_shared<const std::string>(pad_text(text))));
}

void Membership::announce_leave(int64_t round) {
  const View v = view_->view();
  const int me = view_->self_id();
  const std::string text = "round " + std::to_string(round) + "\ngone " + std::to_string(me) + "\n";
  for (const Member& m : v.members)
    if (m.id != me) send_text(m.id, MessageKind::kView, v.epoch, static_cast<uint64_t>(round), text);
  log("peer ", me, ": leaving the run at round ", round, " (told ", v.members.size() - 1, " members)");
}

// Agreement in two phases, so no member can decide on a set another member is still growing:
// (1) merge proposals (union) until every member's latest proposal equals ours, then say
// "ready"; (2) decide once every member's latest message is "ready" with that same set. A member
// only grows its set while not ready — new joins after "ready" wait for the next change — so once
// all are ready on a set nobody can leave it. Suspicions still get in (a silent member would block
// phase 2 forever); a member that decided answers a late proposal of the old epoch with its
// decision (tag 1), which the late one adopts.
std::optional<ViewChange> Membership::agree(int64_t round) {
  const View v = view_->view();
  const int me = view_->self_id();
  const auto started = Clock::now();
  Mailbox& box = port_->mailbox();
  box.acknowledge();
  Proposal mine;
  mine.round = round;
  bool ready = false;
  std::map<uint64_t, JoinRequest> joins;
  struct Latest {
    Proposal p;
    bool ready = false;
  };
  std::map<int, Latest> latest;  // each member's newest message of this epoch
  std::optional<Proposal> decided;  // adopted from a member that decided already
  bool any_view_message = false;
  std::vector<InMessage> later, local;  // later: next epoch's; local: our own events (joins, suspicions)
  std::set<int> left;  // members that announced their own leave (they take no side in the quorum)

  auto absorb = [&](const InMessage& m) {
    const auto kind = static_cast<MessageKind>(m.header.kind);
    const int sender = static_cast<int>(m.header.sender);
    if (kind == MessageKind::kSuspect) {
      if (v.rank_of(sender) < 0 || mine.gone.count(sender)) return;
      mine.gone.insert(sender);
      ready = false;  // liveness: a silent member would hold phase 2 forever
      local.push_back(m);
      return;
    }
    std::istringstream in(text_of(m));
    if (kind == MessageKind::kJoin) {
      if (ready) {  // too late for this change: it starts the next one
        later.push_back(m);
        return;
      }
      JoinRequest j;
      std::string word;
      uint64_t params = 0;
      if (!(in >> word >> j.nonce >> j.endpoint >> params) || word != "join" || !port_->accepts_endpoint(j.endpoint)) {
        log("peer ", me, ": dropped a malformed join request");
        return;
      }
      // A copy of a request already admitted (a rejoin asks several members): ignored while the
      // peer it admitted is a member; if that one has been removed since, the joiner is still asking.
      if (auto a = admitted_.find(j.nonce); a != admitted_.end() && v.rank_of(a->second) >= 0) return;
      in >> j.key;  // with CurveZMQ the comm thread checked it is the key the joiner proved it holds
      // A member asking to join again (it was cut off, or restarted on its endpoint) is gone in
      // its old place: its new id replaces the old one in this change. With CurveZMQ only with
      // that member's own key (another could name its endpoint to evict it).
      for (const Member& m : v.members)
        if (m.id != me && port_->endpoint_of(m.id) == j.endpoint && !mine.gone.count(m.id) && m.key == j.key) {
          log("peer ", me, ": peer ", m.id, " asks to join again from ", escape_for_log(j.endpoint),
              ": its old place is gone");
          mine.gone.insert(m.id);
          ready = false;
        }
      j.via = me;
      std::string refusal;
      if (params != num_params_)
        refusal = "its model has " + std::to_string(params) + " parameters, this run's " + std::to_string(num_params_) +
                  " (another config?)";
      else if (total_steps_ > 0 && round + 1 >= total_steps_)
        refusal = "the run ends at round " + std::to_string(total_steps_);
      if (!refusal.empty()) {
        log("peer ", me, ": refused the join request from ", escape_for_log(j.endpoint), ": ", refusal);
        const int address = -1 - refused_++;  // a one-off address: it is no member
        port_->add_endpoint(address, j.endpoint, j.key);
        send_text(address, MessageKind::kWelcome, v.epoch, 0, "refused " + refusal + "\n");
        return;
      }
      if (!joins.count(j.nonce)) log("peer ", me, ": join request from ", escape_for_log(j.endpoint));
      joins.emplace(j.nonce, j);
      mine.joins.insert(j.nonce);
      local.push_back(m);
      return;
    }
    if (m.header.epoch > v.epoch) {  // someone is already in the next change: keep it for then
      later.push_back(m);
      return;
    }
    if (m.header.epoch < v.epoch || v.rank_of(sender) < 0) return;  // stale or from a non-member
    const std::optional<Proposal> parsed = parse_proposal(text_of(m), &joins);
    if (!parsed) {
      log("peer ", me, ": dropped a malformed view-change message from peer ", sender);
      return;
    }
    const Proposal& p = *parsed;
    const bool is_ready = p.ready;
    any_view_message = true;
    if (p.gone.count(sender)) left.insert(sender);  // its own leave (announce_leave)
    if (m.header.tag == 1) {  // that member decided this already: adopt it
      decided = p;
      return;
    }
    const size_t before = mine.gone.size() + mine.joins.size();
    for (int id : p.gone)
      if (v.rank_of(id) >= 0) mine.gone.insert(id);
    mine.joins.insert(p.joins.begin(), p.joins.end());
    if (mine.gone.size() + mine.joins.size() != before) ready = false;
    latest[sender] = {p, is_ready};
  };

  for (InMessage& m : deferred_) absorb(m);
  deferred_.clear();
  while (auto m = box.take_any(kChangeKinds, Clock::now())) absorb(*m);
  if (!any_view_message && mine.gone.empty() && mine.joins.empty()) {
    deferred_ = std::move(later);
    return std::nullopt;
  }

  std::string sent;
  Clock::time_point last_sent{};
  std::optional<std::string> cut_off;
  for (;;) {
    if (mine.gone.count(me) || (decided && decided->gone.count(me))) {
      cut_off = "the other members of epoch " + std::to_string(v.epoch) +
                " declared this peer gone (it was silent past the heartbeat timeout)";
      break;
    }
    if (decided) break;
    std::set<int> waiting;
    bool all_equal = true, all_ready = true;
    for (const Member& m : v.members) {
      if (m.id == me || mine.gone.count(m.id)) continue;
      auto it = latest.find(m.id);
      const bool same = it != latest.end() && it->second.p == mine;
      all_equal &= same;
      all_ready &= same && it->second.ready;
      if (!(same && it->second.ready)) waiting.insert(m.id);
    }
    if (!ready && all_equal) ready = true;  // phase 1 done: every member proposes our set
    // Everyone hears our latest state before we may decide; it is repeated every second, so a
    // member that decided without us answers with its decision even if a message was lost.
    mine.ready = ready;
    const std::string text = proposal_text(mine, joins);
    if (text != sent || Clock::now() - last_sent > std::chrono::seconds(1)) {
      for (const Member& m : v.members)
        if (m.id != me && !mine.gone.count(m.id)) send_text(m.id, MessageKind::kView, v.epoch, round, text);
      sent = text;
      last_sent = Clock::now();
    }
    if (ready && all_ready) break;  // phase 2 done: every member is ready on our set
    if (Clock::now() - started > std::chrono::duration<double>(timeout_s_))
      throw Error("peer " + std::to_string(me), "view change of epoch " + std::to_string(v.epoch) + " did not settle in " +
                                                    std::to_string(timeout_s_) + " s; waiting for members " +
                                                    describe(waiting));
    if (auto m = box.take_any(kChangeKinds, Clock::now() + std::chrono::milliseconds(100))) absorb(*m);
  }

  ViewChange change;
  if (!cut_off && !decided && !keeps_quorum(v, mine.gone, left))
    cut_off = "this side of the view change keeps " + std::to_string(v.members.size() - mine.gone.size()) + " of the " +
              std::to_string(v.members.size()) + " members of epoch " + std::to_string(v.epoch) +
              " (gone: " + describe(mine.gone) + "), not a majority: the others may go on without it";
  if (cut_off) {
    // No view is adopted and no decision published: the majority's view is the run's.
    deferred_.clear();
    log("peer ", me, ": cut off from the run: ", *cut_off);
    change.cut_off = cut_off;
    return change;
  }
  int64_t resume = round;
  if (decided) {
    resume = decided->round;  // the decider's resume round
    mine.gone = decided->gone;
    mine.joins = decided->joins;
  } else {
    for (const auto& [id, l] : latest)
      if (!mine.gone.count(id)) resume = std::max(resume, l.p.round);
  }
  change.gone = mine.gone;
  std::set<JoinRequest> join_set;
  for (uint64_t n : mine.joins) join_set.insert(joins.at(n));
  change.view = next_view(v, mine.gone, join_set);
  change.resume_round = resume;
  for (const JoinRequest& j : join_set)
    if (j.via == me) change.welcome.push_back(j);
  for (const Member& m : change.view.members)
    for (const JoinRequest& j : join_set)
      if (m.endpoint == j.endpoint && v.rank_of(m.id) < 0) admitted_[j.nonce] = m.id;
  // A member that proposes late gets this decision back (tag 1), with the resume round.
  ViewProposal final_set = mine;
  final_set.round = resume;
  final_set.ready = true;
  port_->set_last_decision(v.epoch, pad_text(proposal_text(final_set, joins)));
  view_->set_view(change.view, me);
  box.drop_before_epoch(change.view.epoch);
  box.acknowledge();
  // Our own events the decision did not include start the next change.
  for (InMessage& m : local) {
    if (m.header.kind == static_cast<uint16_t>(MessageKind::kSuspect)) {
      if (change.view.rank_of(static_cast<int>(m.header.sender)) >= 0) later.push_back(std::move(m));
    } else {
      std::istringstream in(text_of(m));
      std::string word;
      uint64_t nonce = 0;
      in >> word >> nonce;
      if (!mine.joins.count(nonce)) later.push_back(std::move(m));
    }
  }
  deferred_ = std::move(later);
  if (pending(false)) box.interrupt();  // another change already started: do not block in a receive
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  log("peer ", me, ": view change to epoch ", change.view.epoch, ": ", change.view.members.size(), " members (gone: ",
      describe(change.gone), ", joined: ", join_set.size(), "), resuming at round ", change.resume_round, ", agreed in ",
      static_cast<int>(ms), " ms", decided ? " (adopted from a member that had decided)" : "");
  return change;
}

void Membership::send_welcome(const ViewChange& change, const JoinRequest& joiner, int64_t total_steps) {
  const View& v = change.view;
  int id = -1;
  for (const Member& m : v.members)
    if (m.endpoint == joiner.endpoint) id = m.id;
  std::ostringstream text;
  text << "epoch " << v.epoch << "\nid " << id << "\ncontact " << view_->self_id() << "\nround " << change.resume_round
       << "\ntotal " << total_steps << "\nnext " << v.next_id << '\n';
  for (const Member& m : v.members) text << "member " << m.id << ' ' << port_->endpoint_of(m.id) << ' ' << m.key << '\n';
  for (const auto& [nonce, admitted_id] : admitted_)
    if (v.rank_of(admitted_id) >= 0) text << "admitted " << nonce << ' ' << admitted_id << '\n';
  send_text(id, MessageKind::kWelcome, v.epoch, static_cast<uint64_t>(change.resume_round), text.str());
}

std::string Membership::describe_suspects() {
  take_suspicions();
  std::set<int> ids;
  for (const InMessage& m : deferred_)
    if (m.header.kind == static_cast<uint16_t>(MessageKind::kSuspect)) ids.insert(static_cast<int>(m.header.sender));
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ", ") + std::string("peer ") + std::to_string(id) + " (" + port_->endpoint_of(id) + ")";
  return text;
}

Welcome Membership::rejoin(const std::string& why) {
  const View last = view_->view();
  const int me = view_->self_id();
  const std::string who = "peer " + std::to_string(me);
  Mailbox& box = port_->mailbox();
  // Stop watching the old members (their silence is why we are here) and forget what was queued
  // for the abandoned view: suspicions of them, proposals, joins sent to us.
  port_->set_members({}, last.epoch);
  deferred_.clear();
  while (box.take_any({MessageKind::kSuspect, MessageKind::kView, MessageKind::kJoin, MessageKind::kWelcome}, Clock::now())) {
  }
  box.acknowledge();
  std::vector<Member> contacts;
  for (const Member& m : last.members)
    if (m.id != me) contacts.push_back({m.id, port_->endpoint_of(m.id), m.key});
  if (contacts.empty()) throw CutOff(who, why + "; no other member to ask");
  const uint64_t nonce = random_nonce();
  const std::string request = join_request_text(nonce, port_->own_endpoint(), num_params_, port_->public_key());
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  log(who, ": asking the members of epoch ", last.epoch, " to take this peer back (its own model is dropped: it "
      "starts again from its contact's, like a joiner)");
  // The same request (same nonce) through each member in turn: copies that arrive late, or at
  // several members, are admitted once.
  for (size_t attempt = 0; Clock::now() < deadline; ++attempt) {
    const Member& c = contacts[attempt % contacts.size()];
    port_->send_join(c.endpoint, c.key, request, nonce);
    const auto until = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    std::optional<InMessage> m = box.take_any({MessageKind::kWelcome}, until);
    if (!m) continue;
    const std::string answer = text_of(*m);
    if (const std::optional<std::string> refused = refusal_of(answer))
      throw CutOff(who, why + "; the run refused it back: " + *refused);
    std::optional<Welcome> w = parse_welcome(answer);
    if (!w) continue;  // malformed: wait for a well-formed one
    // Join requests that reached this peer while it was cut off (copies of another rejoin's
    // included) were for a member it was not: their senders ask others. Its own copies still on
    // the way to other contacts are dropped with its join connections.
    while (box.take_any({MessageKind::kJoin, MessageKind::kSuspect}, Clock::now())) {
    }
    port_->forget_join_requests();
    admitted_.insert(w->admitted.begin(), w->admitted.end());
    box.drop_before_epoch(w->view.epoch);
    box.acknowledge();
    view_->set_view(w->view, w->id);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    log(who, ": taken back as peer ", w->id, " (rank ", w->view.rank_of(w->id), " of ", w->view.members.size(),
        ", epoch ", w->view.epoch, ") after ", static_cast<int>(ms), " ms; starting at step ", w->round);
    return *w;
  }
  throw CutOff(who, why + "; no member answered within " + std::to_string(timeout_s_) + " s");
}

void Membership::request_join(MembershipPort& port, const std::string& contact, const std::string& contact_key,
                              const std::string& own_endpoint, const std::string& own_key, size_t num_params) {
  const uint64_t nonce = random_nonce();
  port.send_join(contact, contact_key, join_request_text(nonce, own_endpoint, num_params, own_key), nonce);
  log("joining via ", contact, " as ", own_endpoint);
}

Welcome Membership::await_welcome(MembershipPort& port, const std::string& contact, Clock::time_point deadline,
                                  double timeout_s) {
  std::optional<InMessage> m = port.mailbox().take_any({MessageKind::kWelcome}, deadline);
  if (!m)
    throw Error("gossip-peer", "cannot join via " + contact + ": no welcome within " + std::to_string(timeout_s) +
                                   " s (is a peer of this run listening there? is our key allowed? has the run ended?)");
  const std::string answer = text_of(*m);
  if (const std::optional<std::string> refused = refusal_of(answer))
    throw Error("gossip-peer", "cannot join via " + contact + ": refused: " + *refused);
  std::optional<Welcome> w = parse_welcome(answer);
  if (!w) throw Error("gossip-peer", "malformed welcome from " + contact);
  return *w;
}

}  // namespace gossip::peer
