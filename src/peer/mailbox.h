// Received chunks waiting for the training thread, keyed by (kind, sender, round, tag). Filled by
// a communication thread, drained by the training thread; all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>

#include "peer/transport.h"

namespace gossip::peer {

class Mailbox {
 public:
  void put(InMessage message);
  // Waits for a chunk under `key` until `deadline`; rethrows a failure set by fail().
  std::optional<InMessage> take(const MatchKey& key, Clock::time_point deadline);
  bool ready(const MatchKey& key);
  // Stores the communication thread's error; every later take() rethrows it.
  void fail(std::exception_ptr error);
  size_t pending() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<MatchKey, std::deque<InMessage>> queues_;  // guarded by mutex_
  std::exception_ptr error_;                          // guarded by mutex_
};

}  // namespace gossip::peer
