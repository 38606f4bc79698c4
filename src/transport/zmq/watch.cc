// ZmqTransport's failure detector (heartbeats, suspicions, stall detection) and the re-reading
// of rendezvous files, both on the comm thread.
#include "transport/zmq/zmq_transport.h"

#include <algorithm>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/zmq/frames.h"
#include "transport/rendezvous.h"
#include "transport/zmq/link.h"

namespace gossip::peer {

WatchSets watch_sets(const std::vector<int>& members, int self, int watchers) {
  WatchSets w;
  const int n = static_cast<int>(members.size());
  const auto at = std::find(members.begin(), members.end(), self);
  if (at == members.end()) return w;
  if (watchers <= 0 || watchers >= n - 1) {
    for (int id : members)
      if (id != self) w.beat.push_back(id), w.watch.push_back(id);
    return w;
  }
  const int p = static_cast<int>(at - members.begin());
  for (int d = 1; d <= watchers; ++d) {
    w.beat.push_back(members[(p + d) % n]);
    w.watch.push_back(members[(p - d + n) % n]);
  }
  return w;
}

// Heartbeats the members this peer is a watcher for (all of them while a view change runs) and
// reports one it watches that has been silent too long (once), dropping what was queued for it
// so that zero-copy buffers are released.
void ZmqTransport::watch_members(Clock::time_point now) {
  std::vector<int> members;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    members = members_;
    if (seen_members_version_ != members_version_) {
      seen_members_version_ = members_version_;
      watch_since_ = now;
      change_seen_ = {};  // a new view: the change that made it is over
      std::erase_if(asked_, [&](const auto& a) { return !std::count(members_.begin(), members_.end(), a.first); });
      for (auto it = links_.begin(); it != links_.end();) {
        if (std::find(members_.begin(), members_.end(), it->first) == members_.end()) {
          if (it->second.dealer) it->second.dealer->set(zmq::sockopt::linger, 0);
          it = links_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  // A link to a non-member (a late proposer answered with our decision, a refused joiner) is
  // closed once its queue is empty; the dealer's linger still delivers what it took. Left open,
  // its identity (ours) would stay taken on the ROUTER at that endpoint, and a later connection
  // of ours there (to a peer that rejoined on it) would be parked by ZeroMQ and never read.
  for (auto it = links_.begin(); it != links_.end();) {
    const bool member = std::find(members.begin(), members.end(), it->first) != members.end();
    if (!member && it->second.pending.empty() && it->second.lent.empty()) it = links_.erase(it);
    else ++it;
  }
  if (!options_.elastic || options_.heartbeat_s <= 0 || rank() < 0) return;
  // A member pinged for another that never answered: whoever asked has suspected it by now.
  std::erase_if(relay_, [&](const auto& r) {
    return now - r.second.pinged > std::chrono::duration<double>(2 * options_.dead_after_s);
  });
  // This thread did not run for longer than the heartbeat timeout (the process was paused,
  // swapped out or starved): the silence it measured is its own. What was queued meanwhile has
  // just been read; every member gets a whole timeout again before it is suspected.
  const auto dead_after = std::chrono::duration<double>(options_.dead_after_s);
  if (last_watch_ != Clock::time_point{} && now - last_watch_ > dead_after) {
    log("peer ", rank(), ": this peer was stalled for ", std::chrono::duration<double>(now - last_watch_).count(),
        " s (paused or starved): members get ", options_.dead_after_s, " s to be heard from before any is suspected");
    watch_since_ = now;
  }
  last_watch_ = now;
  // While a view change runs every member is watched: a member that only silent ones watched
  // (a partition) would otherwise hold it. Members in the change send their proposals (and
  // repeat them to those they still wait for); every member also gets a heartbeat every third of
  // dead_after_s (a member whose training thread has not reached the change yet is alive all
  // the same), those we watch for as usual.
  const WatchSets own_sets = watch_sets(members, rank(), options_.watchers);
  const bool change = changing(now);
  const WatchSets sets = change ? watch_sets(members, rank(), 0) : own_sets;
  const bool beat = now - last_beat_ > std::chrono::duration<double>(options_.heartbeat_s);
  if (beat) last_beat_ = now;
  const bool change_beat =
      change && now - last_change_beat_ > std::chrono::duration<double>(std::max(options_.heartbeat_s, options_.dead_after_s / 3));
  if (change_beat) last_change_beat_ = now;
  const std::vector<int>& own = own_sets.watch;
  for (int id : sets.beat) {
    const bool ours = std::find(own_sets.beat.begin(), own_sets.beat.end(), id) != own_sets.beat.end();
    if (suspected_[id] || !(ours ? beat : change_beat)) continue;
    queue_heartbeat(id, 2);
  }
  // Every member is linked, not only those heartbeated: a view change talks to all of them, and
  // making 63 connections in each of 64 peers only then took ~2 s of the change on 2 cores. A new
  // link starts with one beat: a connection that carries nothing would count as unverified on the
  // other end, whose ConnectionGuard closes it after unverified_idle_s, and ZeroMQ would dial
  // again, every minute (seen on the exponential graph, where most links carry no heartbeats).
  for (int id : members) {
    if (id == rank() || suspected_[id]) continue;
    const bool linked = links_[id].dealer.has_value();
    if (connect(links_[id], id) && !linked) queue_heartbeat(id, 2);
  }
  for (int id : sets.watch) {
    if (suspected_[id]) continue;
    // A member watched only because a change runs is timed from when that change was seen.
    const bool own_watch = std::find(own.begin(), own.end(), id) != own.end();
    const Clock::time_point since = own_watch ? watch_since_ : std::max(watch_since_, change_since_);
    auto h = heard_.find(id);
    const bool ever = h != heard_.end() && h->second >= since - std::chrono::hours(1);
    const Clock::time_point last = ever ? std::max(h->second, since) : since;
    // Never heard of: at start-up peers may come up slowly (timeout_s); a member added by
    // a view change is already running, so it gets only a few seconds more than the timeout.
    const double grace = seen_members_version_ == 0 ? options_.timeout_s : options_.dead_after_s + 5;
    const double limit = ever || !own_watch ? options_.dead_after_s : std::max(options_.dead_after_s, grace);
    // One we watch for, silent for half the limit (ask_after_s): others are asked whether
    // they hear from it (probe.cc), and what they answer moves `last` on. Not at start-up before
    // a first word, and not for members watched only while a change runs: the change needs
    // every member's own messages anyway, and asking about each of many silent members (a
    // partition) would cost every member O(n) messages a second.
    const double silent_s = std::chrono::duration<double>(now - last).count();
    if (ever && own_watch && silent_s > ask_after_s())
      ask_about(id, members, silent_s, now);
    if (now - last > std::chrono::duration<double>(limit)) {
      suspected_[id] = true;
      asked_.erase(id);
      const auto dialled = dialled_.find(id);  // where we reached it (the file may say otherwise now)
      log("peer ", rank(), ": no word from peer ", id, " (", dialled != dialled_.end() ? dialled->second : endpoint_of_id(id),
          ") for ", limit, " s: suspected dead");
      if (auto link = links_.find(id); link != links_.end()) {
        if (link->second.dealer) link->second.dealer->set(zmq::sockopt::linger, 0);
        links_.erase(link);
      }
      InMessage note;
      note.header.kind = MessageKind::kSuspect;
      note.header.sender = static_cast<uint32_t>(id);
      mailbox_.put(std::move(note), /*interrupt=*/true);
    }
  }
}

bool ZmqTransport::changing(Clock::time_point now) const {
  // While a change runs, members repeat their proposal to those they wait for at least every
  // second (Membership::settle; every n/64 s in a view of n > 64) and a heartbeat comes every
  // third of dead_after_s; a change seen within dead_after_s + 1.5 s is taken to be still running.
  return change_seen_ != Clock::time_point{} &&
         now - change_seen_ <= std::chrono::duration<double>(options_.dead_after_s + 1.5);
}

void ZmqTransport::note_view_change(Clock::time_point now, uint32_t epoch) {
  if (!changing(now)) change_since_ = now;
  change_seen_ = now;
  // A joiner's model (kModel) is not the old epoch's: it goes out whatever happens next.
  const auto stale = [epoch](const OutMessage& m) {
    return is_vector_kind(m.header.kind) && m.header.kind != MessageKind::kModel && m.header.epoch <= epoch;
  };
  for (auto& [id, link] : links_) std::erase_if(link.pending, stale);
  // Lent chunks waiting for the training thread, which is about to abandon its round, are
  // copied here, so their lenders are not kept waiting for their buffers through the change.
  copy_waiting_lent(Clock::time_point::max());
}

// A neighbour that binds port 0 may have been dialled through a file an earlier run left (on
// another host, where its process cannot be checked): once a second, its file is read again, and
// when it names another endpoint the link is made anew there. Nothing is lost: with `immediate`
// a message only leaves our queue onto a finished connection.
void ZmqTransport::recheck_rendezvous(Clock::time_point now) {
  if (options_.rendezvous_dir.empty() || now - last_recheck_ < std::chrono::seconds(1)) return;
  last_recheck_ = now;
  for (auto& [id, link] : links_) {
    if (!link.dealer || !link.lent.empty()) continue;
    std::string configured;
    {
      std::lock_guard<std::mutex> lock(peers_mutex_);
      auto it = endpoints_.find(id);
      if (it != endpoints_.end()) configured = it->second;
    }
    if (!binds_any_port(configured)) continue;
    const std::optional<std::string> now_published = read_published(options_.rendezvous_dir, id, options_.run_id);
    if (!now_published || *now_published == link.dialled) continue;
    log("peer ", rank(), ": peer ", id, " now publishes ", *now_published, " (was dialled at ", link.dialled,
        "): connecting there");
    link.dealer->set(zmq::sockopt::linger, 0);
    link.dealer.reset();
  }
}

}  // namespace gossip::peer
