// Live progress for gossip-launch's terminal view: when the launcher sets GOSSIP_LIVE_S (seconds),
// the peer prints a "live step ..." line at most that often, between its log_every step lines, so
// the view's rows move even when step lines are minutes apart. Unset (the default, and whenever
// the launcher's output is not a terminal): no live lines at all.
#pragma once

#include <chrono>
#include <string>

namespace gossip::peer {

class LiveTicker {
 public:
  // Reads GOSSIP_LIVE_S; a value that is not a positive number of seconds is an error naming it.
  LiveTicker();
  // True once every period (never when live lines are off); the first call starts the clock.
  bool due();

 private:
  double period_s_ = 0;
  std::chrono::steady_clock::time_point last_{};
  bool started_ = false;
};

}  // namespace gossip::peer
