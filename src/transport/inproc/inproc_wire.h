// A delay line for the in-process fabric: messages wait latency + jitter before they arrive, and
// view-change messages are lost with a given probability, so the membership agreement can be run
// at size under the conditions of a real network (bench/agreement_bench.cc). As over a TCP
// connection, the messages from one slot to another arrive in the order they were sent. One
// thread delivers whatever is due, in order of due time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/transport.h"

namespace gossip::peer {

struct LinkModel {
  double latency_s = 0;  // one-way delay of every message
  double jitter_s = 0;   // plus a uniform draw in [0, jitter_s)
  double loss = 0;       // chance that a view-change message (kView) is lost
  uint64_t seed = 1;
  bool active() const { return latency_s > 0 || jitter_s > 0 || loss > 0; }
};

class InprocWire {
 public:
  // `arrive(to_slot, message)` is called on the wire's thread, with no lock of the wire held.
  InprocWire(LinkModel model, std::function<void(int, InMessage)> arrive);
  ~InprocWire();  // drops what is still on the way
  InprocWire(const InprocWire&) = delete;
  InprocWire& operator=(const InprocWire&) = delete;

  // Puts `message` on the way from `from_slot` to `to_slot` (or loses it, per the model).
  void send(int from_slot, int to_slot, InMessage message);
  uint64_t lost() const;

 private:
  struct InFlight {
    Clock::time_point due;
    uint64_t order;  // ties keep the order of sending
    int to_slot;
    InMessage message;
    bool operator>(const InFlight& o) const { return due != o.due ? due > o.due : order > o.order; }
  };
  void run();

  const LinkModel model_;
  std::function<void(int, InMessage)> arrive_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> queue_;  // guarded by mutex_
  std::mt19937_64 random_;  // guarded by mutex_
  uint64_t sent_ = 0, lost_ = 0;  // guarded by mutex_
  std::unordered_map<uint64_t, Clock::time_point> last_due_;  // per (from, to): guarded by mutex_
  bool stopping_ = false;         // guarded by mutex_
  std::thread thread_;
};

}  // namespace gossip::peer
