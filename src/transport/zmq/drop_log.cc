#include "transport/zmq/drop_log.h"

#include "common/log.h"

namespace gossip::peer {

bool DropLog::take_budget(const std::string& sender) {
  if (window_lines_ >= kLinesPerWindow) return false;
  if (!sender.empty()) {
    auto it = per_sender_.find(sender);
    if (it == per_sender_.end()) {
      if (per_sender_.size() >= kMaxSenders) per_sender_.clear();  // bounded; the window budget still holds
      it = per_sender_.emplace(sender, 0).first;
    }
    if (it->second >= kLinesPerSender) return false;
    ++it->second;
  }
  ++window_lines_;
  return true;
}

void DropLog::emit(const std::string& line) {
  ++lines_;
  log(line);
}

void DropLog::dropped(const std::string& prefix, const std::string& sender, const std::string& what,
                      Clock::time_point now) {
  tick(prefix, now);
  if (take_budget(sender))
    emit(prefix + "dropped a message from '" + escape_for_log(sender) + "': " + escape_for_log(what, 200));
  else
    ++suppressed_;
}

void DropLog::refused(const std::string& prefix, const std::string& line, Clock::time_point now) {
  tick(prefix, now);
  if (window_refusals_ < kRefusalLinesPerWindow) {
    ++window_refusals_;
    emit(prefix + line);
  } else {
    ++suppressed_;
    ++suppressed_refusals_;
  }
}

void DropLog::tick(const std::string& prefix, Clock::time_point now) {
  if (window_start_ == Clock::time_point{}) window_start_ = now;  // the first window
  if (now - window_start_ < kWindow) return;
  if (suppressed_ > 0)
    emit(prefix + std::to_string(suppressed_) + " more dropped messages or refused connections (" +
         std::to_string(suppressed_refusals_) + " connections) in the last " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - window_start_).count()) +
         " s were not logged one by one");
  window_start_ = now;
  window_lines_ = window_refusals_ = 0;
  suppressed_ = suppressed_refusals_ = 0;
}

}  // namespace gossip::peer
