#include "peer/live_ticker.h"

#include <cmath>
#include <cstdlib>

#include "common/error.h"

namespace gossip::peer {

LiveTicker::LiveTicker() {
  const char* text = std::getenv("GOSSIP_LIVE_S");
  if (!text || !*text) return;
  char* end = nullptr;
  const double s = std::strtod(text, &end);
  if (*end || !std::isfinite(s) || s <= 0 || s > 3600)
    throw Error("GOSSIP_LIVE_S", "'" + std::string(text) + "' is not a number of seconds in (0, 3600]");
  period_s_ = s;
}

bool LiveTicker::due() {
  if (period_s_ <= 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    last_ = now;
    return false;
  }
  if (std::chrono::duration<double>(now - last_).count() < period_s_) return false;
  last_ = now;
  return true;
}

}  // namespace gossip::peer
