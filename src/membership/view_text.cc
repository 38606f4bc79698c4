// The pure parts of elastic membership: view arithmetic and the text forms of proposals and
// welcomes (no sockets here, so the fuzzer links this file alone).
#include <algorithm>
#include <charconv>
#include <sstream>

#include "membership/membership.h"

namespace gossip::peer {
namespace {

// Calls f(word, rest) for every non-empty line "word rest..." of `text`; false when any call is.
template <class F>
bool each_line(const std::string& text, F&& f) {
  std::istringstream in(text);
  std::string line;
  bool ok = true;
  while (std::getline(in, line)) {
    std::istringstream rest(line);
    std::string word;
    if (rest >> word) ok &= f(word, rest);
  }
  return ok;
}

// Reads the rest of the line as ids separated by spaces (from_chars: a proposal of a partition of
// 1 000 names 500, and every member parses about a thousand proposals); false on anything else.
bool parse_ids(std::istringstream& f, IdSet* ids) {
  std::string rest;
  std::getline(f, rest);
  std::vector<int> found;
  const char* at = rest.data();
  const char* end = at + rest.size();
  for (;;) {
    while (at != end && *at == ' ') ++at;
    if (at == end) break;
    int id = 0;
    const auto [next, error] = std::from_chars(at, end, id);
    if (error != std::errc() || (next != end && *next != ' ')) return false;
    found.push_back(id);
    at = next;
  }
  *ids = IdSet(found.begin(), found.end());
  return true;
}

}  // namespace

std::string message_text(const InMessage& m) {
  std::string t(reinterpret_cast<const char*>(m.data), m.count * sizeof(float));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

std::string id_list(const IdSet& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s.empty() ? "none" : s;
}

int View::rank_of(int id) const {
  // Ids grow along the member list (next_view appends joiners with fresh ids), so a binary search
  // finds a member in O(log n) — a change among 1 000 members asks this millions of times; the
  // scan after a miss keeps the answer right for any list.
  auto it = std::lower_bound(members.begin(), members.end(), id, [](const Member& m, int v) { return m.id < v; });
  if (it != members.end() && it->id == id) return static_cast<int>(it - members.begin());
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].id == id) return static_cast<int>(i);
  return -1;
}

bool keeps_quorum(const View& v, const IdSet& gone, const IdSet& left) {
  int voters = 0, staying = 0, lowest = -1;
  for (const Member& m : v.members) {
    if (left.count(m.id)) continue;  // left on its own: it takes no side
    ++voters;
    if (lowest < 0 || m.id < lowest) lowest = m.id;
    if (!gone.count(m.id)) ++staying;
  }
  if (voters == 0) return true;  // everyone else left gracefully
  if (2 * staying != voters) return 2 * staying > voters;
  return !gone.count(lowest);  // exactly half: the half that holds the lowest id goes on
}

View next_view(const View& v, const IdSet& gone, const std::set<JoinRequest>& joins) {
  View next;
  next.epoch = v.epoch + 1;
  next.next_id = v.next_id;
  for (const Member& m : v.members)
    if (!gone.count(m.id)) next.members.push_back(m);
  for (const JoinRequest& j : joins) next.members.push_back({next.next_id++, j.endpoint, j.key});
  return next;
}

std::string proposal_text(const ViewProposal& p, const std::map<uint64_t, JoinRequest>& joins) {
  std::ostringstream text;
  text << "round " << p.round << "\ngone";
  for (int id : p.gone) text << ' ' << id;
  text << '\n';
  for (uint64_t n : p.joins) {
    const JoinRequest& j = joins.at(n);
    text << "join " << n << ' ' << j.endpoint << ' ' << j.via << ' ' << j.key << '\n';
  }
  text << "ready " << (p.ready ? 1 : 0) << '\n';
  return text.str();
}

std::optional<ViewProposal> parse_proposal(const std::string& text, std::map<uint64_t, JoinRequest>* joins) {
  ViewProposal p;
  std::map<uint64_t, JoinRequest> found;
  const bool ok = each_line(text, [&](const std::string& word, std::istringstream& f) {
    if (word == "round") return static_cast<bool>(f >> p.round);
    if (word == "gone") return parse_ids(f, &p.gone);
    if (word == "join") {
      JoinRequest j;
      if (!(f >> j.nonce >> j.endpoint >> j.via)) return false;
      f >> j.key;  // optional
      found.emplace(j.nonce, j);
      p.joins.insert(j.nonce);
      return true;
    }
    if (word == "ready") {
      int r = 0;
      if (!(f >> r) || (r != 0 && r != 1)) return false;
      p.ready = r == 1;
      return true;
    }
    return false;
  });
  if (!ok) return std::nullopt;
  // A joiner that asked several members (a rejoin tries them in turn) is welcomed by exactly one:
  // every member keeps the lowest member id it saw the request arrive at.
  for (const auto& [nonce, j] : found) {
    auto [it, added] = joins->emplace(nonce, j);
    if (!added) it->second.via = std::min(it->second.via, j.via);
  }
  return p;
}

std::optional<Welcome> parse_welcome(const std::string& text) {
  Welcome w;
  const bool ok = each_line(text, [&w](const std::string& word, std::istringstream& f) {
    if (word == "epoch") return static_cast<bool>(f >> w.view.epoch);
    if (word == "id") return static_cast<bool>(f >> w.id);
    if (word == "contact") return static_cast<bool>(f >> w.contact_id);
    if (word == "round") return static_cast<bool>(f >> w.round);
    if (word == "total") return static_cast<bool>(f >> w.total_steps);
    if (word == "next") return static_cast<bool>(f >> w.view.next_id);
    if (word == "admitted") {
      uint64_t nonce = 0;
      int id = 0;
      if (!(f >> nonce >> id)) return false;
      w.admitted[nonce] = id;
      return true;
    }
    if (word != "member") return false;
    Member mem;
    if (!(f >> mem.id >> mem.endpoint)) return false;
    f >> mem.key;  // optional
    w.view.members.push_back(mem);
    return true;
  });
  if (!ok || w.view.rank_of(w.id) < 0 || w.view.rank_of(w.contact_id) < 0 || w.round < 0 || w.total_steps < w.round)
    return std::nullopt;
  return w;
}

}  // namespace gossip::peer
