// Received chunks waiting for the training thread, keyed by (kind, sender, round, tag). Filled by
// a communication thread, drained by the training thread; all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "transport/transport.h"

namespace gossip::peer {

class Mailbox {
 public:
  // With `interrupt`, also interrupt() (one wake-up for both).
  void put(InMessage message, bool interrupt = false);
  // Waits for a chunk under `key` until `deadline`; rethrows a failure set by fail().
  std::optional<InMessage> take(const MatchKey& key, Clock::time_point deadline);
  bool ready(const MatchKey& key);
  // Makes every waiting and later take() throw MembershipInterrupt until acknowledge().
  void interrupt();
  void acknowledge();
  // The oldest message of any of `kinds` (any sender, round, epoch); never interrupted.
  std::optional<InMessage> take_any(const std::vector<MessageKind>& kinds, Clock::time_point deadline);
  bool has_kind(MessageKind kind);
  // Drops every queued message of an epoch before `epoch` (their round was abandoned); join
  // requests and suspicions, which belong to no epoch, stay.
  void drop_before_epoch(uint32_t epoch);
  // Calls `fn` on every queued message, under the lock (a message `fn` leaves with keep = false
  // is dropped): the comm thread copies lent values with it (those waiting long, and all of them
  // when a view change begins).
  void for_each(const std::function<void(InMessage&, bool& keep)>& fn);
  // Stores the communication thread's error; every later take() rethrows it.
  void fail(std::exception_ptr error);
  size_t pending() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<MatchKey, std::deque<InMessage>> queues_;  // guarded by mutex_
  std::exception_ptr error_;                          // guarded by mutex_
  bool interrupted_ = false;                          // guarded by mutex_
};

}  // namespace gossip::peer
