// Joins: the joiner's request and wait for its welcome, a member's welcome to it, and the rejoin
// of a member that was cut off.
#include <map>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "membership/membership.h"

namespace gossip::peer {
namespace {

uint64_t random_nonce() {
  std::random_device rd;
  return (uint64_t(rd()) << 32 | rd()) & ((1ull << 62) - 1);
}

// A joiner's request: its nonce (which orders concurrent joins and names copies of one request),
// the endpoint it listens on, its model size, its shared settings ("-" for none) and its public
// key (empty without CurveZMQ).
std::string join_request_text(uint64_t nonce, const std::string& endpoint, const JoinTerms& terms,
                              const std::string& key) {
  return "join " + std::to_string(nonce) + " " + endpoint + " " + std::to_string(terms.num_params) + " " +
         (terms.settings.empty() ? "-" : terms.settings) + " " + key + "\n";
}

// "a=1;b=2" as (name, value) pairs in order; an item without '=' has the value "".
std::vector<std::pair<std::string, std::string>> settings_items(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> items;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(';', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    if (!item.empty()) items.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
    begin = end + 1;
  }
  return items;
}

// The reason of a "refused ..." answer to a join request (escaped: it came from the network).
std::optional<std::string> refusal_of(const std::string& answer) {
  if (answer.rfind("refused ", 0) != 0) return std::nullopt;
  return escape_for_log(answer.substr(8, answer.find('\n') - 8), 300);
}

}  // namespace

std::string settings_difference(const std::string& joiner, const std::string& run) {
  constexpr size_t kMaxNamed = 4;  // differences named; the rest are counted
  std::map<std::string, std::string> theirs;
  for (auto& [name, value] : settings_items(joiner == "-" ? "" : joiner)) theirs.emplace(name, value);
  std::string text;
  size_t named = 0, more = 0;
  for (const auto& [name, value] : settings_items(run)) {
    const auto t = theirs.find(name);
    if (t != theirs.end() && t->second == value) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    text += (named++ ? "; its " : "its ") + name + " is " +
            (t == theirs.end() ? std::string("not given") : escape_for_log(t->second, 40)) + ", this run's " + value;
  }
  if (more) text += "; and " + std::to_string(more) + " more";
  return text;
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
  const std::string request = join_request_text(nonce, port_->own_endpoint(), terms_, port_->public_key());
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
    const std::string answer = message_text(*m);
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
  throw CutOff(who, why + "; no member answered within " + number_text(timeout_s_) + " s");
}

void Membership::request_join(MembershipPort& port, const std::string& contact, const std::string& contact_key,
                              const std::string& own_endpoint, const std::string& own_key, const JoinTerms& terms) {
  const uint64_t nonce = random_nonce();
  port.send_join(contact, contact_key, join_request_text(nonce, own_endpoint, terms, own_key), nonce);
  log("joining via ", contact, " as ", own_endpoint);
}

Welcome Membership::await_welcome(MembershipPort& port, const std::string& contact, Clock::time_point deadline,
                                  double timeout_s) {
  std::optional<InMessage> m = port.mailbox().take_any({MessageKind::kWelcome}, deadline);
  if (!m)
    throw Error("gossip-peer", "cannot join via " + contact + ": no welcome within " + number_text(timeout_s) +
                                   " s (is a peer of this run listening there? is our key allowed? has the run ended?)");
  const std::string answer = message_text(*m);
  if (const std::optional<std::string> refused = refusal_of(answer))
    throw Error("gossip-peer", "cannot join via " + contact + ": refused: " + *refused);
  std::optional<Welcome> w = parse_welcome(answer);
  if (!w) throw Error("gossip-peer", "malformed welcome from " + contact);
  return *w;
}

}  // namespace gossip::peer
