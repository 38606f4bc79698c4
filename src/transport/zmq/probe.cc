// ZmqTransport's indirect probes (SWIM, Das et al. 2002), on the comm thread: before a watcher
// suspects a member it has not heard from, it asks a few others whether they do. A member that
// only the watcher's own link lost (a cut cable, a one-way firewall rule, a flapping route) so
// stays in the run; a dead or stalled one is heard by nobody and suspected as before. Every
// answer says *when* its sender last heard from the member, never just "alive", so a member
// that stopped (SIGSTOP, swapped out) is not kept alive by second-hand word: the watcher's clock
// for it never runs later than the freshest first-hand message anyone got from it.
#include "transport/zmq/zmq_transport.h"

#include <algorithm>
#include <sstream>

#include "common/log.h"
#include "transport/zmq/link.h"

namespace gossip::peer {

std::vector<int> probe_helpers(const std::vector<int>& members, int self, int target, int watchers, int k,
                               uint64_t turn) {
  std::vector<int> helpers;
  if (k <= 0 || std::find(members.begin(), members.end(), target) == members.end()) return helpers;
  const auto usable = [&](int id) {
    return id != self && id != target && std::find(helpers.begin(), helpers.end(), id) == helpers.end();
  };
  // The target's other watchers: the members it heartbeats (all of them with watchers 0).
  const std::vector<int> beaten = watch_sets(members, target, watchers).beat;
  std::vector<int> first;
  for (int id : beaten)
    if (usable(id)) first.push_back(id);
  for (size_t i = 0; i < first.size() && static_cast<int>(helpers.size()) < k; ++i)
    helpers.push_back(first[(i + turn) % first.size()]);
  // Then the rest of the view, from a place past our own that moves on every turn (so that the
  // askers of one member do not all ask the same few).
  const size_t n = members.size();
  const size_t own = static_cast<size_t>(std::find(members.begin(), members.end(), self) - members.begin());
  for (size_t i = 0; i < n && static_cast<int>(helpers.size()) < k; ++i) {
    const int id = members[(own + 1 + i + turn * static_cast<uint64_t>(k)) % n];
    if (usable(id)) helpers.push_back(id);
  }
  return helpers;
}

// How recent a word from a member must be to count as news about it: about a watched member
// silent for longer (every ask is about one silent for ask_after_s()), an answer that old or
// older would only move the watcher's clock by how late the answerer happened to read the same
// last heartbeat, and delay the suspicion of a member that crashed.
double ZmqTransport::fresh_word_s() const {
  return std::max(options_.dead_after_s / 4, 2 * options_.heartbeat_s);
}
double ZmqTransport::ask_after_s() const {
  return std::max(options_.dead_after_s / 2, fresh_word_s() + options_.heartbeat_s);
}

bool ZmqTransport::is_member(int id) const {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  return std::find(members_.begin(), members_.end(), id) != members_.end();
}

void ZmqTransport::queue_probe(int to, ProbeTag tag, int about, double age_s) {
  if (suspected_[to]) return;
  queue_heartbeat(to, 8, tag, about, age_s);  // past 8 queued the link is not draining: more would only pile up
}

void ZmqTransport::queue_heartbeat(int to, size_t max_pending, ProbeTag tag, int about, double age_s) {
  Link& link = links_[to];
  if (link.pending.size() >= max_pending) return;
  OutMessage m;
  m.header.kind = MessageKind::kHeartbeat;
  m.header.sender = static_cast<uint32_t>(rank());
  m.header.tag = tag;
  m.header.round = tag == kBeat ? options_.settings_digest : static_cast<uint64_t>(std::max(about, 0));
  m.header.weight = age_s;
  m.data = &kMagic;  // zero values; any valid pointer
  link.pending.push_back(std::move(m));
  ++heartbeats_sent_;
}

// Asks up to indirect_probes others about `target`, at most every sixth of dead_after_s (and
// every heartbeat), until it is heard from again or suspected.
void ZmqTransport::ask_about(int target, const std::vector<int>& members, double silent_s, Clock::time_point now) {
  if (options_.indirect_probes <= 0) return;
  Asked& asked = asked_[target];
  const double every_s = std::max(options_.heartbeat_s, options_.dead_after_s / 6);
  if (asked.at != Clock::time_point{} && now - asked.at < std::chrono::duration<double>(every_s)) return;
  const bool first = asked.at == Clock::time_point{};
  asked.at = now;
  const std::vector<int> helpers =
      probe_helpers(members, rank(), target, options_.watchers, options_.indirect_probes, probe_turn_++);
  for (int id : helpers) queue_probe(id, kProbeAsk, target, 0);
  if (first && !helpers.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < helpers.size(); ++i) names << (i ? ", " : "") << helpers[i];
    log("peer ", rank(), ": no word from peer ", target, " for ", silent_s, " s: asking peers ", names.str(),
        " whether they hear from it");
  }
}

// A beat's settings digest against ours (0 on either side: nothing to compare). A member started
// with other shared settings is logged once; the error its missing messages end in names it.
void ZmqTransport::compare_settings(int from, uint64_t digest) {
  if (digest == 0 || options_.settings_digest == 0 || digest == options_.settings_digest || !is_member(from)) return;
  if (!drops_by_member_.note_other_settings(from)) return;  // said already
  log("peer ", rank(), ": ", describe(from), " was started with other shared settings than this peer (its "
      "heartbeats carry another digest of the algorithm, topology, wire, checksum, log_every, ...): exchanges "
      "with it may stall or fail; start every peer with the same YAML");
}

// A probe from another member (its sender checked by judge()).
void ZmqTransport::answer_probe(const Header& h, Clock::time_point now) {
  const int from = static_cast<int>(h.sender);
  const int about = h.round < (1u << 24) ? static_cast<int>(h.round) : -1;
  if (h.tag == kProbePing) {
    if (is_member(from)) queue_probe(from, kBeat, 0, 0);
    return;
  }
  if (about < 0 || about == rank() || about == from || !is_member(about) || !is_member(from)) return;
  if (h.tag == kProbeAsk) {
    const auto heard = heard_.find(about);
    const double age_s = heard == heard_.end() ? 1e9 : std::chrono::duration<double>(now - heard->second).count();
    if (age_s <= fresh_word_s()) {
      queue_probe(from, kProbeVouch, about, age_s);
    } else {  // not heard lately: ping it, and vouch when it answers
      Relay& relay = relay_[about];
      relay.askers.insert(from);
      if (now - relay.pinged > std::chrono::duration<double>(options_.heartbeat_s)) {
        relay.pinged = now;
        queue_probe(about, kProbePing, 0, 0);
      }
    }
  } else if (h.tag == kProbeVouch) {
    if (suspected_[about]) return;
    if (!(h.weight >= 0 && h.weight <= fresh_word_s())) return;  // NaN, or no news
    const auto since = now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(h.weight));
    Clock::time_point& heard = heard_[about];
    if (since <= heard) return;  // we knew as much
    heard = since;
    auto asked = asked_.find(about);
    if (asked != asked_.end() && !asked->second.vouched) {
      asked->second.vouched = true;
      log("peer ", rank(), ": peer ", from, " heard from peer ", about, " ", static_cast<int>(h.weight * 1000),
          " ms ago: not suspected (the link between us may be cut)");
    }
  }
}

// A message straight from `id`: its clock restarts, its silence (if any) is over, and those who
// asked us about it learn at once.
void ZmqTransport::note_heard(int id, Clock::time_point now) {
  heard_[id] = now;
  asked_.erase(id);
  auto relay = relay_.find(id);
  if (relay == relay_.end()) return;
  for (int asker : relay->second.askers) queue_probe(asker, kProbeVouch, id, 0);
  relay_.erase(relay);
}

}  // namespace gossip::peer
