#include "peer/membership.h"

#include <algorithm>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "peer/zmq_transport.h"

namespace gossip::peer {
namespace {

const std::vector<MessageKind> kChangeKinds = {MessageKind::kView, MessageKind::kJoin, MessageKind::kSuspect};

std::string text_of(const InMessage& m) {
  std::string t(reinterpret_cast<const char*>(m.data), m.count * sizeof(float));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

std::string describe(const std::set<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s.empty() ? "none" : s;
}

}  // namespace

int View::rank_of(int id) const {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].id == id) return static_cast<int>(i);
  return -1;
}

View next_view(const View& v, const std::set<int>& gone, const std::set<JoinRequest>& joins) {
  View next;
  next.epoch = v.epoch + 1;
  next.next_id = v.next_id;
  for (const Member& m : v.members)
    if (!gone.count(m.id)) next.members.push_back(m);
  for (const JoinRequest& j : joins) next.members.push_back({next.next_id++, j.endpoint, j.key});
  return next;
}

// ---- ViewTransport ----

ViewTransport::ViewTransport(ZmqTransport& inner, View view, int self_id)
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
      if (!filter_ || filter_()) throw;
      inner_->mailbox().acknowledge();
      if (filter_()) throw;  // arrived between the check and the acknowledgement
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

Membership::Membership(ZmqTransport& zmq, ViewTransport& view, double timeout_s)
    : zmq_(&zmq), view_(&view), timeout_s_(timeout_s) {
  view.set_change_filter([this] { return pending(); });
}

bool Membership::pending() {
  const View v = view_->view();
  while (auto note = zmq_->mailbox().take_any({MessageKind::kSuspect}, Clock::now()))
    if (v.rank_of(static_cast<int>(note->header.sender)) >= 0) deferred_.push_back(std::move(*note));
  if (!deferred_.empty()) return true;
  for (MessageKind k : kChangeKinds)
    if (zmq_->mailbox().has_kind(k)) return true;
  return false;
}

void Membership::send_text(int id, MessageKind kind, uint32_t epoch, uint64_t round, const std::string& text) {
  auto body = std::make_shared<std::string>(pad_text(text));
  OutMessage m;
  m.header.kind = static_cast<uint16_t>(kind);
  m.header.epoch = epoch;
  m.header.round = round;
  m.header.total_floats = body->size() / sizeof(float);
  m.header.payload_bytes = static_cast<uint32_t>(body->size());
  m.data = reinterpret_cast<const float*>(body->data());
  m.count = body->size() / sizeof(float);
  m.owner = body;
  zmq_->send(id, std::move(m));
}

void Membership::announce_leave(int64_t round) {
  const View v = view_->view();
  const int me = view_->self_id();
  const std::string text = "round " + std::to_string(round) + "\ngone " + std::to_string(me) + "\n";
  for (const Member& m : v.members)
    if (m.id != me) send_text(m.id, MessageKind::kView, v.epoch, static_cast<uint64_t>(round), text);
  log("peer ", me, ": leaving the run at round ", round, " (told ", v.members.size() - 1, " members)");
}

std::optional<ViewChange> Membership::agree(int64_t round) {
  const View v = view_->view();
  const int me = view_->self_id();
  const auto started = Clock::now();
  Mailbox& box = zmq_->mailbox();
  box.acknowledge();
  Proposal mine;
  mine.round = round;
  std::map<uint64_t, JoinRequest> joins;
  std::map<int, Proposal> latest;  // each member's newest proposal of this epoch
  bool any_view_message = false;
  std::vector<InMessage> later;

  auto absorb = [&](const InMessage& m) {
    const auto kind = static_cast<MessageKind>(m.header.kind);
    const int sender = static_cast<int>(m.header.sender);
    if (kind == MessageKind::kSuspect) {
      if (v.rank_of(sender) >= 0) mine.gone.insert(sender);
      return;
    }
    std::istringstream in(text_of(m));
    if (kind == MessageKind::kJoin) {
      JoinRequest j;
      std::string word;
      if (!(in >> word >> j.nonce >> j.endpoint) || word != "join" || j.endpoint.rfind("tcp://", 0) != 0) {
        log("peer ", me, ": dropped a malformed join request");
        return;
      }
      in >> j.key;  // with CurveZMQ the comm thread checked it is the key the joiner proved it holds
      j.via = me;
      if (!joins.count(j.nonce)) log("peer ", me, ": join request from ", j.endpoint);
      joins.emplace(j.nonce, j);
      mine.joins.insert(j.nonce);
      return;
    }
    if (m.header.epoch > v.epoch) {  // someone is already in the next change: keep it for then
      later.push_back(m);
      return;
    }
    if (m.header.epoch < v.epoch || v.rank_of(sender) < 0) return;  // stale or from a non-member
    Proposal p;
    std::string line;
    bool ok = true;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string word;
      f >> word;
      if (word == "round") {
        ok &= static_cast<bool>(f >> p.round);
      } else if (word == "gone") {
        for (int id; f >> id;) p.gone.insert(id);
      } else if (word == "join") {
        JoinRequest j;
        ok &= static_cast<bool>(f >> j.nonce >> j.endpoint >> j.via);
        f >> j.key;  // optional
        if (ok) {
          joins.emplace(j.nonce, j);
          p.joins.insert(j.nonce);
        }
      } else if (!word.empty()) {
        ok = false;
      }
    }
    if (!ok) {
      log("peer ", me, ": dropped a malformed view-change message from peer ", sender);
      return;
    }
    any_view_message = true;
    for (int id : p.gone)
      if (v.rank_of(id) >= 0) mine.gone.insert(id);
    mine.joins.insert(p.joins.begin(), p.joins.end());
    latest[sender] = p;
  };

  for (InMessage& m : deferred_) absorb(m);
  deferred_.clear();
  while (auto m = box.take_any(kChangeKinds, Clock::now())) absorb(*m);
  if (!any_view_message && mine.gone.empty() && mine.joins.empty()) {
    deferred_ = std::move(later);
    return std::nullopt;
  }

  Proposal sent;
  bool sent_any = false;
  for (;;) {
    if (mine.gone.count(me))
      throw Error("peer " + std::to_string(me), "the other members declared this peer gone (silent past the heartbeat "
                                                "timeout?): it has left the run");
    if (!sent_any || !(sent == mine)) {
      std::ostringstream text;
      text << "round " << round << "\ngone";
      for (int id : mine.gone) text << ' ' << id;
      text << '\n';
      for (uint64_t n : mine.joins)
        text << "join " << n << ' ' << joins[n].endpoint << ' ' << joins[n].via << ' ' << joins[n].key << '\n';
      for (const Member& m : v.members)
        if (m.id != me && !mine.gone.count(m.id)) send_text(m.id, MessageKind::kView, v.epoch, round, text.str());
      sent = mine;
      sent_any = true;
    }
    std::set<int> waiting;
    for (const Member& m : v.members) {
      if (m.id == me || mine.gone.count(m.id)) continue;
      auto it = latest.find(m.id);
      if (it == latest.end() || !(it->second == mine)) waiting.insert(m.id);
    }
    if (waiting.empty()) break;
    if (Clock::now() - started > std::chrono::duration<double>(timeout_s_))
      throw Error("peer " + std::to_string(me), "view change of epoch " + std::to_string(v.epoch) + " did not settle in " +
                                                    std::to_string(timeout_s_) + " s; waiting for members " +
                                                    describe(waiting));
    if (auto m = box.take_any(kChangeKinds, Clock::now() + std::chrono::milliseconds(100))) absorb(*m);
  }

  ViewChange change;
  change.gone = mine.gone;
  std::set<JoinRequest> join_set;
  for (uint64_t n : mine.joins) join_set.insert(joins[n]);
  change.view = next_view(v, mine.gone, join_set);
  change.resume_round = round;
  for (const auto& [id, p] : latest)
    if (!mine.gone.count(id)) change.resume_round = std::max(change.resume_round, p.round);
  for (const JoinRequest& j : join_set)
    if (j.via == me) change.welcome.push_back(j);
  view_->set_view(change.view, me);
  box.drop_before_epoch(change.view.epoch);
  box.acknowledge();
  deferred_ = std::move(later);
  if (pending()) box.interrupt();  // another change already started: do not block in a receive
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  log("peer ", me, ": view change to epoch ", change.view.epoch, ": ", change.view.members.size(), " members (gone: ",
      describe(change.gone), ", joined: ", join_set.size(), "), resuming at round ", change.resume_round, ", agreed in ",
      static_cast<int>(ms), " ms");
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
  for (const Member& m : v.members) text << "member " << m.id << ' ' << zmq_->endpoint_of(m.id) << ' ' << m.key << '\n';
  send_text(id, MessageKind::kWelcome, v.epoch, static_cast<uint64_t>(change.resume_round), text.str());
}

Welcome Membership::join(ZmqTransport& zmq, const std::string& contact, const std::string& contact_key,
                         const std::string& own_endpoint, const std::string& own_key, double timeout_s) {
  std::random_device rd;
  const uint64_t nonce = (uint64_t(rd()) << 32 | rd()) & ((1ull << 62) - 1);
  const auto started = Clock::now();
  zmq.send_join(contact, contact_key, "join " + std::to_string(nonce) + " " + own_endpoint + " " + own_key + "\n", nonce);
  log("joining via ", contact, " as ", own_endpoint);
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::optional<InMessage> m = zmq.mailbox().take_any({MessageKind::kWelcome}, deadline);
  if (!m)
    throw Error("gossip-peer", "cannot join via " + contact + ": no welcome within " + std::to_string(timeout_s) +
                                   " s (is a peer of this run listening there? is our key allowed?)");
  Welcome w;
  std::istringstream in(text_of(*m));
  std::string line;
  bool ok = true;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string word;
    f >> word;
    if (word == "epoch") ok &= static_cast<bool>(f >> w.view.epoch);
    else if (word == "id") ok &= static_cast<bool>(f >> w.id);
    else if (word == "contact") ok &= static_cast<bool>(f >> w.contact_id);
    else if (word == "round") ok &= static_cast<bool>(f >> w.round);
    else if (word == "total") ok &= static_cast<bool>(f >> w.total_steps);
    else if (word == "next") ok &= static_cast<bool>(f >> w.view.next_id);
    else if (word == "member") {
      Member mem;
      ok &= static_cast<bool>(f >> mem.id >> mem.endpoint);
      f >> mem.key;
      w.view.members.push_back(mem);
    } else if (!word.empty()) {
      ok = false;
    }
  }
  if (!ok || w.view.rank_of(w.id) < 0 || w.view.rank_of(w.contact_id) < 0)
    throw Error("gossip-peer", "malformed welcome from " + contact);
  return w;
}

}  // namespace gossip::peer
